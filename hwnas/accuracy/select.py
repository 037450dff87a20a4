"""Choose the accuracy predictor by out-of-fold error, as the latency side does.

Every candidate kind is scored by K-fold cross-validation on the run's accuracy table (the
out-of-fold predictions of all folds pooled, so every row counts once) on the folds the latency
side uses (`hwnas.crossval`); the lowest out-of-fold MAE wins (ties: the earlier, simpler
candidate). The latency side's one-SE rule is `criterion="one-se"`, not the default: judged on
held-out rows it was never better (+0.001 to +0.007 points MAE at 40-140 rows,
experiments/bench_accuracy_selection.py). The winner is refitted on the whole table, its
uncertainty is scaled so that out-of-fold errors are one sigma on average, and the report keeps
every candidate's numbers and the winner's learning curve.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from hwnas.accuracy.predictors import AccuracyPredictor, candidate_classes, make_accuracy_predictor
from hwnas.crossval import fold_splits, within_one_se
from hwnas.errors import InputError
from hwnas.latency.metrics import kendall_tau, rmse

__all__ = ["default_candidates", "regression_metrics", "cross_val_predict",
           "fit_best_accuracy"]

def default_candidates(n_rows: int) -> list[tuple[str, dict[str, Any]]]:
    """(kind, settings) candidates for a table of `n_rows`, simplest first: every registered kind
    with a `candidate_rank` proposes its own."""
    return [c for cls in candidate_classes() for c in cls.candidates(n_rows)]


def regression_metrics(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """RMSE / MAE / mean error (bias) in top-1 points, and Kendall tau (the order a search needs)."""
    err = np.asarray(pred, dtype=np.float64) - np.asarray(true, dtype=np.float64)
    return {"mae": float(np.mean(np.abs(err))), "rmse": rmse(pred, true), "bias": float(np.mean(err)),
            "kendall_tau": kendall_tau(pred, true), "n": int(len(err))}


def cross_val_predict(make, m: np.ndarray, y: np.ndarray, *, folds: int = 5, seed: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Pooled out-of-fold (prediction, sigma) for the predictor `make()` builds."""
    pred, std = np.empty(len(y)), np.empty(len(y))
    for train, test in fold_splits(len(y), folds, seed):  # the latency side's split (hwnas.crossval)
        p = make().fit(m[train], y[train], seed=seed)
        pred[test], std[test] = p.predict_with_std(m[test])
    return pred, std


CRITERIA = ("lowest", "one-se")


def fit_best_accuracy(space, m: np.ndarray, y: np.ndarray, *, n_classes: int = 10,
                      candidates: Sequence[tuple[str, dict[str, Any]]] | None = None,
                      folds: int = 5, seed: int = 0, curve: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
                      criterion: str = "lowest") -> tuple[AccuracyPredictor, dict[str, Any]]:
    """(the best predictor refitted on all rows, its report). `space`: the run's, any family;
    `m`: its int matrix. `criterion`: ``lowest`` out-of-fold MAE, or ``one-se``: the simplest
    candidate whose per-row errors are within one paired standard error of the lowest's (the
    latency side's test, `hwnas.crossval`); experiments/bench_accuracy_selection.py compares them."""
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    m, y = np.asarray(m), np.asarray(y, dtype=np.float64)
    if len(y) < 10:
        raise InputError(f"choosing an accuracy predictor needs at least 10 measured subnets, got {len(y)}")
    candidates = list(candidates or default_candidates(len(y)))
    scores: list[dict[str, Any]] = []
    oofs: list[tuple[np.ndarray, np.ndarray]] = []
    for kind, settings in candidates:
        t = time.perf_counter()
        pred, std = cross_val_predict(lambda: make_accuracy_predictor(kind, space, n_classes, **settings),
                                      m, y, folds=folds, seed=seed)
        row = {"kind": kind, "settings": settings, **regression_metrics(pred, y),
               "seconds": round(time.perf_counter() - t, 2)}
        scores.append(row)
        oofs.append((pred, std))
    best_i = min(range(len(scores)), key=lambda i: (scores[i]["mae"], i))  # ties: the earlier, simpler
    if criterion == "one-se":
        errors = [np.abs(p - y) for p, _ in oofs]
        best_i = next(i for i in range(len(scores)) if within_one_se(errors[i], errors[best_i]))
    best_oof = oofs[best_i]
    kind, settings = candidates[best_i]
    make = lambda: make_accuracy_predictor(kind, space, n_classes, **settings)  # noqa: E731
    best = make().fit(m, y, seed=seed)
    pred, std = best_oof
    z = (pred - y) / np.maximum(std, 1e-6)
    best.std_scale = float(np.sqrt(np.mean(z**2))) if np.all(std > 0) else 1.0
    within = float(np.mean(np.abs(pred - y) <= best.std_scale * std))
    learning = []
    rng = np.random.default_rng(seed + 1)
    order = rng.permutation(len(y))
    for frac in curve:
        n = int(round(frac * len(y)))
        if n < 10:
            continue
        sub = order[:n]
        p, _ = cross_val_predict(make, m[sub], y[sub], folds=folds, seed=seed)
        learning.append({"rows": n, **{k: v for k, v in regression_metrics(p, y[sub]).items() if k != "n"}})
    report = {"chosen": {"kind": kind, "settings": settings, "name": best.name},
              "oof": {**regression_metrics(pred, y), "within_1_sigma": within},
              "candidates": scores, "learning_curve": learning, "folds": min(folds, len(y)), "criterion": criterion,
              "table_rows": int(len(y)), "clip": list(best.clip), "std_scale": best.std_scale,
              "train": regression_metrics(best.predict(m), y)}
    best.meta["metrics"] = report
    return best, report
