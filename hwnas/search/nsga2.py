"""Multi-objective evolution (NSGA-II) over the int matrix: a whole Pareto front in one run.

Deb et al.'s NSGA-II with constrained domination: binary tournaments on (front, crowding
distance) pick parents, children come from the same vectorised crossover and mutation as the
single-objective finder, and parents + children compete for the next population by non-dominated
sorting (subnets that break a budget rank behind every feasible one, least violation first) and
crowding distance. Duplicate networks are dropped before selection so the front stays diverse.
Every generation is one batched call of each predictor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hwnas.latency.base import single_thread
from hwnas.search.operators import crossover, mutate, sample_mixed, unique_rows
from hwnas.search.pareto import rank_and_crowding, select_survivors
from hwnas.search.problem import TOP1, Batch, Problem, SearchOutcome

__all__ = ["NSGA2Settings", "nsga2_search"]


@dataclass(frozen=True)
class NSGA2Settings:
    population: int = 100
    generations: int = 500
    crossover_prob: float = 0.9
    mutate_prob: float = 0.1

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _tournament(rank: np.ndarray, crowd: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Winners of n binary tournaments: lower front wins, then larger crowding distance."""
    a, b = rng.integers(len(rank), size=(2, n))
    a_wins = (rank[a] < rank[b]) | ((rank[a] == rank[b]) & (crowd[a] >= crowd[b]))
    return np.where(a_wins, a, b)


def nsga2_search(problem: Problem, settings: NSGA2Settings = NSGA2Settings(), seed: int = 0,
                 progress: Callable[..., Any] | None = None) -> SearchOutcome:
    """Evolve a population towards the Pareto front of the problem's objectives; the archive
    holds every scored child. `history` is the best feasible top-1 per generation."""
    with single_thread():
        return _evolve(problem, settings, seed, progress)


def _best(pop: Batch) -> float:
    ok = pop.feasible
    return float(pop.cols[TOP1][ok].max()) if ok.any() else float("nan")


def _evolve(problem: Problem, s: NSGA2Settings, seed: int, progress: Callable[..., Any] | None
            ) -> SearchOutcome:
    rng = np.random.default_rng(seed)
    n = s.population
    pop = problem.evaluate(sample_mixed(problem.space, n, rng))
    archive = [pop]
    rank, crowd = rank_and_crowding(problem.loss(pop), pop.violation)
    history = []
    for gen in range(s.generations):
        a = pop.m[_tournament(rank, crowd, n, rng)]
        b = pop.m[_tournament(rank, crowd, n, rng)]
        cross = rng.random(n) < s.crossover_prob
        kids = np.where(cross[:, None], crossover(problem.space, a, b, rng), a)
        kids = mutate(problem.space, kids, rng, s.mutate_prob)
        children = problem.evaluate(kids)
        archive.append(children)
        both = Batch.concat([pop, children])
        both = both.take(unique_rows(both.m))
        keep, rank, crowd = select_survivors(problem.loss(both), both.violation, n)
        pop = both.take(keep)
        history.append(_best(pop))
        if progress and (gen + 1) % 25 == 0:
            progress("search", done=gen + 1, total=s.generations, best=history[-1])
    return SearchOutcome(Batch.concat(archive), history,
                         {"generations": s.generations, "population": n, **s.as_dict()})
