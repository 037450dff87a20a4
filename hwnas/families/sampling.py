"""Sampling subnets of a family's space as flat int matrices: graded from smallest to largest
(the tails a uniform sample misses), mixed with uniform, and deduplication. Profiling, the accuracy
table and the search all draw with these; they see a space only through its matrix interface
(`column_choices`, `canonical`, `sample_matrix`)."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["gene_table", "sample_graded", "sample_mixed", "unique_rows"]


@functools.lru_cache(maxsize=16)
def gene_table(space) -> tuple[np.ndarray, np.ndarray]:
    """(choices of each flat column, padded [columns, max]; how many each has)."""
    cols = space.column_choices()
    width = max(len(c) for c in cols)
    table = np.zeros((len(cols), width), dtype=np.int32)
    for i, c in enumerate(cols):
        table[i, :len(c)] = c
    return table, np.array([len(c) for c in cols])


def sample_graded(space, n: int, rng: np.random.Generator) -> np.ndarray:
    """Archs from smallest to largest: each row draws a level t in [0, 1] and every gene picks its
    choice index from Binomial(len(choices) - 1, t). Reaches the tails (tiny and huge networks)
    that a uniform sample, bunched in the middle, never does; tight budgets live there."""
    table, counts = gene_table(space)
    t = np.broadcast_to(rng.random((n, 1)), (n, len(counts)))
    idx = rng.binomial(counts - 1, t)
    return space.canonical(table[np.arange(len(counts)), idx])


def sample_mixed(space, n: int, rng: np.random.Generator) -> np.ndarray:
    """Half uniform (the space's `sample_matrix`), half graded; shuffled."""
    half = n // 2
    m = np.concatenate([np.asarray(space.sample_matrix(n - half, rng), dtype=np.int32),
                        sample_graded(space, half, rng)])
    return m[rng.permutation(n)]


def unique_rows(m: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row, in their original order."""
    if len(m) == 0:
        return np.zeros(0, dtype=np.int64)
    rows = np.ascontiguousarray(m).view(np.dtype((np.void, m.dtype.itemsize * m.shape[1]))).ravel()
    _, first = np.unique(rows, return_index=True)
    return np.sort(first)
