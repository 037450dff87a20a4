"""The search problem: objectives and constraints over subnets, scored in batches.

A `Problem` turns an int matrix of subnets into named columns -- ``top1``, ``ms:<device>``,
``macs``, ``params`` -- plus a constraint violation (0 = every budget met). It is made of one
part per job, each its own module:

- `goals` (`hwnas.search.goals.Goals`): the objectives and the limits, the violation and the loss;
- `cost_models` (`hwnas.search.costs.CostModels`): each device's latency model and the exact
  counts, as exact tables where they are additive (which also give the exact fastest subnet an
  impossible budget is reported against);
- `fast_path` (`hwnas.search.fused.FastPath`): every cost column and the accuracy features of a
  batch from one fused gather, for a family with a slot layout (`Family.slot_layout`); a family
  without one takes the generic path (every model called on the whole int matrix of a batch);
  `fast_paths()` says which (``"path": "tables"`` or ``"generic"``), as search.json records;
- `top1_model` (`hwnas.search.top1.Top1Model`): the top-1 objective (pessimistic by
  `accuracy_risk` sigmas; in bf16 / INT8 less the predicted drop: `hwnas.search.precision`),
  memoised by network (`Top1Memo`);
- `usage` (`hwnas.search.usage.PredictorUsage`): rows, batches and seconds through the predictors,
  so algorithms compare at equal predictor calls.

Searches only ever call it with whole batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from hwnas.errors import BudgetError
from hwnas.search.batch import Batch, SearchOutcome
from hwnas.search.checks import within
from hwnas.search.costs import CostModels
from hwnas.search.fused import FastPath
from hwnas.search.goals import TOP1, Goals, ms_key
from hwnas.search.indexed import GeneIndex, SlotIndex
from hwnas.search.operators import mutate, sample_mixed
from hwnas.search.precision import PrecisionDrop
from hwnas.search.predictors import PredictorMissing, Predictor, latency_predictor_path, load_latency_predictor
from hwnas.search.top1 import Top1Memo, Top1Model
from hwnas.search.usage import PredictorUsage

__all__ = ["PredictorMissing", "Predictor", "Batch", "Problem", "SearchOutcome", "feasible_sample",
           "latency_predictor_path", "load_latency_predictor", "TOP1", "ms_key"]

_clock = __import__("time").perf_counter


@dataclass
class Problem:
    """Maximise predicted top-1 and minimise the other `objectives` (``ms:<device>``, ``macs``,
    ``params``) subject to ``ms:<device> <= budgets[device]`` and optional MACs/params limits.

    With `accuracy_risk` k > 0 and a predictor that knows its spread, the top-1 objective is the
    pessimistic ``mean - k * sigma``. With `top1_drop` (an object with ``predict_with_std(m) ->
    (drop, sigma)`` in top-1 points) the problem scores subnets in a reduced precision (bf16,
    INT8): top-1 is the accuracy predictor's minus the predicted drop; the latency predictors are
    then that precision's devices' (the budgets stay keyed by the device names the caller gives)."""

    space: Any  # the run's space, any family
    accuracy: Predictor
    latency: Mapping[str, Predictor]
    budgets: Mapping[str, float]
    objectives: tuple[str, ...] = ()
    n_classes: int = 1000
    max_macs: float | None = None
    max_params: float | None = None
    max_ram_kb: float | None = None
    max_flash_kb: float | None = None
    memory_precision: str = "fp32"  # the precision of the ram_kb / flash_kb columns
    accuracy_risk: float = 0.0
    top1_drop: Any = None  # bf16 / INT8 points: a drop model (`hwnas.accuracy.int8.DropModel`)
    use_tables: bool = True
    memo: bool = True
    index_breeding: bool = True  # evolution on choice-index rows where it applies (`GeneIndex`)
    goals: Goals = field(init=False, repr=False)
    cost_models: CostModels = field(init=False, repr=False)
    top1_model: Top1Model = field(init=False, repr=False)
    usage: PredictorUsage = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.goals = Goals(tuple(self.latency), self.budgets, tuple(self.objectives), self.max_macs,
                           self.max_params, self.max_ram_kb, self.max_flash_kb)
        within("accuracy_risk", self.accuracy_risk, 0, 10)
        self.objectives = self.goals.objectives
        if any(k in ("ram_kb", "flash_kb") for k in self.goals.count_columns()):
            from hwnas.families.memory import check_memory_model

            check_memory_model(self.space.family)
        self.cost_models = CostModels(self.space, self.latency, self.goals.count_columns(), self.n_classes,
                                      self.use_tables, self.memory_precision)
        drop = None if self.top1_drop is None else PrecisionDrop(self.top1_drop)
        self.top1_model = Top1Model(self.accuracy, self.accuracy_risk, drop)
        self.usage = PredictorUsage()
        self._memo = Top1Memo() if self.memo else None
        self._fast: FastPath | None | bool = None  # built on first use; False: none applies

    # worker processes get the problem by pickling (in memory, never on disk): the fused tables
    # hold closures, so they are rebuilt there rather than sent
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fast": None}

    @property
    def devices(self) -> list[str]:
        return list(self.latency)

    @property
    def limits(self) -> dict[str, float]:
        return self.goals.limits

    @property
    def fast_path(self) -> FastPath | None:
        """Every cost column and the accuracy features of a batch from one fused gather (built on
        first use); None where the space's family has no slot layout or `use_tables` is off."""
        if self._fast is None:
            self._fast = (FastPath.build(self.space, self.cost_models.columns,
                                         {ms_key(d): p for d, p in self.latency.items()}, self.accuracy)
                          if self.use_tables else None) or False
        return self._fast or None

    def prepare(self) -> None:
        """Build the fused tables of the fast path now (else on the first batch)."""
        self.fast_path

    def gene_index(self) -> GeneIndex | None:
        """The space's choice-index rows (`hwnas.search.indexed.GeneIndex`) when the evolution
        should breed on them: the fast path applies and `index_breeding` is on."""
        fast = self.fast_path if self.index_breeding else None
        return fast.genes if fast is not None else None

    # -- scoring -------------------------------------------------------------------------------
    def costs(self, m: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Cost columns and constraint violation (sum of relative excesses) of rows `m`."""
        cols, violation, _ = self.costs_indexed(m)
        return cols, violation

    def costs_indexed(self, m: np.ndarray, trusted: bool = False, idx: SlotIndex | None = None
                      ) -> tuple[dict[str, np.ndarray], np.ndarray, SlotIndex | None]:
        """`costs`, plus the batch's `SlotIndex` (None off the fast path) for `top1` to reuse.

        On the fast path every cost column of every device reads one fused gather (exact tables
        and the additive parts of the latency models), then each model's few vector ops run on
        the whole batch. `trusted`: `m` was bred by a search from this space's choices (in
        canonical form), so the range checks are skipped. `idx`: the batch's `SlotIndex`, when the
        caller has it (`hwnas.search.indexed.GeneIndex.slot_index`)."""
        t = _clock()
        fast = self.fast_path if isinstance(m, np.ndarray) and len(m) else None
        if fast is None:
            idx = None
        elif idx is None:
            idx = fast.index(m, trusted)
        cols = fast.costs(idx, m) if idx is not None else self.cost_models(m)
        violation = self.goals.violation(cols, len(m))
        usage = self.usage
        usage.cost_calls += len(m)
        usage.cost_batches += 1
        usage.cost_s += _clock() - t
        return cols, violation, idx

    def top1(self, m: np.ndarray, idx: SlotIndex | None = None) -> np.ndarray:
        """The top-1 objective of rows `m`, memoised by network unless `memo` is off. Counts every
        row asked for (``usage.acc_calls``) and those actually run through the predictor
        (``usage.acc_computed``)."""
        t = _clock()
        usage = self.usage
        usage.acc_calls += len(m)
        usage.acc_batches += 1
        if self._memo is None:
            out, computed = self._objective(m, idx), len(m)
        else:
            out, computed = self._memo(m, idx, self._objective)
        usage.acc_computed += computed
        usage.acc_s += _clock() - t
        return out

    def _objective(self, m: np.ndarray, idx: SlotIndex | None = None) -> np.ndarray:
        return self.top1_model.objective(m, self.fast_path if idx is not None else None, idx)

    def top1_estimate(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the accuracy predictor's own top-1, no risk penalty: what is reported; its one-sigma
        uncertainty, NaN if it has none) of rows `m` (`Top1Model.estimate`)."""
        return self.top1_model.estimate(m)

    def evaluate(self, m: np.ndarray) -> Batch:
        m = np.asarray(m, dtype=np.int32)
        cols, violation, idx = self.costs_indexed(m)
        cols[TOP1] = self.top1(m, idx)
        return Batch(m, cols, violation)

    def with_top1(self, m: np.ndarray, cols: dict[str, np.ndarray], violation: np.ndarray,
                  idx: SlotIndex | None = None) -> Batch:
        """A batch whose costs are already known (constraint-first searches score accuracy last)."""
        return Batch(m, {**cols, TOP1: self.top1(m, idx)}, violation)

    def loss(self, batch: Batch) -> np.ndarray:
        """[n, len(objectives)], every objective minimised (top-1 negated)."""
        return self.goals.loss(batch.cols)

    def reference_point(self) -> np.ndarray:
        """A fixed hypervolume reference: top-1 0 %, each budget or limit, else 1.1 x the largest
        subnet's cost. Depends only on the problem, so fronts of different searches compare."""
        limits = self.limits
        ref = []
        for o in self.objectives:
            if o == TOP1:
                ref.append(0.0)
            elif o in limits:
                ref.append(limits[o])
            else:
                ref.append(1.1 * self.cost_models.of_arch(o, self.space.max_arch()))
        return np.asarray(ref, dtype=np.float64)

    # -- budgets -------------------------------------------------------------------------------
    def fastest(self, device: str, n_probe: int = 4096, seed: int = 0) -> tuple[float, np.ndarray]:
        """(predicted ms, row) of the fastest subnet on `device` (`CostModels.least`)."""
        return self.cost_models.least(ms_key(device), n_probe, seed)

    def check_budgets(self) -> dict[str, float]:
        """Raise a one-line BudgetError when a budget is below the fastest subnet's latency (or a
        MACs / params limit below the smallest subnet's); returns each device's fastest
        predicted latency."""
        fastest = {}
        for dev, budget in self.budgets.items():
            ms, row = self.fastest(dev)
            fastest[dev] = ms
            if ms > budget:
                arch = self.space.from_matrix(np.asarray(row)[None])[0]
                raise BudgetError(f"no subnet meets {budget:g} ms on '{dev}': the fastest one ({arch.id}, "
                                  f"{arch.describe()}) is predicted at {ms:.4g} ms; ask for at least "
                                  f"{ms:.4g} ms")
        for key, limit in self.goals.count_limits.items():
            if limit is not None:
                least = self.cost_models.of_arch(key, self.space.min_arch())
                if least > limit:
                    raise BudgetError(f"no subnet has {key} <= {limit:g}: the smallest subnet has {least:.6g}; "
                                      f"ask for at least {least:.6g}")
        return fastest

    # -- what a search cost ----------------------------------------------------------------------
    def reset(self) -> None:
        """Zero the counters and forget memoised predictions (to time or count a fresh search)."""
        self.usage.reset()
        if self._memo is not None:
            self._memo.clear()

    def counters(self) -> dict[str, int]:
        return self.usage.as_dict()

    def time_split(self, search_s: float) -> dict[str, float]:
        return self.usage.time_split(search_s)

    def cost_paths(self) -> dict[str, str]:
        """How each cost column is evaluated: "table", "vectorised" or "direct" (`Cost.path`)."""
        return self.cost_models.paths()

    def fast_paths(self) -> dict[str, Any]:
        """How a search evaluates: "path" ("tables": the family's slot layout gives exact tables,
        one fused gather per batch and choice-index breeding; "generic": every predictor called
        on whole int matrices), the fused gather's width, each cost column's path, and the
        accuracy features' ("gathered" from an exact table, or "model")."""
        fast = self.fast_path
        return {"family": self.space.family.name,
                "path": "tables" if fast is not None else "generic",
                "index_breeding": self.gene_index() is not None,
                "fused_gather": fast is not None, "fused_width": fast.table.width if fast else 0,
                "costs": self.cost_paths(),
                "accuracy": fast.accuracy_path if fast is not None else "model",
                "accuracy_features": "gathered" if fast is not None and fast.acc_table is not None else "model"}


