"""Vectorised genetic operators on the flat int matrix (rows ``r, ks_0..ks_19, e_0..e_19, d_0..d_4``).

`SearchSpace.mutate`/`crossover` build one `Arch` at a time; a search scores ~50,000 archs, so here
the same operators work on whole [n, 46] matrices with numpy. Every result is in canonical form
(unused slots hold the filler 3, exactly what `Arch` normalises to), so equal networks are equal
rows and `unique_rows` deduplicates them.
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.space import MAX_DEPTH, N_SLOTS, N_STAGES, PAD_E, PAD_KS, SearchSpace

__all__ = ["R", "KS", "E", "D", "used_mask", "canonical", "random_genes", "mutate", "crossover",
           "sample_graded",
           "sample_mixed", "unique_rows"]

R = slice(0, 1)
KS = slice(1, 1 + N_SLOTS)
E = slice(1 + N_SLOTS, 1 + 2 * N_SLOTS)
D = slice(1 + 2 * N_SLOTS, 1 + 2 * N_SLOTS + N_STAGES)

_USED = np.array([[j < d for j in range(MAX_DEPTH)] for d in range(MAX_DEPTH + 1)])


def used_mask(m: np.ndarray) -> np.ndarray:
    """bool [n, 20]: which slots each row's depths use."""
    return _USED[m[:, D]].reshape(len(m), N_SLOTS)


def canonical(m: np.ndarray) -> np.ndarray:
    """Put the filler into unused slots, in place; returns `m`."""
    unused = ~used_mask(m)
    m[:, KS][unused] = PAD_KS
    m[:, E][unused] = PAD_E
    return m


@functools.lru_cache(maxsize=16)
def _gene_table(space: SearchSpace) -> tuple[np.ndarray, np.ndarray]:
    """(choices of each of the 46 columns, padded [46, max]; how many each has)."""
    cols = ([space.r_choices] + [space.ks_choices] * N_SLOTS + [space.e_choices] * N_SLOTS
            + [space.d_choices] * N_STAGES)
    width = max(len(c) for c in cols)
    table = np.zeros((len(cols), width), dtype=np.int32)
    for i, c in enumerate(cols):
        table[i, :len(c)] = c
    return table, np.array([len(c) for c in cols])


def random_genes(space: SearchSpace, n: int, rng: np.random.Generator) -> np.ndarray:
    """[n, 46] values drawn uniformly per column from its choices (not canonical: raw material
    for operators; depths and slots are drawn independently)."""
    table, counts = _gene_table(space)
    idx = rng.integers(0, 1 << 30, size=(n, len(counts))) % counts
    return table[np.arange(len(counts)), idx]


def mutate(space: SearchSpace, m: np.ndarray, rng: np.random.Generator, prob: float = 0.1) -> np.ndarray:
    """Once-for-All's mutation, row-wise: each depth, used slot's kernel and expand, and the
    resolution is redrawn with probability `prob`; slots a new depth brings into use are random."""
    m = np.asarray(m, dtype=np.int32)
    fresh_vals = random_genes(space, len(m), rng)
    redraw = rng.random(m.shape) < prob
    new_d = np.where(redraw[:, D], fresh_vals[:, D], m[:, D])
    brought_in = _USED[new_d].reshape(len(m), N_SLOTS) & ~used_mask(m)
    redraw[:, KS] |= brought_in
    redraw[:, E] |= brought_in
    return canonical(np.where(redraw, fresh_vals, m))


