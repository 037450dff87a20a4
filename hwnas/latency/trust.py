"""Whether a device's latency predictor can be trusted where decisions are made: its errors on
held-out subnets (measured on the device, not among the ids it was fitted on: a search's
verification, an export, later profiling), by the content of the predictor file, never file times.

A predictor is flagged *poor* when, on at least `MIN_POINTS` held-out subnets, its median absolute
error is over `MAX_MEDIAN_ERROR`, or Kendall's tau is below `MIN_TAU` where the held-out latencies
span at least `MIN_SPAN`x (a search's picks sit near one budget: their order is noise there). The
fix is more measured subnets and a refit (`fix`, `refit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MIN_POINTS", "MIN_TAU", "MIN_SPAN", "MAX_MEDIAN_ERROR", "RULE", "held_out_quality", "trust_warning"]

MIN_POINTS, MIN_TAU, MIN_SPAN, MAX_MEDIAN_ERROR = 5, 0.5, 1.5, 0.15
RULE = (f"poor when, on at least {MIN_POINTS} held-out subnets, the median |error| > {MAX_MEDIAN_ERROR:.0%}, or "
        f"Kendall tau < {MIN_TAU} where their latencies span at least {MIN_SPAN}x")


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
    span = float(true.max() / true.min()) if n and true.min() > 0 else 1.0
    poor = n >= MIN_POINTS and (median_error > MAX_MEDIAN_ERROR
                                or (tau is not None and span >= MIN_SPAN and tau < MIN_TAU))
    return {"n": n, "within_10": within, "kendall_tau": tau, "median_abs_error": median_error,
            "median_error": bias, "span": span, "poor": bool(poor), "rule": RULE,
            "fix": f"hwnas profile --run {run_dir} --device {device} --samples auto",
            "refit": f"hwnas latency fit --run {run_dir} --device {device}"}


def trust_warning(device: str, q: dict[str, Any]) -> str:
    """One line for a device whose latency predictor is poor on held-out subnets."""
    tau = "-" if q["kendall_tau"] is None else f"{q['kendall_tau']:.2f}"
    err = q.get("median_abs_error")
    return (f"the latency predictor of {device} is poor on {q['n']} held-out subnets ("
            + (f"median error {100 * err:.0f}%, " if err is not None else "")
            + f"Kendall tau {tau}, {100 * q['within_10']:.0f}% within ±10%): measure more subnets "
            f"(`{q['fix']}`) and refit (`{q['refit']}`)")