# the counters as attributes of the problem, as callers before `usage` read them
for _name in ("acc_calls", "acc_batches", "acc_computed", "cost_calls", "cost_batches", "acc_s", "cost_s"):
    setattr(Problem, _name, property(lambda self, _name=_name: getattr(self.usage, _name),
                                     doc=f"``usage.{_name}``"))
del _name


def feasible_sample(problem: Problem, n: int, rng: np.random.Generator, max_rounds: int = 50
                    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """`n` subnets meeting every constraint (costs scored in batches, invalid ones redrawn).

    Draws half uniform, half graded small-to-large, so tight budgets are found too; when sampling
    finds fewer than `n`, the found ones (or the fastest subnet) are mutated to fill up."""
    rows, cols, viols = [], [], []
    have = 0
    for _ in range(max_rounds):
        m = sample_mixed(problem.space, max(4 * n, 64), rng)
        c, v = problem.costs(m)
        ok = v <= 0
        if ok.any():
            rows.append(m[ok])
            cols.append({k: x[ok] for k, x in c.items()})
            viols.append(v[ok])
            have += int(ok.sum())
        if have >= n:
            break
    if have == 0:
        seeds = np.stack([problem.fastest(d)[1] for d in problem.devices])
        c, v = problem.costs(seeds)
        if not (v <= 0).any():
            raise BudgetError("no subnet found that meets all budgets together "
                              f"({', '.join(f'{d}: {b:g} ms' for d, b in problem.budgets.items())}); "
                              "relax one of them")
        ok = v <= 0
        rows, cols, viols, have = [seeds[ok]], [{k: x[ok] for k, x in c.items()}], [v[ok]], int(ok.sum())
    pool = np.concatenate(rows)
    pool_cols = {k: np.concatenate([c[k] for c in cols]) for k in cols[0]}
    pool_v = np.concatenate(viols)
    for _ in range(max_rounds):
        if len(pool) >= n:
            break
        m = mutate(problem.space, pool[rng.integers(len(pool), size=n)], rng, prob=0.3)
        c, v = problem.costs(m)
        ok = v <= 0
        pool = np.concatenate([pool, m[ok]])
        pool_cols = {k: np.concatenate([pool_cols[k], c[k][ok]]) for k in pool_cols}
        pool_v = np.concatenate([pool_v, v[ok]])
    idx = np.arange(len(pool))[:n] if len(pool) >= n else rng.integers(len(pool), size=n)
    return pool[idx], {k: x[idx] for k, x in pool_cols.items()}, pool_v[idx]