def crossover(space: SearchSpace, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform crossover gene by gene. A slot the child uses takes its kernel (and, drawn apart,
    its expand) from a parent that uses it; a slot neither parent uses is drawn at random."""
    a, b = np.asarray(a, dtype=np.int32), np.asarray(b, dtype=np.int32)
    from_b = rng.random(a.shape) < 0.5
    child = np.where(from_b, b, a)
    other = np.where(from_b, a, b)
    fresh_vals = random_genes(space, len(a), rng)
    used_a, used_b = used_mask(a), used_mask(b)
    for cols in (KS, E):
        pick_b = from_b[:, cols]
        mine_used = np.where(pick_b, used_b, used_a)
        other_used = np.where(pick_b, used_a, used_b)
        child[:, cols] = np.where(mine_used, child[:, cols],
                                  np.where(other_used, other[:, cols], fresh_vals[:, cols]))
    return canonical(child)


def sample_graded(space: SearchSpace, n: int, rng: np.random.Generator) -> np.ndarray:
    """Archs from smallest to largest: each row draws a level t in [0, 1] and every gene picks its
    choice index from Binomial(len(choices) - 1, t). Reaches the tails (tiny and huge networks)
    that a uniform sample, bunched in the middle, never does; tight budgets live there."""
    t = rng.random((n, 1))

    def genes(choices: tuple[int, ...], width: int) -> np.ndarray:
        idx = rng.binomial(len(choices) - 1, np.broadcast_to(t, (n, width)))
        return np.asarray(choices, dtype=np.int32)[idx]

    m = np.concatenate([genes(space.r_choices, 1), genes(space.ks_choices, N_SLOTS),
                        genes(space.e_choices, N_SLOTS), genes(space.d_choices, N_STAGES)], axis=1)
    return canonical(m)


def sample_mixed(space: SearchSpace, n: int, rng: np.random.Generator) -> np.ndarray:
    """Half uniform over networks (`SearchSpace.sample_matrix`), half graded; shuffled."""
    half = n // 2
    m = np.concatenate([space.sample_matrix(n - half, rng), sample_graded(space, half, rng)])
    return m[rng.permutation(n)]


def unique_rows(m: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row, in their original order."""
    if len(m) == 0:
        return np.zeros(0, dtype=np.int64)
    rows = np.ascontiguousarray(m).view(np.dtype((np.void, m.dtype.itemsize * m.shape[1]))).ravel()
    _, first = np.unique(rows, return_index=True)
    return np.sort(first)


@functools.lru_cache(maxsize=16)
def _breed_consts(space: SearchSpace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the gene table flattened, each column's offset in it, each column's choice count as float)."""
    table, counts = _gene_table(space)
    return table.ravel(), np.arange(len(counts)) * table.shape[1], counts.astype(np.float64)


def breed(space: SearchSpace, parents: np.ndarray, k_mut: int, k_cross: int, rng: np.random.Generator,
          prob: float = 0.1) -> np.ndarray:
    """`k_mut` mutants (`mutate`) then `k_cross` crossovers (`crossover`) of random `parents`, in
    one pass over one [k, 46] matrix with one draw per kind of random number: the same operators,
    an order of magnitude fewer numpy calls than calling them apart.

    Both are "take gene from Y where P, else from X" with the slot rule "a slot the chosen source
    does not use comes from the other source if it uses it, else at random": for a mutant X is
    the parent, Y fresh random genes (which "use" every slot) and P the per-gene redraw (`prob`);
    for a crossover X and Y are two parents and P a fair coin per gene. That reproduces `mutate`
    (slots a new depth brings into use are random) and `crossover` exactly in distribution."""
    table, offset, counts = _breed_consts(space)
    k = k_mut + k_cross
    n_par, width = len(parents), parents.shape[1]
    draw = rng.random((k, 2 * width + 2))  # every random number of the batch in one call
    u = draw[:, :width]
    fresh = table[(draw[:, width:2 * width] * counts).astype(np.intp) + offset]
    pick = (draw[:, 2 * width:] * n_par).astype(np.intp)
    x = parents[pick[:, 0]]
    y = fresh.copy()
    y[k_mut:] = parents[pick[k_mut:, 1]]
    thresh = np.empty((k, 1))
    thresh[:k_mut], thresh[k_mut:] = prob, 0.5
    p = u < thresh
    child = np.where(p, y, x)
    used_x = _USED[x[:, D]].reshape(k, 1, N_SLOTS)
    used_y = _USED[y[:, D]].reshape(k, 1, N_SLOTS)
    used_y[:k_mut] = True
    slots = slice(KS.start, E.stop)
    ps = p[:, slots].reshape(k, 2, N_SLOTS)
    mine = np.where(ps, used_y, used_x)
    other_used = np.where(ps, used_x, used_y)
    other = np.where(p[:, slots], x[:, slots], y[:, slots]).reshape(k, 2, N_SLOTS)
    fill = np.where(other_used, other, fresh[:, slots].reshape(k, 2, N_SLOTS))
    cs = child[:, slots].reshape(k, 2, N_SLOTS)
    unused = ~_USED[child[:, D]].reshape(k, 1, N_SLOTS)
    cs = np.where(mine, cs, fill)
    cs[:, 0][unused[:, 0]] = PAD_KS
    cs[:, 1][unused[:, 0]] = PAD_E
    child[:, slots] = cs.reshape(k, 2 * N_SLOTS)
    return child
