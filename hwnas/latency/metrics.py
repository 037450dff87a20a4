"""Accuracy metrics of latency predictions (numpy only; ties handled as scipy does)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["within", "rmse", "mape", "rmse_log", "kendall_tau", "spearman_rho", "summary"]


def _pair(pred: Any, true: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pred, dtype=np.float64).reshape(-1)
    t = np.asarray(true, dtype=np.float64).reshape(-1)
    if p.shape != t.shape:
        raise ValueError(f"{len(p)} predictions for {len(t)} measurements")
    return p, t


def within(pred: Any, true: Any, tol: float = 0.10) -> float:
    """Fraction of predictions within +-tol of the measurement (relative to the measurement)."""
    p, t = _pair(pred, true)
    return float(np.mean(np.abs(p / t - 1.0) <= tol + 1e-12)) if len(t) else float("nan")


def rmse(pred: Any, true: Any) -> float:
    p, t = _pair(pred, true)
    return float(np.sqrt(np.mean((p - t) ** 2))) if len(t) else float("nan")


def mape(pred: Any, true: Any) -> float:
    """Mean absolute percentage error, in percent."""
    p, t = _pair(pred, true)
    return float(100 * np.mean(np.abs(p / t - 1.0))) if len(t) else float("nan")


def rmse_log(pred: Any, true: Any) -> float:
    """RMS of log(pred / true): a scale-free error that punishes over- and under-shoot alike."""
    p, t = _pair(pred, true)
    return float(np.sqrt(np.mean(np.log(np.maximum(p, 1e-12) / t) ** 2))) if len(t) else float("nan")


def spearman_rho(pred: Any, true: Any) -> float:
    """Spearman's rank correlation (scipy's; ties share the mean rank)."""
    from scipy.stats import spearmanr

    p, t = _pair(pred, true)
    if len(t) < 2 or np.ptp(p) == 0 or np.ptp(t) == 0:
        return float("nan")
    return float(spearmanr(p, t).statistic)


def kendall_tau(pred: Any, true: Any) -> float:
    """Kendall's tau-b (scipy's, O(n log n))."""
    from scipy.stats import kendalltau

    p, t = _pair(pred, true)
    if len(t) < 2 or np.ptp(p) == 0 or np.ptp(t) == 0:
        return float("nan")
    return float(kendalltau(p, t).statistic)


def summary(pred: Any, true: Any) -> dict[str, float]:
    """The held-out metrics hwnas reports for a latency predictor."""
    return {"n": int(len(np.asarray(true).reshape(-1))),
            "within_5": within(pred, true, 0.05), "within_10": within(pred, true, 0.10),
            "rmse_ms": rmse(pred, true), "mape": mape(pred, true), "rmse_log": rmse_log(pred, true),
            "kendall_tau": kendall_tau(pred, true), "spearman_rho": spearman_rho(pred, true)}
