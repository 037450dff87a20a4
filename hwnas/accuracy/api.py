"""The accuracy stage of a run: build the table, fit (or reuse) the predictor."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwnas.accuracy.predictors import AccuracyPredictor, load_predictor_file
from hwnas.accuracy.select import fit_best_accuracy
from hwnas.accuracy.table import build_accuracy_table, frame_codes, read_accuracy_table
from hwnas.errors import CheckpointError, InputError
from hwnas.run import RunFiles

__all__ = ["ACCURACY_PREDICTOR", "fit_accuracy_predictor", "load_accuracy_predictor",
           "ensure_accuracy_predictor"]

ACCURACY_PREDICTOR = RunFiles(Path("")).accuracy_predictor  # relative to a run directory
MIN_ROWS = 20


def fit_accuracy_predictor(run, *, seed: int = 0, candidates=None, save: bool = True
                           ) -> tuple[AccuracyPredictor, dict[str, Any]]:
    """Choose and fit the accuracy predictor on the run's table by out-of-fold error; saved to
    `<run>/predictors/accuracy.json` (+ .npz). Returns (predictor, report)."""
    df = read_accuracy_table(run.run_dir, space=run.space)
    if len(df) < MIN_ROWS:
        raise InputError(f"the accuracy table of {run.run_dir} has {len(df)} subnets; fitting needs "
                         f"at least {MIN_ROWS}: build it with `hwnas accuracy build --run {run.run_dir}`")
    m = frame_codes(run.space, df, str(Path(run.run_dir) / "accuracy.csv"))
    y = df["top1"].to_numpy(dtype=np.float64)
    pred, report = fit_best_accuracy(run.space, m, y, n_classes=run.n_classes, candidates=candidates,
                                     seed=seed)
    if save:
        pred.save(Path(run.run_dir) / ACCURACY_PREDICTOR)
    return pred, report


def load_accuracy_predictor(run_dir: str | Path) -> AccuracyPredictor:
    return load_predictor_file(Path(run_dir) / ACCURACY_PREDICTOR)


def ensure_accuracy_predictor(run, n: int = 1000, *, seed: int = 0,
                              progress: Callable[..., Any] | None = None, **table_kw: Any) -> AccuracyPredictor:
    """The run's accuracy predictor. Without one, the table is built up to `n` subnets and the
    predictor fitted on it; an existing predictor is reused, or refitted from the table when it is
    from an older format or was fitted on fewer rows than the table now holds (after
    `hwnas accuracy build --samples` grew it)."""
    path = Path(run.run_dir) / ACCURACY_PREDICTOR
    if path.exists():
        try:
            pred = load_accuracy_predictor(run.run_dir)
            if int(pred.meta.get("n_train", 0)) >= len(read_accuracy_table(run.run_dir, space=run.space)):
                return pred
        except CheckpointError:
            pass  # an older format or a damaged file: refitted from the table below
    elif len(read_accuracy_table(run.run_dir, space=run.space)) < n:
        build_accuracy_table(run, n, seed=seed, progress=progress, **table_kw)
    if progress:
        progress("fit-accuracy")
    return fit_accuracy_predictor(run, seed=seed)[0]
