"""The accuracy stage of a run: build the table, fit (or reuse) the predictor.

The table is a stage of its own (`hwnas accuracy build`): one row is one subnet evaluated on the
validation split, a second on the shipped supernet and minutes on ImageNet-size images on a CPU.
So the stages that need a predictor (search) fit it on the table as it is and grow the table only
when asked for a size.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwnas.accuracy.predictors import AccuracyPredictor, MLPEnsemblePredictor, load_predictor_file
from hwnas.accuracy.select import fit_best_accuracy
from hwnas.accuracy.table import build_accuracy_table, read_accuracy_table, table_codes_top1
from hwnas.errors import CheckpointError, HwnasError, InputError, SettingError
from hwnas.run import RunFiles

__all__ = ["ACCURACY_PREDICTOR", "MIN_ROWS", "fit_accuracy_predictor", "load_accuracy_predictor",
           "ensure_accuracy_predictor", "check_accuracy_table", "describe_accuracy_predictor",
           "estimate_table_seconds"]

ACCURACY_PREDICTOR = RunFiles(Path("")).accuracy_predictor  # relative to a run directory
MIN_ROWS = 10  # the out-of-fold selection's floor (5 folds of 2 held-out subnets)
SUGGESTED_ROWS = 100  # what a refusal suggests building: a predictor that ranks usefully
# A rough CPU rate for cost estimates: the default family's subnets ran at 18-176 images/s on this
# project's 2-core CPU (experiments/results/imagenet_stage_times.json), about 8e9 MACs/s.
CPU_MACS_PER_S = 8e9
# The held-out images a run's data does not state (Fashion-MNIST's and CIFAR's validation splits
# are 5,000; `--data imagefolder:PATH` states its 10,000).
TYPICAL_VAL_IMAGES = 5000


def fit_accuracy_predictor(run, *, seed: int = 0, candidates=None, save: bool = True
                           ) -> tuple[AccuracyPredictor, dict[str, Any]]:
    """Choose and fit the accuracy predictor on the run's table by out-of-fold error; saved to
    `<run>/predictors/accuracy.json` (+ .npz). Returns (predictor, report)."""
    df, m, y = table_codes_top1(run)
    if len(df) < MIN_ROWS:
        raise InputError(f"the accuracy table of {run.run_dir} has {len(df)} subnets; fitting needs "
                         f"at least {MIN_ROWS}: build it with `hwnas accuracy build --run {run.run_dir}`")
    pred, report = fit_best_accuracy(run.space, m, y, n_classes=run.n_classes, candidates=candidates,
                                     seed=seed)
    pred.meta["table_sha256"] = table_fingerprint(df)
    if save:
        pred.save(run.files.accuracy_predictor)
    return pred, report


def load_accuracy_predictor(run_dir: str | Path) -> AccuracyPredictor:
    return load_predictor_file(Path(run_dir) / ACCURACY_PREDICTOR)


def _table_rows(run) -> int:
    return len(read_accuracy_table(run.run_dir, space=run.space))


def table_fingerprint(df) -> str:
    """SHA-256 of a table's (id, top-1) rows in id order: what a predictor was fitted on, so an
    edited or rebuilt table (same size or smaller) is never predicted by the old fit."""
    rows = sorted(f"{i}:{float(t):.6f}" for i, t in zip(df["id"].astype(str), df["top1"]))
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _current_predictor(run, rows: int) -> AccuracyPredictor | None:
    """The saved predictor when it stands on the table as it is now (None: to be fitted; an
    older format or a damaged file is refitted too). Predictors saved before fingerprints stand
    when they were fitted on at least as many rows."""
    if not (Path(run.run_dir) / ACCURACY_PREDICTOR).exists():
        return None
    try:
        pred = load_accuracy_predictor(run.run_dir)
    except CheckpointError:
        return None
    fitted_on = pred.meta.get("table_sha256")
    if fitted_on is not None:
        return pred if fitted_on == table_fingerprint(read_accuracy_table(run.run_dir, space=run.space)) else None
    return pred if int(pred.meta.get("n_train", 0)) >= rows else None


def estimate_table_seconds(run, n: int) -> float:
    """Rough CPU seconds to evaluate `n` subnets of the run into its accuracy table: BN
    recalibration plus the validation split per subnet, at the median sampled subnet's MACs
    (`CPU_MACS_PER_S`; a GPU is far faster); evaluations the package ships cost nothing. Reads no
    data and loads no weights."""
    from hwnas.accuracy.precomputed import precomputed_table
    from hwnas.accuracy.table import read_accuracy_table
    from hwnas.supernet.data import BN_IMAGES

    shipped = precomputed_table(run, split="val", seed=0, bn_images=BN_IMAGES, max_batches=None)
    n = max(n - (0 if shipped is None else len(read_accuracy_table(shipped.parent, shipped.name, run.space))), 0)
    space = run.space
    _, macs = space.family.count_params_macs(space.sample_matrix(64, 0), space.width_mult, run.n_classes)
    return n * (BN_IMAGES + _val_images(run)) * float(np.median(macs)) / CPU_MACS_PER_S


def _val_images(run) -> int:
    """About how many validation images the run's dataset holds out, from its config alone."""
    from hwnas.supernet.checkpoint_meta import load_checkpoint_meta, shipped_checkpoint
    from hwnas.supernet.fashion_mnist import VAL_IMAGES
    from hwnas.supernet.pretrained import data_config_of

    try:
        cfg = data_config_of(load_checkpoint_meta(run.supernet or shipped_checkpoint()), run.data)
    except HwnasError:  # no dataset named yet: the build itself says so
        return TYPICAL_VAL_IMAGES
    if cfg.val_images is not None:
        return cfg.val_images
    # the 5,000 embedded MNIST digits, `val_fraction` of them held out
    return {"fashion-mnist": VAL_IMAGES, "mnist-embedded": round(5000 * cfg.val_fraction)}.get(
        cfg.name, TYPICAL_VAL_IMAGES)


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 1.5 * size:
            return f"about {seconds / size:.0f} {unit}"
    return "under a minute" if seconds < 60 else "about a minute"


