"""Latency risk at a stated confidence: the search constrains an upper bound of the predicted
latency, not the point prediction.

The bound is split-conformal on the latency predictor's own out-of-fold residuals (recorded at fit
time: `meta.cv.oof_log_ratios`, log of measured over predicted): with n residuals, the
ceil((n + 1) * confidence)-th smallest is a log-factor that a new subnet's measurement exceeds with
probability at most 1 - confidence (for subnets like the profiled ones). The search looks for
subnets whose prediction times that factor, and times what verification's acceptance rule adds
(the margin and two typical standard errors of this device's measurements), fits the budget;
verification still judges the measurement against the budget itself. The factor never loosens a
budget (at least 1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["latency_bound", "typical_rel_se", "DEFAULT_CONFIDENCE", "DEFAULT_MARGIN"]

# 0.95, not 0.9: the search picks the subnets the predictor prices lowest, so residuals at its
# picks run above those of random subnets (the winner's curse); measured in
# experiments/bench_latency_risk.py
DEFAULT_CONFIDENCE = 0.95
#: verification's allowance for noise: accept when measured_ms * (1 + margin + 2 * rel_se) <= budget
DEFAULT_MARGIN = 0.02


def latency_bound(predictor: Any, confidence: float) -> dict[str, Any]:
    """{confidence, n, log_ratio, factor, note}: the factor a prediction is multiplied by for the
    budget check (1.0 when `confidence` is 0 or the predictor records no residuals)."""
    residuals = np.asarray(predictor.meta.cv.oof_log_ratios if predictor is not None else [], float)
    residuals = residuals[np.isfinite(residuals)]
    if confidence <= 0:
        return {"confidence": 0.0, "n": int(len(residuals)), "factor": 1.0, "note": "point prediction"}
    n = len(residuals)
    if n == 0:
        return {"confidence": confidence, "n": 0, "factor": 1.0,
                "note": "the predictor records no out-of-fold residuals (refit it: hwnas latency fit)"}
    rank = math.ceil((n + 1) * confidence)
    if rank > n:  # too few residuals for this confidence: the largest one, said so
        q, note = float(residuals.max()), f"{n} residuals are too few for {confidence:g}: the largest one"
    else:
        q, note = float(np.sort(residuals)[rank - 1]), "split-conformal quantile of out-of-fold residuals"
    return {"confidence": confidence, "n": n, "log_ratio": q, "factor": max(1.0, math.exp(q)),
            "note": note}


def typical_rel_se(run_dir: Any, device: str, predictor: Any = None) -> float:
    """The median relative standard error of the device's profiled subnet measurements (0 when
    none): what verification's acceptance rule will add to a measurement, known before it. Over
    the subnets `predictor` was fitted on when it records them, so a rerun of the same search
    (whose verification added measurements) computes the same bound."""
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run_dir, device=device, kind="subnet")
    if df.empty or "rel_se" not in df.columns:
        return 0.0
    fitted = predictor.meta.notes.fitted_on if predictor is not None else None
    if fitted:
        df = df[df["key"].astype(str).isin(set(fitted))]
    se = df["rel_se"].astype(float)
    se = se[np.isfinite(se)]
    return float(se.median()) if len(se) else 0.0
