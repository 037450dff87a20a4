"""Whether a device's latency predictor can be trusted where decisions are made: its errors on
held-out subnets (measured on the device, not among the ids it was fitted on: a search's
verification, an export, later profiling), by the content of the predictor file, never file times.

A predictor is flagged *poor* when, on at least `MIN_POINTS` held-out subnets, its median absolute
error is over `MAX_MEDIAN_ERROR`, or it orders badly the pairs whose measured latencies are more than
`GAP` apart (tau over those pairs below `MIN_TAU`, with at least `MIN_PAIRS` of them). A search's
picks sit near one budget, where their order is noise: one subnet elsewhere made the held-out set
span 2.5x while its tau over all pairs (0.16) only measured that noise. The fix is more measured
subnets and a refit (`fix`, `refit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MIN_POINTS", "MIN_TAU", "MIN_PAIRS", "GAP", "MAX_MEDIAN_ERROR", "RULE", "separated_tau",
           "held_out_quality", "order_text", "trust_warning"]

MIN_POINTS, MIN_TAU, MIN_PAIRS, GAP, MAX_MEDIAN_ERROR = 5, 0.5, 5, 0.10, 0.15
RULE = (f"poor when, on at least {MIN_POINTS} held-out subnets, the median |error| > {MAX_MEDIAN_ERROR:.0%}, or "
        f"Kendall tau < {MIN_TAU} over the pairs measured more than {GAP:.0%} apart (at least {MIN_PAIRS})")


def separated_tau(pred: Any, true: Any, gap: float = GAP) -> tuple[float | None, int]:
    """Kendall's tau over the pairs whose measured latencies differ by more than `gap` (relative),
    and how many there are (None when there are none): closer pairs are within the noise."""
    p, t = np.asarray(pred, dtype=float), np.asarray(true, dtype=float)
    i, j = np.triu_indices(len(t), 1)
    apart = np.abs(np.log(t[i] / t[j])) > np.log1p(gap)
    if not apart.any():
        return None, 0
    agree = np.sign(p[i] - p[j])[apart] * np.sign(t[i] - t[j])[apart]
    return float(agree.mean()), int(apart.sum())


def held_out_quality(run_dir: str | Path, device: str, predictor: Any, target: str = "corrected_ms"
                     ) -> dict[str, Any] | None:
    """{n, within_10, kendall_tau, poor, rule, fix, refit} of `predictor` on the run's held-out subnet
    measurements of `device`; None when the predictor records no fitted ids or nothing is held out."""
    from hwnas.latency import metrics
    from hwnas.profiling.store import read_measurements
    from hwnas.run import open_run

    fitted = predictor.meta.notes.fitted_on
    if fitted is None:
        return None
    df = read_measurements(run_dir, device=device, kind="subnet")
    if df.empty or "key" not in df.columns or target not in df.columns:
        return None
    held = df[~df["key"].astype(str).isin(set(fitted))]
    if held.empty:
        return None
    fam = open_run(run_dir, create=False).family
    grouped = held.groupby(list(fam.flat_columns()), as_index=False, sort=False)[target].median()
    pred = predictor.predict(fam.table_codes(grouped, f"held-out measurements of {device}"))
    true = grouped[target].to_numpy(float)
    n = len(true)
    err = np.asarray(pred, dtype=float) / true - 1.0
    median_error, bias = float(np.median(np.abs(err))), float(np.median(err))
    within = metrics.within(pred, true, 0.10)
    tau = metrics.kendall_tau(pred, true) if n >= 3 else None
    tau_apart, pairs = separated_tau(pred, true)
    poor = n >= MIN_POINTS and (median_error > MAX_MEDIAN_ERROR
                                or (tau_apart is not None and pairs >= MIN_PAIRS and tau_apart < MIN_TAU))
    return {"n": n, "within_10": within, "kendall_tau": tau, "median_abs_error": median_error,
            "median_error": bias, "tau_apart": tau_apart, "pairs_apart": pairs, "poor": bool(poor), "rule": RULE,
            "fix": f"hwnas profile --run {run_dir} --device {device} --samples auto",
            "refit": f"hwnas latency fit --run {run_dir} --device {device}"}


def order_text(q: dict[str, Any]) -> str:
    """How well the held-out subnets are ordered, in words: tau over the pairs the rule judges (and
    over all pairs, whose closer ones are noise)."""
    every = "-" if q.get("kendall_tau") is None else f"{q['kendall_tau']:.2f}"
    if q.get("tau_apart") is None:
        return f"Kendall tau {every} (no pair measured >{GAP:.0%} apart)"
    return (f"Kendall tau {q['tau_apart']:.2f} over the {q['pairs_apart']} pairs measured >{GAP:.0%} apart "
            f"({every} over all)")


def trust_warning(device: str, q: dict[str, Any]) -> str:
    """One line for a device whose latency predictor is poor on held-out subnets."""
    err = q.get("median_abs_error")
    return (f"the latency predictor of {device} is poor on {q['n']} held-out subnets ("
            + (f"median error {100 * err:.0f}%, " if err is not None else "")
            + f"{order_text(q)}, {100 * q['within_10']:.0f}% within ±10%): measure more subnets "
            f"(`{q['fix']}`) and refit (`{q['refit']}`)")