def check_accuracy_table(run, n: int | None = None) -> int:
    """The rows of the run's accuracy table, after checking, without evaluating anything, that a
    predictor can come of it: with `n` None (use the table as it is) the table must hold at least
    `MIN_ROWS` subnets (or the saved predictor must stand on all of it); a table to be grown to `n`
    must reach `MIN_ROWS`. One line (InputError) saying how to build the table and what it costs."""
    rows = _table_rows(run)
    if n is not None:
        if n < 1 or max(rows, n) < MIN_ROWS:
            raise SettingError(f"{{accuracy_samples}} must be at least {MIN_ROWS} (the fewest subnets an "
                               f"accuracy predictor is fitted on), got {n}", "accuracy_samples")
        return rows
    if rows >= MIN_ROWS or _current_predictor(run, rows) is not None:
        return rows
    missing = SUGGESTED_ROWS - rows
    cost = (f"{missing} subnets evaluated on the validation split: "
            f"{_duration(estimate_table_seconds(run, missing))} on a 2-core CPU")
    have = ("has no accuracy table" if rows == 0 else
            f"has {rows} subnets in its accuracy table, too few for an accuracy predictor (at least {MIN_ROWS})")
    raise SettingError(f"run {run.run_dir} {have}; build it first: `hwnas accuracy build --run {run.run_dir} "
                       f"--samples {SUGGESTED_ROWS}` ({cost}), or set {{accuracy_samples}} to {SUGGESTED_ROWS}",
                       "accuracy_samples")


def describe_accuracy_predictor(run, pred: AccuracyPredictor, rows: int) -> str:
    """One line: how many subnets the accuracy predictor stands on, its out-of-fold quality,
    and whether more rows would help."""
    oof = pred.out_of_fold
    quality = (f"out-of-fold MAE {oof['mae']:.2f} top-1 points, Kendall tau {oof['kendall_tau']:.2f}"
               if oof else "no out-of-fold report (refit it with `hwnas accuracy fit`)")
    n_train = int(pred.meta.get("n_train", rows))
    fitted = "" if n_train == rows else f" (the predictor was fitted on {n_train})"
    line = f"accuracy table: {rows} subnets{fitted}; predictor {pred.name}: {quality}"
    if rows < SUGGESTED_ROWS:
        line += (f" (a small table: subnets are ranked roughly; `hwnas accuracy build --run {run.run_dir} "
                 f"--samples {SUGGESTED_ROWS}` grows it)")
    elif rows < MLPEnsemblePredictor.min_rows:
        line += f" (from {MLPEnsemblePredictor.min_rows} subnets the MLP-ensemble predictor is tried too)"
    return line


def ensure_accuracy_predictor(run, n: int | None = None, *, seed: int = 0,
                              progress: Callable[..., Any] | None = None, **table_kw: Any) -> AccuracyPredictor:
    """The run's accuracy predictor, fitted on the accuracy table as it is (`n` None) or after
    growing the table to `n` subnets (only those it lacks are evaluated: `build_accuracy_table`
    with `table_kw`). A saved predictor is reused when it stands on the whole table, else
    refitted (after `hwnas accuracy build --samples` grew it, or from an older format). A table
    too small for a predictor that `n` does not grow is refused in one line before anything runs
    (`check_accuracy_table`). `progress("accuracy-predictor", message=...)` says what the
    predictor stands on (`describe_accuracy_predictor`)."""
    rows = check_accuracy_table(run, n)
    if n is not None and rows < n:
        build_accuracy_table(run, n, seed=seed, progress=progress, **table_kw)
        rows = _table_rows(run)
    pred = _current_predictor(run, rows)
    if pred is None:
        if progress:
            progress("fit-accuracy")
        pred = fit_accuracy_predictor(run, seed=seed)[0]
    if progress:
        progress("accuracy-predictor", message=describe_accuracy_predictor(run, pred, rows))
    return pred
