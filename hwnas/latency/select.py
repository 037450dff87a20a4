"""Model selection: cross-validation over candidate predictors, pick the best.

Criteria (``CRITERIA``): ``within-10`` takes the highest fraction of out-of-fold predictions within
+-10%. ``one-se`` (the default) takes a transfer candidate (from ``--base`` or a runtime prior)
instead of that winner when its squared log error and its fraction outside +-10% are each within
one standard error of the winner's: with few rows a richer model wins the CV by luck, so the prior
stays until the rows clearly say otherwise. A runtime prior is a candidate only when the device
follows that runtime (`PRIOR_SLOPE`). Out-of-fold predictions are pooled before scoring; the folds
and the candidates depend on the number of rows.

The criteria, folds and candidates in detail: docs/pipeline.md, 'Choosing a latency predictor'.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

import numpy as np

from hwnas.crossval import fold_splits, within_one_se
from hwnas.errors import InputError
from hwnas.families import NetworkSpec
from hwnas.latency.base import ArchLike, LatencyPredictor, candidate_classes, check_targets, predictor_kinds
from hwnas.latency.lut import LookupTablePredictor
from hwnas.latency.record import FitReport
from hwnas.latency.metrics import summary

__all__ = ["default_candidates", "cross_val_predict", "cross_validate", "fit_best", "candidate_kinds",
           "choose", "CRITERIA", "prior_candidates"]

CRITERIA = ("one-se", "within-10")
PRIOR_SLOPE = (0.8, 1.25)
#: a runtime prior's transfer gets the one-SE preference only when the table's log-latency moves
#: with the prior's at this slope (measured: 0.9-1.1 on the CPU table with 10 rows; 0.1-0.4 and
#: 1.2-1.8 on the simulated GPUs at batch 1 and 64, where the CPU prior misled the choice)


def candidate_kinds() -> tuple[str, ...]:
    """The kinds `fit_best` chooses among (the registry's candidates, simplest first)."""
    return tuple(c.kind for c in candidate_classes())


def default_candidates(n_rows: int, *, net: NetworkSpec, kinds: Iterable[str] | None = None,
                       base: LatencyPredictor | None = None, entries_lut: LookupTablePredictor | None = None,
                       priors: Sequence[LatencyPredictor] = ()) -> list[LatencyPredictor]:
    """Unfitted candidates for `n_rows` training rows of `net`, most prior-bound and simplest first.

    `kinds` restricts the kinds (default: all that suit n_rows); `base` (a fitted predictor of
    another device) adds few-shot transfer; `priors` (fitted runtime priors,
    `hwnas.latency.priors.runtime_priors`) add transfer from each, after `base`'s, when transfer
    is wanted; `entries_lut` (a `from_entries` table) adds its calibrated form and a hybrid on it."""
    wanted = set(candidate_kinds() if kinds is None else kinds)
    unknown = wanted - set(predictor_kinds())
    if unknown:
        raise InputError(f"unknown predictor kind(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(predictor_kinds())}")
    out: list[LatencyPredictor] = []
    for cls in candidate_classes():  # every registered kind proposes its own grid
        if cls.kind in wanted:
            out += cls.candidates(n_rows, auto=kinds is None, base=base, entries_lut=entries_lut, net=net)
        if cls.kind == "transfer" and cls.kind in wanted:  # right after --base's: the next most bound
            out += prior_candidates(priors, net)
    if not out:
        raise InputError(f"no candidate predictor of kind(s) {', '.join(sorted(wanted))} for "
                         f"{n_rows} rows" + ("; transfer needs a source predictor (--base)"
                                             if wanted == {"transfer"} else ""))
    return out


def prior_candidates(priors: Sequence[LatencyPredictor], net: NetworkSpec) -> list[LatencyPredictor]:
    """Few-shot transfer from each runtime prior of `net`'s family: a rescale, and a rescale with
    the compact cost corrections (their strength chosen by leave-one-out)."""
    from hwnas.latency.transfer import TransferPredictor  # transfer imports analytic, not select

    return [TransferPredictor(p, features, net=net)
            for p in priors if p.meta.family == net.family for features in ("none", "compact")]


def default_folds(n: int) -> int:
    return n if n <= 30 else 10 if n <= 100 else 5


def cross_val_predict(pred: LatencyPredictor, m: np.ndarray, y: np.ndarray, folds: int | None = None,
                      seed: int = 0) -> np.ndarray:
    """Out-of-fold predictions of `pred` (refitted as a clone on each fold's complement)."""
    n = len(m)
    k = min(n, folds or default_folds(n))
    if k < 2:
        raise InputError(f"cross-validation needs at least 2 rows, got {n}")
    out = np.empty(n)
    for train, test in fold_splits(n, k, seed):
        out[test] = pred.clone().fit(m[train], y[train]).predict(m[test])
    return out


def cross_validate(candidates: Sequence[LatencyPredictor], archs: ArchLike, ms: Any,
                   folds: int | None = None, seed: int = 0, losses: list[np.ndarray] | None = None,
                   residuals: list[np.ndarray] | None = None) -> list[dict[str, Any]]:
    """One report row per candidate: its description, params, out-of-fold metrics and fit time.
    `losses`, when given, receives each reported candidate's per-row squared log errors;
    `residuals` its per-row log(measured / predicted out-of-fold)."""
    if not candidates:
        raise InputError("no candidates to cross-validate")
    m = candidates[0].as_matrix(archs)
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
        if losses is not None:
            losses.append(np.log(np.maximum(oof, 1e-12) / y) ** 2)
        if residuals is not None:
            residuals.append(np.log(y / np.maximum(oof, 1e-12)))
    if not rows:
        raise InputError(f"too few rows ({len(m)}) to cross-validate any candidate")
    return rows


def choose(rows: Sequence[dict[str, Any]], losses: np.ndarray, criterion: str = "one-se") -> int:
    """Which of the cross-validated `rows` to keep (an index into `rows`) by `criterion` (the module
    docstring); `losses` [len(rows), n]: each row's per-measurement squared log errors."""
    if criterion not in CRITERIA:
        raise InputError(f"unknown selection criterion {criterion!r}; use {' or '.join(CRITERIA)}")

    def eligible(row: dict[str, Any]) -> bool:  # a runtime prior the device does not follow: out
        slope = row.get("prior_slope")
        return slope is None or PRIOR_SLOPE[0] <= slope <= PRIOR_SLOPE[1]

    keep = [i for i, row in enumerate(rows) if eligible(row)] or list(range(len(rows)))
    winner = max(keep, key=lambda i: (round(rows[i]["within_10"], 9), -rows[i]["rmse_log"], -rows[i]["index"]))
    n = losses.shape[1]
    if criterion == "within-10" or n < 3:
        return winner
    misses = (losses > np.log(1.1) ** 2).astype(float)  # out of +-10%
    for i in keep:  # the prior-bound candidates, most bound first
        if (rows[i]["kind"] == "transfer" and i != winner and within_one_se(losses[i], losses[winner])
                and within_one_se(misses[i], misses[winner])):
            return i
    return winner


def fit_best(archs: ArchLike, ms: Any, *, net: NetworkSpec | None = None, kinds: Iterable[str] | None = None,
             base: LatencyPredictor | None = None, entries_lut: LookupTablePredictor | None = None,
             candidates: Sequence[LatencyPredictor] | None = None, folds: int | None = None, seed: int = 0,
             device: str = "", target: str = "ms", priors: Sequence[LatencyPredictor] | None = None,
             criterion: str = "one-se") -> tuple[LatencyPredictor, dict[str, Any]]:
    """Cross-validate the candidates (default: `default_candidates` for `net`, which they then
    need), refit the best on all rows; returns (predictor, report).

    `priors`: runtime priors to transfer from (default: the shipped ones of `net`'s family,
    `hwnas.latency.priors`; ``()``: none). `criterion`: ``one-se`` or ``within-10`` (the module
    docstring).

    The report holds every candidate's out-of-fold metrics (``candidates``), the chosen one
    (``chosen``), the criterion and the fold count; it is also stored in ``predictor.meta.cv``."""
    if candidates is None:
        if net is None:
            raise TypeError("fit_best needs the rows' network (net=NetworkSpec(...)) or its candidates")
        if priors is None:
            from hwnas.latency.priors import runtime_priors

            priors = runtime_priors(net)
        candidates = default_candidates(len(archs), net=net, kinds=kinds, base=base, entries_lut=entries_lut,
                                        priors=priors)
    losses: list[np.ndarray] = []
    residuals: list[np.ndarray] = []
    rows = cross_validate(candidates, archs, ms, folds, seed, losses, residuals)
    slopes: dict[int, float] = {}  # per prior: the slope of its plain rescale on every row
    for row in rows:
        cand = candidates[row["index"]]
        if criterion == "one-se" and getattr(cand, "from_prior", False):
            if id(cand.base) not in slopes:
                plain = type(cand)(cand.base, "none", net=cand.meta.net)
                slopes[id(cand.base)] = round(plain.fit(archs, ms).slope(), 4)
            row["prior_slope"] = slopes[id(cand.base)]
    pick = choose(rows, np.stack(losses), criterion)
    best = rows[pick]
    chosen = candidates[best["index"]].clone().fit(archs, ms)
    n = chosen.meta.n_train
    report = {"criterion": criterion,
              "folds": min(n, folds or default_folds(n)), "seed": seed, "n_rows": n,
              "chosen": best["name"], "chosen_metrics": {k: best[k] for k in (
                  "within_5", "within_10", "rmse_ms", "mape", "rmse_log", "kendall_tau", "spearman_rho")},
              "candidates": rows,
              # the chosen model's out-of-fold log(measured / predicted), sorted: what a search's
              # latency bound at a stated confidence is the quantile of (`hwnas.search.risk`)
              "oof_log_ratios": sorted(round(float(r), 6) for r in residuals[pick])}
    chosen.meta.cv = FitReport.model_validate(report)
    chosen.meta.device = device or chosen.meta.device
    chosen.meta.target = target
    return chosen, report
