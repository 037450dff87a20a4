"""Small, dependency-light solvers shared by the predictors (all float64, all deterministic).

Latency errors that matter are relative (a 1 ms miss on a 2 ms model is a failure, on a 50 ms
model it is noise), so linear latency models are fitted on relative residuals ``(Xw - y) / y``,
and log-space models on ``log y``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nnls_relative", "ridge_fit", "ridge_loo_alpha"]


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.optimize import nnls

    try:
        x, _ = nnls(a, b, maxiter=50 * a.shape[1])
    except RuntimeError:  # iteration limit: fall back to projected least squares
        x = np.clip(np.linalg.lstsq(a, b, rcond=None)[0], 0, None)
    return x


def nnls_relative(x: np.ndarray, y: np.ndarray, alpha: float, free: np.ndarray | None = None,
                  penalize: np.ndarray | None = None) -> np.ndarray:
    """Weights w (>= 0 except the `free` columns) minimising
    ``sum(((x w - y) / y)^2) + alpha * sum_{j penalised} (c_j w_j)^2``,
    where c_j is the RMS of column j relative to y: each penalised term is then the column's
    typical share of the latency, so one `alpha` suits features of any unit. By default every
    column but the free ones is penalised.
    """
    n, p = x.shape
    free = np.zeros(p, bool) if free is None else np.asarray(free, bool)
    penalize = ~free if penalize is None else np.asarray(penalize, bool) & ~free
    xr = x / y[:, None]
    scale = np.sqrt(np.mean(xr**2, axis=0))
    scale[scale == 0] = 1.0
    xs = xr / scale
    # free columns enter twice, as +col and -col, so NNLS can make them any sign
    a = np.concatenate([xs, -xs[:, free]], axis=1)
    b = np.ones(n)
    pen = np.where(penalize, np.sqrt(alpha), 0.0)
    reg = np.zeros((p, a.shape[1]))
    reg[np.arange(p), np.arange(p)] = pen
    a = np.concatenate([a, reg[pen > 0]], axis=0)
    b = np.concatenate([b, np.zeros(int((pen > 0).sum()))])
    u = _nnls(a, b)
    w = u[:p].copy()
    w[free] -= u[p:]
    return w / scale


def ridge_fit(x: np.ndarray, y: np.ndarray, alpha: float, prior: np.ndarray | None = None
              ) -> tuple[np.ndarray, float]:
    """(coef, intercept) of ``min |y - b - x w|^2 + alpha |w - prior|^2`` (intercept not penalised).

    Columns are used as given (standardise before calling when units differ)."""
    n, p = x.shape
    prior = np.zeros(p) if prior is None else np.asarray(prior, float)
    if p == 0:
        return np.zeros(0), float(y.mean())
    xm, ym = x.mean(axis=0), y.mean()
    xc, yc = x - xm, y - ym - (x - xm) @ prior
    gram = xc.T @ xc + alpha * np.eye(p)
    w = np.linalg.solve(gram, xc.T @ yc) + prior
    return w, float(ym - xm @ w)


def ridge_loo_alpha(x: np.ndarray, y: np.ndarray, alphas: np.ndarray | list[float],
                    prior: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The alpha with the smallest leave-one-out squared error (closed form), and all LOO MSEs.

    (The one-standard-error rule, preferring the strongest alpha within one SE of the best, was
    tried for few-shot transfer: no better on the CPU fixture or the simulated GPUs.)"""
    n, p = x.shape
    prior = np.zeros(p) if prior is None else np.asarray(prior, float)
    xm = x.mean(axis=0)
    xc = x - xm
    yc = y - y.mean() - xc @ prior
    errors = []
    for alpha in alphas:
        gram = xc.T @ xc + alpha * np.eye(p)
        inv = np.linalg.solve(gram, xc.T)  # [p, n]
        h = np.einsum("ij,ji->i", xc, inv) + 1.0 / n  # hat diagonal; centring = free intercept
        resid = yc - xc @ (inv @ yc)
        h = np.clip(h, 0, 1 - 1e-9)
        errors.append((resid / (1 - h)) ** 2)
    scores = np.array([e.mean() for e in errors])
    return float(np.asarray(alphas)[int(np.argmin(scores))]), scores
