"""Once-for-All's constrained evolutionary finder, vectorised.

Same algorithm and defaults as OFA's `EvolutionFinder`: a population of 100 subnets that meet the
latency budget; each generation keeps the best 25 % by predicted accuracy as parents and breeds 100
children (half by mutation with per-gene probability 0.1, half by uniform crossover), redrawing any
child that breaks the budget; 500 generations. OFA scores one subnet per call, this scores each
generation's children with one latency batch (plus one per redraw round) and one accuracy batch.
Where the problem's fast path applies (a family with a slot layout) the loop runs on choice-index
rows (`hwnas.search.indexed`: bit-level breeding, the slot index from one lookup, value rows only
for the cost models and the archive), with the same draws and children as the value-row loop;
otherwise it breeds value rows.
The 50,000-call default search: see `experiments/bench_search_speed.py` against OFA's own finder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hwnas.latency.base import single_thread
from hwnas.search.indexed import GeneIndex, SlotIndex
from hwnas.search.operators import breed
from hwnas.search.problem import TOP1, Batch, Problem, SearchOutcome, feasible_sample

__all__ = ["EvolutionSettings", "evolution_search"]


@dataclass(frozen=True)
class EvolutionSettings:
    population: int = 100
    generations: int = 500
    parent_ratio: float = 0.25
    mutation_ratio: float = 0.5
    mutate_prob: float = 0.1
    max_redraws: int = 20  # redraw rounds for children that break a constraint (OFA: unbounded)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _spares(n: int, rate: float) -> int:
    """Rows to breed so that `n` valid children come out of one round with high probability at
    valid rate `rate`: the mean plus two standard deviations of the binomial draw."""
    if n <= 0:
        return 0
    rate = min(max(rate, 0.05), 1.0)
    return math.ceil((n + 2.0 * math.sqrt(n * (1.0 - rate)) + 1.0) / rate)  # (scalars: math, not numpy)


def _keep_valid(v: np.ndarray, k_mut: int, n_mut: int, n_cross: int, rates: list[float]
                ) -> tuple[np.ndarray, int, int]:
    """Of a bred batch (`k_mut` mutants, then crossovers) with violations `v`: the rows to keep
    (the first valid `n_mut` mutants and `n_cross` crossovers), and how many of each are still
    missing; updates the learned valid `rates` in place."""
    ok = v <= 0
    ok_mut, ok_cross = np.flatnonzero(ok[:k_mut]), np.flatnonzero(ok[k_mut:])
    k_cross = len(v) - k_mut
    if k_mut:
        rates[0] = 0.8 * rates[0] + 0.2 * len(ok_mut) / k_mut
    if k_cross:
        rates[1] = 0.8 * rates[1] + 0.2 * len(ok_cross) / k_cross
    keep = np.concatenate([ok_mut[:n_mut], k_mut + ok_cross[:n_cross]])
    return keep, n_mut - min(len(ok_mut), n_mut), n_cross - min(len(ok_cross), n_cross)


def _children(problem: Problem, parents: np.ndarray, n_mut: int, n_cross: int, rng: np.random.Generator,
              s: EvolutionSettings, rates: list[float]):
    """n_mut mutants and n_cross crossovers of `parents` that meet every constraint.

    Redrawing invalid children one by one (OFA) costs a round trip per child; here each round
    breeds enough spares for the expected share of invalid ones of each kind (`rates`, learned as
    the search runs, updated in place) and keeps the first valid children of each kind, which is
    the same distribution; a second round is rare. Children still missing after `max_redraws`
    rounds are parent copies (counted in the result).
    Returns (rows, cost columns, violation, slot index or None, parent copies)."""
    space = problem.space
    rows, cols, viols, idxs = [], [], [], []
    for _ in range(s.max_redraws):
        if n_mut + n_cross == 0:
            break
        k_mut, k_cross = _spares(n_mut, rates[0]), _spares(n_cross, rates[1])
        m = breed(space, parents, k_mut, k_cross, rng, s.mutate_prob)
        c, v, idx = problem.costs_indexed(m, trusted=True)
        keep, n_mut, n_cross = _keep_valid(v, k_mut, n_mut, n_cross, rates)
        if len(keep) == len(m):
            rows.append(m), cols.append(c), viols.append(v), idxs.append(idx)
        else:
            rows.append(m[keep])
            cols.append({k: x[keep] for k, x in c.items()})
            viols.append(v[keep])
            idxs.append(None if idx is None else idx.take(keep))
    copies = n_mut + n_cross
    if copies:
        m = parents[rng.integers(len(parents), size=copies)]
        c, v, idx = problem.costs_indexed(m)
        rows.append(m), cols.append(c), viols.append(v), idxs.append(idx)
    if len(rows) == 1:
        return rows[0], cols[0], viols[0], idxs[0], copies
    idx = SlotIndex.concat(idxs) if all(i is not None for i in idxs) else None
    return (np.concatenate(rows), {k: np.concatenate([c[k] for c in cols]) for k in cols[0]},
            np.concatenate(viols), idx, copies)


def _children_indexed(problem: Problem, gi: GeneIndex, parents: np.ndarray, parent_combos: np.ndarray,
                      n_mut: int, n_cross: int, rng: np.random.Generator, s: EvolutionSettings,
                      rates: list[float]):
    """`_children` on choice-index rows (`GeneIndex`): the same draws and children.
    Returns (index rows, value rows, cost columns, violation, slot index, depth combinations,
    parent copies)."""
    rows, vals, cols, viols, idxs, combos = [], [], [], [], [], []
    for _ in range(s.max_redraws):
        if n_mut + n_cross == 0:
            break
        k_mut, k_cross = _spares(n_mut, rates[0]), _spares(n_cross, rates[1])
        g, dc = gi.breed(parents, parent_combos, k_mut, k_cross, rng, s.mutate_prob)
        m = gi.values(g)
        idx = gi.slot_index(g)
        c, v, _ = problem.costs_indexed(m, idx=idx)
        keep, n_mut, n_cross = _keep_valid(v, k_mut, n_mut, n_cross, rates)
        if len(keep) == len(m):
            rows.append(g), vals.append(m), cols.append(c), viols.append(v), idxs.append(idx), combos.append(dc)
        else:
            rows.append(g.take(keep, axis=0))
            vals.append(m.take(keep, axis=0))
            cols.append({k: x.take(keep) for k, x in c.items()})
            viols.append(v.take(keep))
            idxs.append(idx.take(keep))
            combos.append(dc.take(keep))
    copies = n_mut + n_cross
    if copies:
        pick = rng.integers(len(parents), size=copies)
        g = parents[pick]
        m = gi.values(g)
        c, v, idx = problem.costs_indexed(m)
        if idx is None:  # (cannot happen for rows of the space: then every copy's index is known)
            idx = gi.slot_index(g)
        rows.append(g), vals.append(m), cols.append(c), viols.append(v), idxs.append(idx)
        combos.append(parent_combos[pick])
    if len(rows) == 1:
        return rows[0], vals[0], cols[0], viols[0], idxs[0], combos[0], copies
    idx = SlotIndex.concat(idxs)
    return (np.concatenate(rows), np.concatenate(vals), {k: np.concatenate([c[k] for c in cols]) for k in cols[0]},
            np.concatenate(viols), idx, np.concatenate(combos), copies)


def evolution_search(problem: Problem, settings: EvolutionSettings = EvolutionSettings(), seed: int = 0,
                     progress: Callable[..., Any] | None = None) -> SearchOutcome:
    """Maximise predicted top-1 under the problem's constraints; the archive holds every child.

    On the problem's fast path the loop runs on choice-index rows (`GeneIndex`: same draws, same
    children, a fraction of the numpy calls); elsewhere it breeds value rows."""
    with single_thread():
        return _evolve(problem, settings, seed, progress, problem.gene_index())


def _start(problem: Problem, s: EvolutionSettings, seed: int) -> tuple[np.random.Generator, int, int, Batch, int]:
    """(rng, parents, mutants per generation, the scored first population, archive rows)."""
    rng = np.random.default_rng(seed)
    n_par = max(1, int(round(s.parent_ratio * s.population)))
    n_mut = int(round(s.mutation_ratio * s.population))
    m, cols, v = feasible_sample(problem, s.population, rng)
    first = problem.with_top1(m, cols, v)
    return rng, n_par, n_mut, first, len(first) + s.generations * s.population


def _outcome(archive: Batch, history: list[float], s: EvolutionSettings, n_par: int, copies: int
             ) -> SearchOutcome:
    return SearchOutcome(archive, history, {"generations": s.generations, "population": s.population,
                                            "parents": n_par, "parent_copies": copies, **s.as_dict()})


def _evolve(problem: Problem, settings: EvolutionSettings, seed: int, progress: Callable[..., Any] | None,
            gi: GeneIndex | None = None) -> SearchOutcome:
    """The generation loop. With `gi` the parents breed as choice-index rows (`_children_indexed`:
    the archive also keeps each child's index row and depth combination, values are made once per
    child); without, as value rows (`_children`). Same draws, same children either way."""
    s = settings
    rng, n_par, n_mut, first, total = _start(problem, s, seed)
    # the archive, preallocated: every child is written once; the population is index arrays
    keys = list(first.cols)
    arch_m = np.empty((total, first.m.shape[1]), dtype=np.int32)
    arch_c = {k: np.empty(total) for k in keys}
    arch_v = np.empty(total)
    top1 = arch_c[TOP1]
    if gi is not None:
        arch_g = np.empty((total, first.m.shape[1]), dtype=gi.dtype)
        arch_dc = np.empty(total, dtype=gi.combo_dtype)

    def put(at: int, m: np.ndarray, c: dict[str, np.ndarray], viol: np.ndarray,
            g: np.ndarray | None = None, dc: np.ndarray | None = None) -> int:
        end = at + len(m)
        arch_m[at:end] = m
        for k in keys:
            arch_c[k][at:end] = c[k]
        arch_v[at:end] = viol
        if gi is not None:
            arch_g[at:end] = g
            arch_dc[at:end] = dc
        return end

    if gi is None:
        filled = put(0, first.m, first.cols, first.violation)
    else:
        g0 = gi.to_index(first.m)
        filled = put(0, first.m, first.cols, first.violation, g0, gi.combos(g0))
    pop = np.arange(filled)
    history: list[float] = []
    copies, rates = 0, [1.0, 1.0]
    for gen in range(s.generations):
        parents = pop[np.argsort(-top1.take(pop), kind="stable")[:n_par]]
        history.append(float(top1[parents[0]]))
        if gi is None:
            cm, cc, cv, idx, n_copy = _children(problem, arch_m[parents], n_mut, s.population - n_mut, rng, s,
                                                rates)
            cg = cdc = None
        else:
            cg, cm, cc, cv, idx, cdc, n_copy = _children_indexed(
                problem, gi, arch_g.take(parents, axis=0), arch_dc.take(parents), n_mut,
                s.population - n_mut, rng, s, rates)
        copies += n_copy
        cc[TOP1] = problem.top1(cm, idx)
        start = filled
        filled = put(filled, cm, cc, cv, cg, cdc)
        pop = np.concatenate([parents, np.arange(start, filled)])
        if progress and (gen + 1) % 25 == 0:
            progress("search", done=gen + 1, total=s.generations, best=history[-1])
    history.append(float(top1[pop].max()))
    return _outcome(Batch(arch_m[:filled], {k: arch_c[k][:filled] for k in sorted(keys)}, arch_v[:filled]),
                    history, s, n_par, copies)
