"""The numbers the pages derive from run files (pure: no Streamlit, no file access).

Intervals of measured values, the front and its hypervolume (through `hwnas.search.pareto`, the
search's own functions, so the dashboard's numbers are the search's), which genes drive accuracy
and latency (rank correlations), and names that tell candidates apart.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Iterable

import numpy as np
import pandas as pd

__all__ = ["Z95", "wilson_interval", "latency_interval", "front_mask_2d", "hypervolume_2d",
           "HYPERVOLUME_TEXT", "gene_correlations", "distinct_names"]

Z95 = 1.96  # two-sided 95 %

HYPERVOLUME_TEXT = ("area (top-1 % × ms) the front dominates between 0 % top-1 and the latency budget, "
                    "top-1 as the search ranked it (predicted − risk × σ); larger is better")


def wilson_interval(top1_pct: Any, n: Any, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (in %) of a top-1 measured on `n` images; NaN where either is unknown.
    (Unlike the normal approximation it stays inside [0, 100] near 100 %.)"""
    p = np.asarray(top1_pct, dtype=np.float64) / 100.0
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.where(n > 0, n, np.nan)
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def latency_interval(ms: Any, rel_se: Any, z: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """measured ms ± z standard errors (z = 2, the verification rule's allowance); NaN where the
    standard error is unknown or zero (one round: not estimated)."""
    ms = np.asarray(ms, dtype=np.float64)
    se = np.asarray(rel_se, dtype=np.float64)
    se = np.where(se > 0, se, np.nan)
    return ms * (1 - z * se), ms * (1 + z * se)


def _loss(ms: Any, top1: Any) -> np.ndarray:
    return np.column_stack([-np.asarray(top1, dtype=np.float64), np.asarray(ms, dtype=np.float64)])


def front_mask_2d(ms: Any, top1: Any) -> np.ndarray:
    """Non-dominated rows for (min ms, max top-1): `hwnas.search.pareto.front_mask`."""
    from hwnas.search.pareto import front_mask

    return front_mask(_loss(ms, top1))


def hypervolume_2d(ms: Any, top1: Any, budget: float) -> float:
    """`hwnas.search.pareto.hypervolume` of (top-1, ms) up to (0 %, budget): the reference point of
    search.json's hypervolume, so for the searched device at the search's budget, with top-1 the
    search's objective, the two agree."""
    from hwnas.search.pareto import hypervolume

    return hypervolume(_loss(ms, top1), np.array([0.0, float(budget)]))


def gene_correlations(codes: np.ndarray, groups: dict[str, list[int]], y: Any) -> dict[str, float]:
    """How strongly each gene group drives `y`: the Spearman correlation of the group's mean value
    (over the genes a row uses: inactive ones are NaN in `codes`) with `y`; NaN when either is
    constant or fewer than 3 rows have both."""
    codes = np.asarray(codes, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    out = {}
    for name, cols in groups.items():
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a row using none of the group's genes
            feature = np.nanmean(codes[:, cols], axis=1)
        ok = np.isfinite(feature) & np.isfinite(y)
        rho = np.nan
        if ok.sum() >= 3 and np.ptp(feature[ok]) > 0 and np.ptp(y[ok]) > 0:
            rho = float(pd.Series(feature[ok]).corr(pd.Series(y[ok]), method="spearman"))
        out[name] = rho
    return out


def distinct_names(names: Iterable[str], settings: Iterable[Any]) -> list[str]:
    """`names`, with the settings appended where two would otherwise read the same."""
    names, settings = list(names), list(settings)
    counts = pd.Series(names).value_counts()
    out = []
    for name, s in zip(names, settings):
        if counts[name] > 1 and s not in (None, {}, ""):
            extra = ", ".join(f"{k}={v}" for k, v in s.items()) if isinstance(s, dict) else json.dumps(s)
            name = f"{name} ({extra})"
        out.append(name)
    return out
