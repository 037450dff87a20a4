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


def _ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank)."""
    order = np.argsort(a, kind="mergesort")
    s = a[order]
    ranks = np.empty(len(a))
    ranks[order] = np.arange(1, len(a) + 1)
    _, inv, counts = np.unique(s, return_inverse=True, return_counts=True)
    csum = np.cumsum(counts)
    mean_rank = csum - (counts - 1) / 2.0
    ranks[order] = mean_rank[inv]
    return ranks


def spearman_rho(pred: Any, true: Any) -> float:
    p, t = _pair(pred, true)
    if len(t) < 2:
        return float("nan")
    a, b = _ranks(p) - (len(p) + 1) / 2, _ranks(t) - (len(t) + 1) / 2
    den = np.sqrt((a**2).sum() * (b**2).sum())
    return float((a * b).sum() / den) if den > 0 else float("nan")


def kendall_tau(pred: Any, true: Any, chunk: int = 2048) -> float:
    """Kendall's tau-b, O(n^2) in chunks (fine for tens of thousands of rows)."""
    p, t = _pair(pred, true)
    n = len(t)
    if n < 2:
        return float("nan")
    conc = tie_p = tie_t = 0.0
    for lo in range(0, n, chunk):
        dp = np.sign(p[lo:lo + chunk, None] - p[None, :])
        dt = np.sign(t[lo:lo + chunk, None] - t[None, :])
        conc += float((dp * dt).sum())
        tie_p += float((dp != 0).sum())
        tie_t += float((dt != 0).sum())
    den = np.sqrt(tie_p * tie_t)
    return float(conc / den) if den > 0 else float("nan")


def summary(pred: Any, true: Any) -> dict[str, float]:
    """The held-out metrics hwnas reports for a latency predictor."""
    return {"n": int(len(np.asarray(true).reshape(-1))),
            "within_5": within(pred, true, 0.05), "within_10": within(pred, true, 0.10),
            "rmse_ms": rmse(pred, true), "mape": mape(pred, true), "rmse_log": rmse_log(pred, true),
            "kendall_tau": kendall_tau(pred, true), "spearman_rho": spearman_rho(pred, true)}
