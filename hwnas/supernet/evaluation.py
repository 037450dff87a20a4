"""Accuracy of subnets taken from a trained supernet: extract, recalibrate BN, evaluate.

A subnet's BN statistics in the supernet are those of whatever subnets were trained last, so
every evaluation first recalibrates BN on a fixed calibration subset of the training split (the
same images for every subnet, so differences between subnets are not calibration noise).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.utils.data import DataLoader

from hwnas.errors import InputError
from hwnas.supernet.bn import evaluate, folded_for_eval, recalibrate_bn
from hwnas.supernet.data import BN_IMAGES, Loaders, calibration_loader

__all__ = ["evaluate_subnets", "subnets_of_checkpoint"]


def evaluate_subnets(model: Any, archs: Sequence[Any], loaders: Loaders, *,
                     split: str = "val", bn_images: int = BN_IMAGES, seed: int = 0,
                     max_batches: int | None = None,
                     progress: Callable[[int, int], Any] | None = None) -> list[dict[str, Any]]:
    """top-1 (%) and loss of each arch on `split` ("val" or "test") after BN recalibration.

    `model`: any family's supernet (`hwnas.supernet.pretrained.load_supernet`); `archs`: its archs
    (the family's arch type), each with `.r`
    and `.id`, as its ``get_subnet`` accepts them."""
    if split not in ("val", "test"):
        raise InputError(f"split must be 'val' or 'test', got {split!r}")
    split_loader: DataLoader = getattr(loaders, split)
    # eval-mode results do not depend on the batch; bigger batches are faster on CPU
    target = DataLoader(split_loader.dataset, batch_size=max(split_loader.batch_size, 250), shuffle=False,
                        num_workers=split_loader.num_workers)
    calib = calibration_loader(loaders.train, n_images=bn_images, seed=seed)
    n_calib_batches = len(calib)
    rows = []
    for i, arch in enumerate(archs):
        # channels_last weights: oneDNN's depthwise convolutions are faster in that layout on CPU
        subnet = model.get_subnet(arch).to(memory_format=torch.channels_last)
        recalibrate_bn(subnet, calib, n_calib_batches, resolution=arch.r)
        res = evaluate(folded_for_eval(subnet), target, resolution=arch.r, max_batches=max_batches)
        rows.append({"id": arch.id, "top1": res["top1"], "loss": res["loss"], "n": res["n"]})
        if progress:
            progress(i + 1, len(archs))
    return rows


def subnets_of_checkpoint(checkpoint=None, *, table=None, arch_json: str | None = None, data=None
                          ) -> tuple[Any, list[Any], Loaders]:
    """(supernet, archs, loaders) to `evaluate_subnets` with: the subnets in a CSV `table` (the
    checkpoint family's flat rows, values) or one OFA JSON `arch_json`, of `checkpoint` (None: the
    shipped supernet), on its dataset or `data` (a `DataConfig`). Every input error is raised here,
    before anything is evaluated."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.families.tables import read_arch_frame
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    if (table is None) == (arch_json is None):
        raise InputError("give exactly one of --table FILE.csv or --arch JSON")
    model, meta = load_supernet(checkpoint)
    family = get_family(meta.get("family", DEFAULT_FAMILY))
    space = family.space_from_dict(meta["space"])
    archs = (read_arch_frame(space, table)[0] if table is not None
             else [space.validate(family.arch_from_json(arch_json, space.width_mult))])
    return model, archs, build_loaders(data_config_of(meta, data))
