"""Class-stratified index splits, shared by the loaders (`hwnas.supernet.data`) and the dataset
readers that pick their own validation images (`fashion_mnist`). numpy only."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["stratified_split"]


def stratified_split(labels: Sequence[int] | np.ndarray, val_fraction: float, test_fraction: float,
                     seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split indices into (train, val, test), each class in the same proportions; sorted arrays."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_val, n_test = round(len(idx) * val_fraction), round(len(idx) * test_fraction)
        parts[1].append(idx[:n_val])
        parts[2].append(idx[n_val:n_val + n_test])
        parts[0].append(idx[n_val + n_test:])
    return tuple(np.sort(np.concatenate(p)).astype(np.int64) for p in parts)  # type: ignore[return-value]
