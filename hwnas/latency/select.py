"""Model selection: K-fold cross-validation over candidate predictors, pick the best.

Criterion (higher is better, compared in this order):
1. the fraction of out-of-fold predictions within +-10% of the measurement (the number users
   read: "how often is the predictor as good as a re-measurement"), then
2. the lower RMS of log(predicted / measured) (a smooth scale-free error; it decides the many
   ties of 1. at small N), then
3. the earlier candidate in the list (candidates are ordered simplest first).

Out-of-fold predictions from all folds are pooled before scoring, so every row counts once.
Folds: leave-one-out up to 30 rows (the least noisy estimate when rows are precious; the
candidates there are cheap linear models), 10 up to 100 rows, else 5.
Candidates depend on N: analytic models with at most N/2 features (so 20 rows choose among
FLOPs-only, simple, compact and roofline models, 50 rows among all); lookup-table and hybrid
models from 30 rows; the MLP from 100 rows; few-shot transfer whenever a source predictor is given.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

import numpy as np

from hwnas.errors import InputError
from hwnas.families import DEFAULT_FAMILY
from hwnas.latency.base import ArchLike, LatencyPredictor, candidate_classes, check_targets, predictor_kinds
from hwnas.latency.lut import LookupTablePredictor
from hwnas.latency.metrics import summary

__all__ = ["default_candidates", "cross_val_predict", "cross_validate", "fit_best", "candidate_kinds"]


def candidate_kinds() -> tuple[str, ...]:
    """The kinds `fit_best` chooses among (the registry's candidates, simplest first)."""
    return tuple(c.kind for c in candidate_classes())


def default_candidates(n_rows: int, *, kinds: Iterable[str] | None = None, width_mult: float = 1.0,
                       n_classes: int = 1000, base: LatencyPredictor | None = None,
                       entries_lut: LookupTablePredictor | None = None, family: str = DEFAULT_FAMILY
                       ) -> list[LatencyPredictor]:
    """Unfitted candidates for `n_rows` training rows, simplest first.

    `kinds` restricts the kinds (default: all that suit n_rows); `base` (a fitted predictor of
    another device) adds few-shot transfer; `entries_lut` (a `from_entries` table) adds its
    calibrated form and a hybrid on it."""
    wanted = set(candidate_kinds() if kinds is None else kinds)
    unknown = wanted - set(predictor_kinds())
    if unknown:
        raise InputError(f"unknown predictor kind(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(predictor_kinds())}")
    out: list[LatencyPredictor] = []
    for cls in candidate_classes():  # every registered kind proposes its own grid
        if cls.kind in wanted:
            out += cls.candidates(n_rows, auto=kinds is None, base=base, entries_lut=entries_lut,
                                  width_mult=width_mult, n_classes=n_classes, family=family)
    if not out:
        raise InputError(f"no candidate predictor of kind(s) {', '.join(sorted(wanted))} for "
                         f"{n_rows} rows" + ("; transfer needs a source predictor (--base)"
                                             if wanted == {"transfer"} else ""))
    return out


def default_folds(n: int) -> int:
    return n if n <= 30 else 10 if n <= 100 else 5


def _folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    return [order[i::k] for i in range(k)]


def cross_val_predict(pred: LatencyPredictor, m: np.ndarray, y: np.ndarray, folds: int | None = None,
                      seed: int = 0) -> np.ndarray:
    """Out-of-fold predictions of `pred` (refitted as a clone on each fold's complement)."""
    n = len(m)
    k = min(n, folds or default_folds(n))
    if k < 2:
        raise InputError(f"cross-validation needs at least 2 rows, got {n}")
    out = np.empty(n)
    for test in _folds(n, k, seed):
        train = np.setdiff1d(np.arange(n), test)
        out[test] = pred.clone().fit(m[train], y[train]).predict(m[test])
    return out


def cross_validate(candidates: Sequence[LatencyPredictor], archs: ArchLike, ms: Any,
                   folds: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """One report row per candidate: its description, params, out-of-fold metrics and fit time."""
    if not candidates:
        raise InputError("no candidates to cross-validate")
    m = candidates[0]._matrix(archs)
    y = check_targets(ms, len(m))
    rows = []
    for i, cand in enumerate(candidates):
        if len(m) < max(cand.min_rows + 1, 3):
            continue
        t0 = time.perf_counter()
        try:
            oof = cross_val_predict(cand, m, y, folds, seed)
        except (np.linalg.LinAlgError, FloatingPointError, ValueError):
            continue  # a numerically degenerate candidate on these rows: not a contender
        if not np.isfinite(oof).all():
            continue
        rows.append({"index": i, "kind": cand.kind, "name": cand.describe(),
                     "params": cand.get_params(), **summary(oof, y),
                     "seconds": round(time.perf_counter() - t0, 3)})
    if not rows:
        raise InputError(f"too few rows ({len(m)}) to cross-validate any candidate")
    return rows


def fit_best(archs: ArchLike, ms: Any, *, kinds: Iterable[str] | None = None, width_mult: float = 1.0,
             n_classes: int = 1000, base: LatencyPredictor | None = None,
             entries_lut: LookupTablePredictor | None = None, candidates: Sequence[LatencyPredictor] | None = None,
             folds: int | None = None, seed: int = 0, device: str = "", target: str = "ms",
             family: str = DEFAULT_FAMILY) -> tuple[LatencyPredictor, dict[str, Any]]:
    """Cross-validate the candidates, refit the best on all rows; returns (predictor, report).

    The report holds every candidate's out-of-fold metrics (``candidates``), the chosen one
    (``chosen``), the criterion and the fold count; it is also stored in ``predictor.meta.cv``."""
    if candidates is None:
        n = len(archs)
        candidates = default_candidates(n, kinds=kinds, width_mult=width_mult, n_classes=n_classes,
                                        base=base, entries_lut=entries_lut, family=family)
    rows = cross_validate(candidates, archs, ms, folds, seed)
    best = max(rows, key=lambda r: (round(r["within_10"], 9), -r["rmse_log"], -r["index"]))
    chosen = candidates[best["index"]].clone().fit(archs, ms)
    n = chosen.meta.n_train
    report = {"criterion": "max out-of-fold within_10, then min rmse_log, then simplest",
              "folds": min(n, folds or default_folds(n)), "seed": seed, "n_rows": n,
              "chosen": best["name"], "chosen_metrics": {k: best[k] for k in (
                  "within_5", "within_10", "rmse_ms", "mape", "rmse_log", "kendall_tau", "spearman_rho")},
              "candidates": rows}
    chosen.meta.cv = report
    chosen.meta.device = device or chosen.meta.device
    chosen.meta.target = target
    return chosen, report
