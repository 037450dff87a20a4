"""Carry a trained supernet to another dataset: `hwnas train --init-from STEM --data SPEC`.

The source's weights are loaded into a supernet of the same family and width whose space's largest
choices are the source's (smaller choices may be added, e.g. depth 1: the same tensors); its classifier
is kept when the target's classes are the source's (same names, same order) and replaced by a fresh
one otherwise. Training then continues with the whole space elastic at once (the source went
through progressive shrinking already): a few epochs of the largest subnet alone, so the new
classifier and the features adapt, then every step trains the largest subnet on the labels and
three more (the smallest, two random) on the labels plus its soft output (in-place distillation).

The checkpoint records where it came from (``extra.transfer``: the source's path, the sha256 of its
weights, its dataset and classes, whether the classifier was kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.errors import InputError
from hwnas.families import DEFAULT_FAMILY

if TYPE_CHECKING:
    import torch.nn as nn

__all__ = ["TRANSFER_RECIPE", "CLASSIFIER", "source_stem", "load_source"]

#: what `hwnas train --init-from` runs without --config, chosen by experiment (the shipped
#: Fashion-MNIST supernet carried to the embedded MNIST digits, `bench_transfer.py --part recipes`):
#: 16 elastic epochs instead of 8 lifted 12 subnets' mean test top-1 from 97.8 to 98.4% in 22% of
#: a from-scratch supernet's training time (docs/own-data.md)
TRANSFER_RECIPE: dict[str, Any] = {
    "phases": {"full": {"epochs": 2, "lr": 0.02, "warmup_epochs": 0.5},
               "elastic": {"epochs": 16, "lr": 0.02}},
    "distill": "inplace", "sandwich": True, "subnets_per_step": 4, "kd_ratio": 1.0,
    "label_smoothing": 0.1, "weight_decay": 3e-5, "checkpoint_every": 50,
}
#: the classifier's module in every family's networks (Once-for-All's name)
CLASSIFIER = "classifier."


def source_stem(init_from: str | Path) -> Path:
    """`--init-from`'s checkpoint stem: ``shipped`` is the supernet that ships with hwnas."""
    if str(init_from) == "shipped":
        from hwnas.supernet.pretrained import shipped_checkpoint

        return shipped_checkpoint()
    return Path(init_from)


def load_source(cfg: Any, model: "nn.Module", class_names: list[str]) -> dict[str, Any]:
    """Load the source checkpoint's weights into `model` (built for the target's classes); returns
    the record the new checkpoint keeps. One line for a source that does not fit."""
    import torch

    from hwnas.supernet.checkpoint import load_checkpoint_meta, read_weights

    stem = source_stem(cfg.init_from)
    meta = load_checkpoint_meta(stem)
    family = meta.get("family", DEFAULT_FAMILY)
    if family != cfg.family:
        raise InputError(f"--init-from {cfg.init_from} is an {family} supernet but the training config "
                         f"says {cfg.family}; leave the family out (it is the source's) or start "
                         "from a checkpoint of that family")
    source_width, width = meta["space"].get("width_mult", 1.0), cfg.search_space().width_mult
    if float(source_width) != float(width):
        raise InputError(f"--init-from {cfg.init_from}: its width {source_width} differs from the "
                         f"config's {width}; set space.width_mult: {source_width}")
    if len(class_names) < 2:
        raise InputError(f"the target dataset has {len(class_names)} class; a classifier needs at "
                         "least 2 (one subfolder per class)")
    source_classes = list(meta.get("class_names") or [])
    keep = source_classes == list(class_names)
    tensors = read_weights(stem)
    if not keep:
        tensors = {k: v for k, v in tensors.items() if not k.startswith(CLASSIFIER)}
    expected = model.state_dict()
    missing = [k for k in expected if k not in tensors and (keep or not k.startswith(CLASSIFIER))]
    odd = [k for k, t in tensors.items() if k not in expected or expected[k].shape != t.shape]
    if missing or odd:
        raise InputError(f"--init-from {cfg.init_from} does not fit an {family} supernet "
                         f"({len(missing)} tensors missing, {len(odd)} unexpected or reshaped, e.g. "
                         f"{(missing or odd)[0]}); the space's largest choices must be the source's "
                         f"({meta['space']}), or it is damaged or from another hwnas")
    with torch.no_grad():
        model.load_state_dict(tensors, strict=False)
    return {"source": str(stem), "source_sha256": meta["weights"]["sha256"],
            "source_dataset": meta.get("dataset"), "source_classes": len(source_classes) or meta.get("n_classes"),
            "classifier": "kept" if keep else "new",
            "recipe": {"phases": cfg.model_dump(mode="json")["phases"], "distill": cfg.distill}}
