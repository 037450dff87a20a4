"""Load a trained supernet (the shipped one by default) and ship a training run's result.

The shipped supernet lives in ``hwnas/assets/`` as fp16 safetensors + JSON: the default family at W=1.0
trained on Fashion-MNIST's original training images (`experiments/supernet_fashion.yaml`, then
`experiments/supernet_fashion_elastic.yaml`), evaluated on the embedded copy, so search and export
work right after install with nothing to download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from hwnas.errors import CheckpointError
from hwnas.supernet.checkpoint import load_checkpoint, load_checkpoint_meta, save_checkpoint
from hwnas.supernet.checkpoint_meta import SHIPPED_NAME, shipped_checkpoint
from hwnas.supernet.data import DataConfig, DatasetName

__all__ = ["SHIPPED_NAME", "shipped_checkpoint", "load_supernet", "data_config_of", "ship_checkpoint"]

def load_supernet(stem: str | Path | None = None) -> tuple[Any, dict[str, Any]]:
    """Build the network a checkpoint describes (its family's supernet) and load its weights;
    returns (model, meta). Raises CheckpointError (one line) for a missing, corrupt or foreign
    checkpoint."""
    from hwnas.families import DEFAULT_FAMILY, get_family

    stem = shipped_checkpoint() if stem is None else Path(stem)
    meta = load_checkpoint_meta(stem)
    family = get_family(meta.get("family", DEFAULT_FAMILY))
    space = family.space_from_dict(meta["space"])
    dropout = meta.get("extra", {}).get("config", {}).get("dropout", 0.1)
    model = family.supernet_for(space, meta["n_classes"], dropout)
    load_checkpoint(stem, model)
    return model.eval(), meta


def data_config_of(meta: dict[str, Any], data: DataConfig | dict[str, Any] | None = None) -> DataConfig:
    """The dataset a checkpoint's subnets are evaluated on: `data` (a run's ``--data``) when given,
    else the one it was trained on (same split seed, so val/test stay held out)."""
    if data is not None:
        cfg = DataConfig.model_validate(data)
        if cfg.name == "imagefolder" and cfg.classes is None and meta.get("class_names"):
            cfg = cfg.model_copy(update={"classes": list(meta["class_names"])})
        return cfg
    cfg = meta.get("extra", {}).get("config", {}).get("data")
    if cfg:
        return DataConfig.model_validate(cfg)
    name = meta.get("dataset", "mnist-embedded")
    if name not in get_args(DatasetName):  # e.g. "imagenet" (an imported Once-for-All supernet)
        raise CheckpointError(f"this supernet was trained on {name!r} and the run names no dataset to "
                              "evaluate it on; give one with --data imagefolder:PATH (train/ and val/ "
                              "class folders), e.g. `hwnas profile --run R --data imagefolder:PATH`")
    return DataConfig(name=name)


def ship_checkpoint(run_stem: str | Path, dest_stem: str | Path | None = None,
                    embedded_data: bool = False) -> Path:
    """Copy a finished run's weights as fp16 (no optimizer state) to `dest_stem` (default: assets).
    `embedded_data`: the recorded dataset becomes the package's embedded copy (a run trained on
    `fashion-mnist:PATH` is then evaluated, after install, on the same split without PATH)."""
    model, meta = load_supernet(run_stem)
    dest = shipped_checkpoint() if dest_stem is None else Path(dest_stem)
    keep = {k: meta[k] for k in ("family", "space", "n_classes", "dataset", "class_names", "mean", "std", "phase",
                                 "step", "epoch", "extra") if k in meta}
    data = keep.get("extra", {}).get("config", {}).get("data")
    if embedded_data and data:
        data["root"] = None
    return save_checkpoint(dest, model, keep, rng=False, dtype="float16")

