"""Cross-validation shared by the latency and the accuracy predictors' selection: one fold split,
one paired one-standard-error test, so both sides judge candidates the same way."""

from __future__ import annotations

from typing import Iterator

import numpy as np

__all__ = ["fold_splits", "within_one_se"]


def fold_splits(n: int, k: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(train, test) row indices of `min(k, n)` folds: a seeded permutation dealt round-robin, so
    fold sizes differ by at most one and each row is tested once."""
    order = np.random.default_rng(seed).permutation(n)
    for i in range(min(k, n)):
        test = order[i::min(k, n)]
        yield np.setdiff1d(np.arange(n), test), test


def within_one_se(mine: np.ndarray, best: np.ndarray) -> bool:
    """Whether per-row errors `mine` are on average within one (paired) standard error of `best`'s."""
    d = np.asarray(mine) - np.asarray(best)
    return bool(d.mean() <= d.std(ddof=1) / np.sqrt(len(d)) + 1e-15)
