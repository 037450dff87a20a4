"""Vectorised genetic operators on flat int matrices (rows ``r`` then the family's genes).

A search scores ~50,000 archs, so the operators work on whole [n, columns] matrices with numpy.
They see a space only through its matrix interface (`column_choices`, `active_mask`,
`canonical`: every family's space has it), so
they work for every family. Every result is canonical (inactive genes hold the family's filler),
so equal networks are equal rows and `unique_rows` deduplicates them.
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.families.sampling import gene_table, sample_graded, sample_mixed, unique_rows

__all__ = ["gene_table", "random_genes", "mutate", "crossover", "sample_graded", "sample_mixed", "unique_rows", "breed"]


def random_genes(space, n: int, rng: np.random.Generator) -> np.ndarray:
    """[n, columns] values drawn uniformly per column from its choices (not canonical: raw
    material for operators; depths and slots are drawn independently)."""
    table, counts = gene_table(space)
    idx = rng.integers(0, 1 << 30, size=(n, len(counts))) % counts
    return table[np.arange(len(counts)), idx]


def _active(space, m: np.ndarray) -> np.ndarray:
    """bool [n, columns]: r and the active genes."""
    return np.concatenate([np.ones((len(m), 1), dtype=bool), space.active_mask(m)], axis=1)


def mutate(space, m: np.ndarray, rng: np.random.Generator, prob: float = 0.1) -> np.ndarray:
    """Once-for-All's mutation, row-wise: each active gene and the resolution is redrawn with
    probability `prob`; genes a new depth brings into use are random."""
    m = np.asarray(m, dtype=np.int32)
    fresh = random_genes(space, len(m), rng)
    child = np.where(rng.random(m.shape) < prob, fresh, m)
    brought_in = _active(space, child) & ~_active(space, m)
    return space.canonical(np.where(brought_in, fresh, child))


def _take(space, x: np.ndarray, y: np.ndarray, p: np.ndarray, fresh: np.ndarray,
          y_active: np.ndarray | None = None) -> np.ndarray:
    """Gene by gene from `y` where `p`, else from `x`; a gene the chosen source does not use comes
    from the other source if it uses it, else from `fresh` (r is always used). Canonical.
    `y_active`: `y`'s active mask over the gene columns, when the caller knows it."""
    act_x = space.active_mask(x)
    act_y = space.active_mask(y) if y_active is None else y_active
    pg = p[:, 1:]
    chosen = np.where(p, y, x)
    other = np.where(pg, x[:, 1:], y[:, 1:])
    genes = np.where(np.where(pg, act_y, act_x), chosen[:, 1:],
                     np.where(np.where(pg, act_x, act_y), other, fresh[:, 1:]))
    chosen[:, 1:] = genes
    return space.canonical(chosen)


def crossover(space, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform crossover gene by gene. A gene the child uses comes from a parent that uses it; a
    gene neither parent uses is drawn at random."""
    a, b = np.asarray(a, dtype=np.int32), np.asarray(b, dtype=np.int32)
    return _take(space, a, b, rng.random(a.shape) < 0.5, random_genes(space, len(a), rng))


@functools.lru_cache(maxsize=16)
def _breed_consts(space) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the gene table flattened, each column's offset in it, each column's choice count as float)."""
    table, counts = gene_table(space)
    return table.ravel(), np.arange(len(counts)) * table.shape[1], counts.astype(np.float64)


def breed(space, parents: np.ndarray, k_mut: int, k_cross: int, rng: np.random.Generator,
          prob: float = 0.1) -> np.ndarray:
    """`k_mut` mutants (`mutate`) then `k_cross` crossovers (`crossover`) of random `parents`, in
    one pass over one [k, columns] matrix with one draw per kind of random number: the same
    operators, an order of magnitude fewer numpy calls than calling them apart.

    Both are "take gene from Y where P, else from X" with the rule "a gene the chosen source does
    not use comes from the other source if it uses it, else at random": for a mutant X is the
    parent, Y fresh random genes (which "use" every gene) and P the per-gene redraw (`prob`); for a
    crossover X and Y are two parents and P a fair coin per gene. That reproduces `mutate` (genes a
    new depth brings into use are random) and `crossover` exactly in distribution."""
    table, offset, counts = _breed_consts(space)
    k = k_mut + k_cross
    n_par, width = len(parents), parents.shape[1]
    draw = rng.random((k, 2 * width + 2))  # every random number of the batch in one call
    fresh = table[(draw[:, width:2 * width] * counts).astype(np.intp) + offset]
    pick = (draw[:, 2 * width:] * n_par).astype(np.intp)
    x = parents[pick[:, 0]]
    y = fresh.copy()
    y[k_mut:] = parents[pick[k_mut:, 1]]
    thresh = np.empty((k, 1))
    thresh[:k_mut], thresh[k_mut:] = prob, 0.5
    y_active = np.ones((k, width - 1), dtype=bool)  # fresh genes "use" every gene
    y_active[k_mut:] = space.active_mask(y[k_mut:])
    return _take(space, x, y, draw[:, :width] < thresh, fresh, y_active)
