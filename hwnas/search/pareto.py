"""Pareto machinery on loss matrices (every objective minimised): the front, non-dominated sorting
with a constraint penalty, crowding distance and hypervolume. The search (`api`, `nsga2`) and the
dashboard (`hwnas.dashboard.stats`) call these functions and nothing else, so a run's front and
hypervolume are one definition wherever they are shown.

Dominance and hypervolume come from moocore (a maintained library with a public API and C
implementations: O(n log n) fronts for up to 3 objectives, Kung's O(n log^(k-2) n) beyond; exact
hypervolume in any dimension), not from new code here.

Duplicates: identical points never dominate one another, so every copy of a front point is on the
front and shares its rank (hypervolume is unaffected by copies).
"""

from __future__ import annotations

import moocore
import numpy as np

__all__ = ["nondominated_rank", "crowding_distance", "front_mask", "hypervolume", "rank_and_crowding",
           "select_survivors"]


def _rank(loss: np.ndarray) -> np.ndarray:
    """Plain non-dominated sorting: front index of each row (0 = non-dominated), copies alike."""
    if not len(loss):
        return np.zeros(0, dtype=int)
    return np.asarray(moocore.pareto_rank(loss), dtype=int)


def nondominated_rank(loss: np.ndarray, penalty: np.ndarray | None = None) -> np.ndarray:
    """Front index of each row (0 = non-dominated). Rows with penalty > 0 (constraint violation)
    rank after every feasible row, one front per distinct violation, least first (NSGA-II's
    constrained domination)."""
    loss = np.asarray(loss, dtype=np.float64)
    if penalty is None:
        return _rank(loss)
    pen = np.asarray(penalty, dtype=np.float64)
    ok = pen <= 0
    rank = np.empty(len(loss), dtype=int)
    rank[ok] = _rank(loss[ok])
    rank[~ok] = rank[ok].max(initial=-1) + 1 + _rank(pen[~ok, None])
    return rank


def crowding_distance(loss: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of the rows of one front (boundary rows get inf)."""
    n, k = loss.shape
    dist = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for j in range(k):
        order = np.argsort(loss[:, j], kind="stable")
        v = loss[order, j]
        span = v[-1] - v[0]
        dist[order[0]] = dist[order[-1]] = np.inf
        if span > 0:
            dist[order[1:-1]] += (v[2:] - v[:-2]) / span
    return dist


def front_mask(loss: np.ndarray, feasible: np.ndarray | None = None) -> np.ndarray:
    """bool mask of the feasible non-dominated rows (every copy of a front point counts)."""
    loss = np.asarray(loss, dtype=np.float64)
    mask = np.zeros(len(loss), dtype=bool)
    idx = np.arange(len(loss)) if feasible is None else np.flatnonzero(np.asarray(feasible, bool))
    if len(idx):
        mask[idx] = moocore.is_nondominated(loss[idx], keep_weakly=True)
    return mask


def hypervolume(loss: np.ndarray, reference: np.ndarray) -> float:
    """Hypervolume dominated by the rows of `loss` up to `reference` (rows not strictly better
    than the reference in every objective add nothing and are dropped)."""
    reference = np.asarray(reference, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64).reshape(-1, len(reference))
    inside = loss[(loss < reference).all(axis=1)]
    return float(moocore.hypervolume(inside, ref=reference)) if len(inside) else 0.0


def rank_and_crowding(loss: np.ndarray, penalty: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Front index and crowding distance (within its front) of every row."""
    rank = nondominated_rank(loss, penalty)
    crowd = np.zeros(len(loss))
    for r in np.unique(rank):
        idx = np.flatnonzero(rank == r)
        crowd[idx] = crowding_distance(loss[idx])
    return rank, crowd


def select_survivors(loss: np.ndarray, penalty: np.ndarray | None, n: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NSGA-II environmental selection: (indices of the `n` best rows by front, then crowding
    distance; their ranks; their crowding distances). Infeasible rows come after every feasible
    one, least violation first (each distinct violation is its own front)."""
    rank, crowd = rank_and_crowding(loss, penalty)
    keep = np.lexsort((-crowd, rank))[:n]
    return keep, rank[keep], crowd[keep]
