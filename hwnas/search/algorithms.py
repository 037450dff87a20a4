"""Search algorithms behind one small base class and a registry (the CLI's ``--algo`` choices).

`SearchAlgorithm.run` is the template every algorithm follows: check the request (counts are
positive, ``workers``/``storage`` only for algorithms that run in several processes: the rules of
`hwnas.search.checks`), record it, then `_search`. Adding an algorithm = one subclass here with
`@register` (its module may import lazily), nothing else to edit.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from hwnas.errors import InputError
from hwnas.run import RunFiles
from hwnas.search.checks import SettingError, whole_number

if TYPE_CHECKING:
    from hwnas.search.problem import Problem

__all__ = ["SearchRequest", "SearchAlgorithm", "register", "algorithm_names", "get_algorithm",
           "DEFAULT_JOURNAL"]

DEFAULT_JOURNAL = RunFiles(Path(".")).optuna_journal.name  # the run's (RunFiles owns the name)
Progress = Callable[..., Any]


@dataclass(frozen=True)
class SearchRequest:
    """What the user asked of the search, beyond the problem (None = the algorithm's default)."""

    run_dir: Path
    seed: int = 0
    pareto: bool = False
    population: int | None = None
    generations: int | None = None
    n_trials: int | None = None
    workers: int = 1
    storage: str | None = None
    study_name: str | None = None


class SearchAlgorithm(ABC):
    """One search algorithm. Subclasses set `name` (the `algo` setting, ``--algo``) and implement
    `_search`."""

    name: ClassVar[str]
    #: runs in several processes sharing a study (takes `workers` and `storage`)
    parallel: ClassVar[bool] = False
    #: the modules `_search` imports (lazily, so this registry stays cheap to import)
    modules: ClassVar[tuple[str, ...]] = ()

    def load(self) -> None:
        """Import `modules` now: `run_search` calls it before its search clock starts, so
        ``search_s`` times the search, not a first import."""
        import importlib

        for name in self.modules:
            importlib.import_module(name)

    def run(self, problem: Problem, request: SearchRequest, progress: Progress | None = None):
        """(outcome with the scored archive, settings for search.json)."""
        self.check(request)
        settings: dict[str, Any] = {"algo": self.name}
        return self._search(problem, request, settings, progress), settings

    def check(self, request: SearchRequest) -> None:
        """One `SettingError` line for a request this algorithm cannot run (the counts' rules are
        `hwnas.search.checks`', shared with `hwnas.search.settings.SearchSettings`)."""
        for name in ("population", "generations", "n_trials"):
            whole_number(name, getattr(request, name), optional=True)
        whole_number("workers", request.workers)
        self.check_parallel(request.workers, request.storage)

    def check_parallel(self, workers: int, storage: str | None) -> None:
        """`workers` and `storage` are for the algorithms that run in several processes."""
        if not self.parallel and (workers != 1 or storage is not None):
            parallel = ", ".join(n for n in algorithm_names() if _REGISTRY[n].parallel)
            raise SettingError(f"{{workers}} and {{storage}} apply to {parallel}; '{self.name}' runs "
                               "vectorised in one process", "workers", "storage")

    @abstractmethod
    def _search(self, problem: Problem, request: SearchRequest, settings: dict[str, Any],
                progress: Progress | None):
        """Search; add what was run to `settings`."""


_REGISTRY: dict[str, type[SearchAlgorithm]] = {}


def register(cls: type[SearchAlgorithm]) -> type[SearchAlgorithm]:
    _REGISTRY[cls.name] = cls
    return cls


def algorithm_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_algorithm(name: str) -> SearchAlgorithm:
    if name not in _REGISTRY:
        raise InputError(f"unknown search algorithm {name!r}; use one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]()


# -- the algorithms ------------------------------------------------------------------------------
@register
class Evolution(SearchAlgorithm):
    """Once-for-All's constrained evolutionary finder; with ``--pareto``, NSGA-II's front."""

    name = "evolution"
    modules = ("hwnas.search.evolution", "hwnas.search.nsga2")

    def _search(self, problem, request, settings, progress):
        if request.pareto:
            return _nsga2(problem, request, settings, progress, "evolution --pareto: NSGA-II")
        from hwnas.search.evolution import EvolutionSettings, evolution_search

        s = EvolutionSettings(population=request.population or 100, generations=request.generations or 500)
        settings.update(s.as_dict())
        return evolution_search(problem, s, request.seed, progress)


@register
class NSGA2(SearchAlgorithm):
    """Vectorised NSGA-II over the whole population."""

    name = "nsga2"
    modules = ("hwnas.search.nsga2",)

    def _search(self, problem, request, settings, progress):
        return _nsga2(problem, request, settings, progress, "nsga2")


def _nsga2(problem, request, settings, progress, mode: str):
    from hwnas.search.nsga2 import NSGA2Settings, nsga2_search

    s = NSGA2Settings(population=request.population or 100, generations=request.generations or 500)
    settings.update(s.as_dict(), mode=mode)
    return nsga2_search(problem, s, request.seed, progress)


@register
class Random(SearchAlgorithm):
    """Uniform random sampling at the evolution's budget of predictor calls (a baseline)."""

    name = "random"
    modules = ("hwnas.search.random_search",)

    def _search(self, problem, request, settings, progress):
        from hwnas.search.random_search import random_search

        n = request.n_trials or (request.population or 100) * ((request.generations or 500) + 1)
        settings.update(samples=n)
        return random_search(problem, n, request.seed)


class _Optuna(SearchAlgorithm):
    """One of Optuna's samplers; workers in several processes (or machines) share one study."""

    parallel = True
    modules = ("hwnas.search.optuna_search",)
    sampler: ClassVar[str]
    default_trials: ClassVar[int]

    def _search(self, problem, request, settings, progress):
        from hwnas.search.optuna_search import optuna_search

        spec = request.storage or str(RunFiles(request.run_dir).optuna_journal)
        name = request.study_name or study_name(self.name, problem)
        out = optuna_search(problem, self.sampler, request.n_trials or self.default_trials, spec, name,
                            workers=request.workers, population=request.population or 100,
                            seed=request.seed, progress=progress)
        settings.update({k: out.info[k] for k in ("sampler", "n_trials", "workers", "batch", "population",
                                                  "study_name", "storage")})
        return out


@register
class OptunaNSGA2(_Optuna):
    name, sampler, default_trials = "optuna-nsga2", "nsga2", 5000


@register
class OptunaTPE(_Optuna):
    name, sampler, default_trials = "optuna-tpe", "tpe", 300


def study_name(algo: str, problem: Problem) -> str:
    """The default study: one per algorithm, budgets and objectives -- not per seed, so workers on
    other machines (given other --seed values, so they explore differently) join the same study."""
    from hwnas.search.problem import TOP1

    parts = [algo, *(f"{d}-{b:g}ms" for d, b in problem.budgets.items()),
             *(o.replace(":", "-") for o in problem.objectives if o != TOP1)]
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", "_".join(parts))
