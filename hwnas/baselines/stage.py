"""Baselines as a stage of a run: train a timm model on the run's data, store its test top-1,
and read the baselines that apply to a run (its own, plus the accuracies shipped for the shipped
supernet's dataset).

A baseline lives in ``RUN/baselines/<name>-r<resolution>.json`` (published by rename under the
run's lock); its training saves every epoch in ``RUN/baselines/.<name>-r<resolution>.training``, so
a stopped `hwnas baseline` given the same command continues. Its latency is measured like any
reference model, by the profiler on the run's devices (`profile_key`): weights do not change it,
so a shipped accuracy is paired with a fresh measurement on the user's device.
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from typing import Any, Callable

from hwnas.baselines.training import BaselineRecipe, train_baseline
from hwnas.errors import InputError

__all__ = ["baseline_stem", "profile_key", "parse_model", "shipped_baselines", "run_baselines",
           "train_run_baseline", "SHIPPED_DATASET"]

#: the dataset whose baseline accuracies ship with hwnas (hwnas/assets/baselines/)
SHIPPED_DATASET = "fashion-mnist"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def parse_model(spec: str) -> str:
    """``timm:NAME`` -> NAME (one line for anything else)."""
    name = spec[5:] if spec.startswith("timm:") else ""
    if not _NAME.fullmatch(name):
        raise InputError(f"--model {spec!r} must look like timm:MODEL_NAME, e.g. timm:mobilenetv3_small_100")
    return name


def baseline_stem(name: str, resolution: int) -> str:
    return f"{name}-r{resolution}"


def profile_key(name: str, resolution: int) -> str:
    """The key a baseline's latency has in the run's measurement store (`hwnas profile --reference`)."""
    return f"timm:{name}@r{resolution}"


def _valid(record: Any) -> bool:
    return (isinstance(record, dict) and isinstance(record.get("name"), str) and _NAME.fullmatch(record["name"])
            and isinstance(record.get("resolution"), int) and isinstance(record.get("top1"), (int, float))
            and isinstance(record.get("n_test"), int))


def shipped_baselines(dataset: str = SHIPPED_DATASET) -> list[dict[str, Any]]:
    """The baseline accuracies shipped for `dataset` (trained with `experiments/train_baselines.py`
    on the shipped supernet's training images, scored on the official test split); [] for others."""
    if dataset != SHIPPED_DATASET:
        return []
    path = resources.files("hwnas") / "assets" / "baselines" / f"{dataset}.json"
    if not path.is_file():
        return []
    doc = json.loads(path.read_text())
    return [{**r, "source": "shipped", "recipe": doc.get("recipe")} for r in doc.get("rows", []) if _valid(r)]


def _applies_shipped(run: Any) -> bool:
    """The shipped accuracies stand for the shipped supernet's dataset: Fashion-MNIST with its
    official test split (the embedded copy holds it whole), whichever copy the run reads."""
    data = run.data or {}
    return run.supernet is None and data.get("name", SHIPPED_DATASET) == SHIPPED_DATASET


def run_baselines(run: Any) -> list[dict[str, Any]]:
    """Every baseline of a run: those trained in it, then the shipped ones it has no own row for."""
    own: dict[tuple[str, int], dict[str, Any]] = {}
    folder = run.files.baselines
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if _valid(record):
            own[(record["name"], record["resolution"])] = {**record, "source": "run"}
    shipped = shipped_baselines() if _applies_shipped(run) else []
    rows = list(own.values()) + [r for r in shipped if (r["name"], r["resolution"]) not in own]
    return sorted(rows, key=lambda r: (r["name"], r["resolution"]))


def train_run_baseline(run: Any, name: str, resolution: int | None = None, recipe: BaselineRecipe | None = None,
                       data: Any = None, progress: Callable[[int, int, str], Any] | None = None) -> dict[str, Any]:
    """Train timm's `name` alone on the run's data at `resolution` (default: the space's largest),
    score it on every test image and store the record in the run; returns it."""
    from hwnas.fileio import atomic_write_json, file_lock
    from hwnas.supernet.checkpoint_meta import load_checkpoint_meta, shipped_checkpoint
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.pretrained import data_config_of

    recipe = recipe or BaselineRecipe()
    r = int(resolution or max(run.space.r_choices))
    if not 8 <= r <= 1024:
        raise InputError(f"--resolution must be within 8..1024, got {r}")
    stem = baseline_stem(name, r)
    folder = run.files.baselines
    meta = load_checkpoint_meta(run.supernet if run.supernet is not None else shipped_checkpoint())
    data_cfg = data_config_of(meta, data if data is not None else run.data)
    try:
        with file_lock(run.files.root / ".locks" / f"baseline-{stem}.lock", blocking=False):
            loaders = build_loaders(data_cfg.model_copy(update={"batch_size": recipe.batch_size}))
            state = folder / f".{stem}.training"
            result = train_baseline(name, r, loaders, recipe, state=state / "net", progress=progress)
            record = {**result.to_dict(), "recipe": recipe.to_dict(), "dataset": loaders.dataset,
                      "data": data_cfg.model_dump(mode="json"), "train_images": len(loaders.train.dataset),
                      "split": "test"}
            with run.files.lock("baselines"):
                atomic_write_json(folder / f"{stem}.json", record)
            shutil.rmtree(state, ignore_errors=True)
            return record
    except BlockingIOError:
        raise InputError(f"baseline {stem} is being trained in {run.files.root} by another process; wait "
                         "for it to finish") from None
