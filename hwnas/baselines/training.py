"""Train one timm model from scratch on a dataset, resumably, and score it on the test split.

The recipe is the shipped supernet's for its full network (SGD + Nesterov, a warm-up epoch then
cosine from lr 0.1, label smoothing 0.1, weight decay 5e-5, dropout 0.1 before the classifier, the
data's flips and 2-pixel shifts, batch 128), so a baseline and the supernet see the same images the
same way; only the epochs differ (the supernet's subnets share 18+ epochs, a baseline gets its own).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from hwnas.errors import InputError

__all__ = ["BaselineRecipe", "BaselineResult", "build_baseline", "train_baseline"]


@dataclass(frozen=True)
class BaselineRecipe:
    """How a baseline trains (recorded beside its result)."""

    epochs: int = 30
    lr: float = 0.1
    warmup_epochs: float = 1.0
    batch_size: int = 128
    weight_decay: float = 5e-5
    label_smoothing: float = 0.1
    dropout: float = 0.1
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "optimizer": "sgd-nesterov momentum 0.9", "schedule": "linear warm-up, cosine",
                "augmentation": "the dataset's (Fashion-MNIST: flips, 2-pixel shifts)"}


@dataclass(frozen=True)
class BaselineResult:
    name: str  # timm's model name
    resolution: int
    top1: float  # % on the test split
    n_test: int
    epochs: int
    train_s: float  # this call's training time
    params: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_baseline(name: str, n_classes: int, dropout: float = 0.1, seed: int = 0) -> Any:
    """timm's `name` with `n_classes` outputs and random weights (never pretrained: nothing is
    downloaded). InputError for a name timm does not know."""
    import torch

    import timm  # the CLI names the extra (hwnas[timm]) when it is missing

    if name not in timm.list_models():
        close = [m for m in timm.list_models(f"*{name.split('_')[0]}*")][:5]
        raise InputError(f"timm has no model {name!r}" + (f"; close: {', '.join(close)}" if close else "")
                         + " (timm.list_models() lists them)")
    torch.manual_seed(seed)
    return timm.create_model(name, pretrained=False, num_classes=n_classes, drop_rate=dropout)


def train_baseline(name: str, resolution: int, loaders: Any, recipe: BaselineRecipe = BaselineRecipe(),
                   state: str | os.PathLike[str] | None = None,
                   progress: Callable[[int, int, str], Any] | None = None) -> BaselineResult:
    """Train `name` alone at `resolution` on `loaders.train`, resumable from `state` (a checkpoint
    stem saved after every epoch), then evaluate on every image of `loaders.test`."""
    from hwnas.supernet.bn import evaluate
    from hwnas.supernet.finetune import FinetuneSettings, train_alone

    loaders.require_split("test")
    if loaders.train.batch_size != recipe.batch_size:
        raise InputError(f"the recipe trains batches of {recipe.batch_size}; the loader gives "
                         f"{loaders.train.batch_size}")
    net = build_baseline(name, loaders.n_classes, recipe.dropout, recipe.seed)
    settings = FinetuneSettings(epochs=recipe.epochs, lr=recipe.lr, batch_size=recipe.batch_size, kd_ratio=0.0,
                                label_smoothing=recipe.label_smoothing, weight_decay=recipe.weight_decay,
                                seed=recipe.seed,  # a short run warms up for a tenth of it
                                warmup_epochs=min(recipe.warmup_epochs, recipe.epochs / 10))
    t0 = time.time()
    train_alone(net, loaders, resolution, settings, resume=state, progress=progress, network=f"timm:{name}")
    train_s = time.time() - t0
    res = evaluate(net.cpu().eval(), loaders.test, resolution=resolution)
    return BaselineResult(name=name, resolution=resolution, top1=round(float(res["top1"]), 2),
                          n_test=int(res.get("n", len(loaders.test.dataset))), epochs=recipe.epochs,
                          train_s=round(train_s, 1), params=sum(p.numel() for p in net.parameters()))
