"""Evaluations that ship with the package: subnets of the shipped supernet, evaluated once on its
embedded validation split exactly as `hwnas accuracy build` evaluates them (same sample, BN
calibration, split), so a fresh run does not spend minutes recomputing numbers that come out the
same on every machine.

A row is used only when everything that decides it matches what is recorded beside the table
(``assets/<shipped>_accuracy.json``): the shipped weights' sha256, the dataset config, the split,
the calibration images and seed, no batch limit. Anything else is evaluated as usual.
`experiments/make_precomputed_accuracy.py` writes the table from a run built with
`hwnas accuracy build`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["precomputed_table", "precomputed_key", "precomputed_paths"]


def precomputed_paths() -> tuple[Path, Path]:
    """(table CSV, key JSON) of the shipped supernet's precomputed evaluations."""
    from hwnas.supernet.pretrained import shipped_checkpoint

    stem = shipped_checkpoint()
    return stem.with_name(stem.name + "_accuracy.csv"), stem.with_name(stem.name + "_accuracy.json")


def precomputed_key(run: Any, *, split: str, seed: int, bn_images: int) -> dict[str, Any] | None:
    """What decides an evaluation of the run's subnets (None when the run's supernet is not the
    shipped one: nothing precomputed can apply)."""
    from hwnas.supernet.checkpoint import load_checkpoint_meta
    from hwnas.supernet.pretrained import data_config_of, shipped_checkpoint

    if run.supernet is not None:
        return None
    meta = load_checkpoint_meta(shipped_checkpoint())
    return {"supernet_sha256": str(meta["weights"]["sha256"]),
            "data": data_config_of(meta, run.data).model_dump(mode="json"),
            "split": split, "seed": int(seed), "bn_images": int(bn_images)}


def precomputed_table(run: Any, *, split: str, seed: int, bn_images: int, max_batches: int | None
                      ) -> Path | None:
    """The shipped accuracy table when its evaluations apply to this run, else None (the caller
    reads it: `hwnas.accuracy.table.read_accuracy_table`)."""
    table, key_file = precomputed_paths()
    if max_batches is not None or not (table.exists() and key_file.exists()):
        return None
    key = precomputed_key(run, split=split, seed=seed, bn_images=bn_images)
    try:
        recorded = json.loads(key_file.read_text())
    except (OSError, ValueError):
        return None  # a damaged asset only costs the time to evaluate
    if key is None or recorded.get("key") != key:
        return None
    return table
