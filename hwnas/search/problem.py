"""The search problem: objectives and constraints over subnets, scored in batches.

A `Problem` owns the predictors (accuracy, latency per device) and turns an int matrix of subnets
into named columns -- ``top1``, ``ms:<device>``, ``macs``, ``params`` -- plus a constraint
violation (0 = every budget met). Searches only ever call it with whole batches and it counts the
archs it scored, so algorithms can be compared at equal predictor calls.

Additive cost models (lookup tables, linear analytic predictors, MACs, params) are replaced by an
exact dense table (`hwnas.search.tabulate`) when the check passes; the table also gives the exact
fastest subnet, which is what an impossible budget is reported against. A batch then reads every
cost column and the accuracy features with one fused gather (`hwnas.search.fused.FastPath`).

The tables follow the space's family's slot layout (`Family.slot_layout`); a family without one
takes the generic vectorised path: every predictor is called on the whole int matrix of a batch
(MACs and params from the family's exact vectorised `count_params_macs`). `fast_paths()` says which
(``"path": "tables"`` or ``"generic"``), as search.json records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from hwnas.errors import BudgetError, HwnasError, InputError
from hwnas.search.fused import FastPath
from hwnas.search.indexed import GeneIndex, SlotIndex
from hwnas.search.operators import mutate, sample_graded, sample_mixed
from hwnas.search.tabulate import AdditiveTable, argmin_row, tabulable, tabulate, vectorised_latency

__all__ = ["PredictorMissing", "Predictor", "Batch", "Problem", "SearchOutcome", "feasible_sample",
           "latency_predictor_path", "load_latency_predictor", "TOP1", "ms_key"]

TOP1 = "top1"


class PredictorMissing(HwnasError):
    """A predictor the search needs has not been made yet."""


class Predictor(Protocol):
    def predict(self, archs: Any) -> np.ndarray: ...


def ms_key(device: str) -> str:
    return f"ms:{device}"


def latency_predictor_path(run_dir: str | Path, device: str) -> Path:
    from hwnas.run import RunFiles

    return RunFiles(Path(run_dir)).latency_predictor(device)


def load_latency_predictor(run_dir: str | Path, device: str, width_mult: float | None = None) -> Predictor:
    """The device's latency predictor of the run, or a one-line error naming the command."""
    path = latency_predictor_path(run_dir, device)
    if not path.exists():
        raise PredictorMissing(f"no latency predictor for device '{device}' in {run_dir}: make it with "
                               f"`hwnas latency fit --run {run_dir} --device {device}`")
    from hwnas.latency import load_predictor

    pred = load_predictor(path)
    w = getattr(getattr(pred, "meta", None), "width_mult", None)
    if width_mult is not None and w is not None and float(w) != float(width_mult):
        raise InputError(f"{path} was fitted for width multiplier {w}, but the run's space has "
                         f"{width_mult}; refit it with `hwnas latency fit --run {run_dir} --device {device}`")
    return pred


@dataclass
class Batch:
    """Scored subnets: canonical rows, named columns, constraint violation (0 = feasible)."""

    m: np.ndarray
    cols: dict[str, np.ndarray]
    violation: np.ndarray

    def __len__(self) -> int:
        return len(self.m)

    @property
    def feasible(self) -> np.ndarray:
        return self.violation <= 0

    def take(self, idx: np.ndarray) -> Batch:
        return Batch(self.m[idx], {k: v[idx] for k, v in self.cols.items()}, self.violation[idx])

    @staticmethod
    def concat(batches: Sequence[Batch], width: int = 46) -> Batch:
        """One batch of `batches` (an empty one `width` columns wide when there are none)."""
        batches = [b for b in batches if len(b)]
        if not batches:
            return Batch(np.zeros((0, width), np.int32), {}, np.zeros(0))
        keys = set(batches[0].cols).intersection(*(b.cols for b in batches[1:]))
        return Batch(np.concatenate([b.m for b in batches]),
                     {k: np.concatenate([b.cols[k] for b in batches]) for k in sorted(keys)},
                     np.concatenate([b.violation for b in batches]))


@dataclass
class _Cost:
    """One cost column: the model, and its exact table when it is additive."""

    fn: Callable[[np.ndarray], np.ndarray]
    table: AdditiveTable | None = None
    vectorised: bool = False  # an hwnas latency model fed from exact feature tables

    @property
    def path(self) -> str:
        """How the column is evaluated: "table" (exact additive table, one gather), "vectorised"
        (an hwnas latency model run on the whole batch, its analytic features gathered from an
        exact table: `hwnas.search.tabulate.vectorised_latency`) or "direct" (an unknown model,
        called as is)."""
        return "table" if self.table is not None else "vectorised" if self.vectorised else "direct"

    def __call__(self, m: np.ndarray) -> np.ndarray:
        return self.table.predict(m) if self.table is not None else np.asarray(self.fn(m), np.float64)


@dataclass
class Problem:
    """Maximise predicted top-1 and minimise the other `objectives` (``ms:<device>``, ``macs``,
    ``params``) subject to ``ms:<device> <= budgets[device]`` and optional MACs/params limits.

    With `accuracy_risk` k > 0 and a predictor that knows its spread, the top-1 objective is the
    pessimistic ``mean - k * sigma``: a search that maximises the mean is drawn to where the
    predictor errs high (the winner's curse), most of all where it extrapolates.

    With `top1_drop` (an object with ``predict_with_std(m) -> (drop, sigma)`` in top-1 points)
    the problem scores subnets in a reduced precision (bf16, INT8): top-1 is the accuracy
    predictor's minus the predicted drop, and the two sigmas add in quadrature. The latency
    predictors are then those precision's devices' (the budgets stay keyed by the device names the
    caller gives them)."""

    space: Any  # the run's space, any family
    accuracy: Predictor
    latency: Mapping[str, Predictor]
    budgets: Mapping[str, float]
    objectives: tuple[str, ...] = ()
    n_classes: int = 1000
    max_macs: float | None = None
    max_params: float | None = None
    accuracy_risk: float = 0.0
    top1_drop: Any = None  # bf16 / INT8 points: a drop model (`hwnas.accuracy.int8.DropModel`)
    use_tables: bool = True
    memo: bool = True
    index_breeding: bool = True  # evolution on choice-index rows where it applies (`GeneIndex`)
    acc_calls: int = 0
    acc_batches: int = 0
    acc_computed: int = 0
    cost_calls: int = 0
    cost_batches: int = 0
    acc_s: float = 0.0  # seconds in the accuracy predictor (features included)
    cost_s: float = 0.0  # seconds in the cost models (latency predictors, MACs, params)
    _costs: dict[str, _Cost] = field(default_factory=dict, repr=False)
    _top1: dict[bytes, float] = field(default_factory=dict, repr=False)
    _fast: Any = field(default=None, repr=False)
    _last_stats: Any = field(default=None, repr=False)  # (rows' bytes, params, MACs) of the last batch

    def __post_init__(self) -> None:
        if not self.latency:
            raise InputError("name at least one device to search for")
        unknown = set(self.budgets) - set(self.latency)
        if unknown:
            raise InputError(f"budget for device(s) {sorted(unknown)} without a latency predictor")
        for dev, ms in self.budgets.items():
            if not (isinstance(ms, (int, float)) and ms > 0 and np.isfinite(ms)):
                raise InputError(f"the latency budget for '{dev}' must be a positive number of ms, got {ms!r}")
        if not (0.0 <= self.accuracy_risk < 10 and np.isfinite(self.accuracy_risk)):
            raise InputError(f"--accuracy-risk must be within [0, 10), got {self.accuracy_risk!r}")
        for name, limit in (("--max-macs", self.max_macs), ("--max-params", self.max_params)):
            if limit is not None and not (isinstance(limit, (int, float)) and limit > 0 and np.isfinite(limit)):
                raise InputError(f"{name} must be a positive number, got {limit!r}")
        if not self.objectives:
            self.objectives = (TOP1, ms_key(next(iter(self.latency))))
        allowed = {TOP1, "macs", "params", *(ms_key(d) for d in self.latency)}
        bad = [o for o in self.objectives if o not in allowed]
        if bad or TOP1 not in self.objectives:
            raise InputError(f"objectives must include top1 and come from {sorted(allowed)}; got "
                             f"{list(self.objectives)}")
        self._build_costs()

    def _build_costs(self) -> None:
        from hwnas.latency.base import LatencyPredictor

        self._costs = {}
        self._fast = None
        for dev, pred in self.latency.items():
            fast = (self.use_tables and tabulable(self.space) and isinstance(pred, LatencyPredictor)
                    and pred.meta.family == self.space.family.name)
            cost = self._make_cost(vectorised_latency(pred, self.space) if fast else pred.predict)
            cost.vectorised = fast
            self._costs[ms_key(dev)] = cost
        if "macs" in self.objectives or self.max_macs is not None:
            self._costs["macs"] = self._make_cost(lambda m: self._stats(m, "macs"))
        if "params" in self.objectives or self.max_params is not None:
            self._costs["params"] = self._make_cost(lambda m: self._stats(m, "params"))

    # worker processes get the problem by pickling (in memory, never on disk): the tables hold
    # closures, so they are rebuilt there rather than sent
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_costs": {}, "_fast": None, "_last_stats": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build_costs()

    # -- cost models ---------------------------------------------------------------------------
    def _stats(self, m: np.ndarray, what: str) -> np.ndarray:
        from hwnas.accuracy.features import params_macs

        m = np.ascontiguousarray(m, dtype=np.int64)
        key = m.tobytes()  # MACs and params of one batch come from one count
        if self._last_stats is None or self._last_stats[0] != key:
            self._last_stats = (key, *params_macs(self.space, m, self.n_classes))
        return self._last_stats[2] if what == "macs" else self._last_stats[1]

    def _make_cost(self, fn: Callable[[np.ndarray], np.ndarray]) -> _Cost:
        return _Cost(fn, tabulate(fn, self.space) if self.use_tables else None)

    def tabulated(self) -> dict[str, bool]:
        """Which cost columns run from an exact table (else the model is called directly)."""
        return {k: c.table is not None for k, c in self._costs.items()}

    def cost_paths(self) -> dict[str, str]:
        """How each cost column is evaluated: "table", "vectorised" or "direct" (`_Cost.path`)."""
        return {k: c.path for k, c in self._costs.items()}

    @property
    def devices(self) -> list[str]:
        return list(self.latency)

    @property
    def limits(self) -> dict[str, float]:
        out = {ms_key(d): float(v) for d, v in self.budgets.items()}
        if self.max_macs is not None:
            out["macs"] = float(self.max_macs)
        if self.max_params is not None:
            out["params"] = float(self.max_params)
        return out

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
        fast = self._fast_path() if isinstance(m, np.ndarray) and len(m) else None
        if fast is None:
            idx = None
        elif idx is None:
            idx = fast.index(m, trusted)
        if idx is not None:
            s = fast.table.gather(idx)
            cols = {k: post(s, m) for k, post in fast.posts.items()}
        else:
            cols = {k: c(m) for k, c in self._costs.items()}
        violation = np.zeros(len(m))
        for key, limit in fast.limits if fast is not None else self.limits.items():
            violation += np.maximum(cols[key] / limit - 1.0, 0.0)
        self.cost_calls += len(m)
        self.cost_batches += 1
        self.cost_s += _clock() - t
        return cols, violation, idx

    def prepare(self) -> None:
        """Build the fused tables of the fast path now (else on the first batch)."""
        self._fast_path()

    def _fast_path(self) -> FastPath | None:
        if self._fast is None:
            self._fast = (FastPath.build(self.space, self._costs,
                                         {ms_key(d): p for d, p in self.latency.items()}, self.accuracy,
                                         self.limits)
                          if self.use_tables else None) or False
        return self._fast or None

    def gene_index(self) -> GeneIndex | None:
        """The space's choice-index rows (`hwnas.search.indexed.GeneIndex`) when the evolution
        should breed on them: the fast path applies and `index_breeding` is on."""
        fast = self._fast_path() if self.index_breeding else None
        return fast.genes if fast is not None else None

    def top1(self, m: np.ndarray, idx: SlotIndex | None = None) -> np.ndarray:
        """Predicted top-1 of rows `m`, memoised by network: an evolutionary search keeps
        re-breeding the networks it already has (about two thirds of OFA's 50,000 children are
        repeats), and the accuracy MLP is most of a search's time. Counts every row asked for
        (`acc_calls`) and those actually run through the predictor (`acc_computed`)."""
        t = _clock()
        self.acc_calls += len(m)
        self.acc_batches += 1
        if not self.memo:
            self.acc_computed += len(m)
            out = self._objective(m, idx)
            self.acc_s += _clock() - t
            return out
        rows = np.ascontiguousarray(m, dtype=np.int32)
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel().tolist()
        memo = self._top1
        if len(memo) > 2_000_000:  # bound the memory of very long searches
            memo.clear()
        missing = {k: i for i, k in enumerate(keys) if k not in memo}
        if missing:
            pos = np.fromiter(missing.values(), dtype=np.int64, count=len(missing))
            memo.update(zip(missing, self._objective(rows[pos], None if idx is None else idx.take(pos)).tolist()))
            self.acc_computed += len(pos)
        out = np.fromiter(map(memo.__getitem__, keys), dtype=np.float64, count=len(keys))
        self.acc_s += _clock() - t
        return out

    def _objective(self, m: np.ndarray, idx: SlotIndex | None = None) -> np.ndarray:
        if self.top1_drop is not None:
            mean, std = self._mean_std(m, idx)
            drop, dstd = self.top1_drop.predict_with_std(m)
            mean = mean - np.asarray(drop, np.float64)
            if self.accuracy_risk > 0:
                return mean - self.accuracy_risk * np.sqrt(np.nan_to_num(std) ** 2 + np.asarray(dstd) ** 2)
            return mean
        risk = self.accuracy_risk > 0 and hasattr(self.accuracy, "predict_with_std")
        fast = self._fast_path() if idx is not None else None
        if fast is not None and fast.ridge is not None:
            mean, std = fast.ridge(idx)
            return mean - self.accuracy_risk * std if risk else mean
        if fast is not None and fast.acc_table is not None:
            x = fast.acc_post(fast.acc_table.gather(idx))
            mean, std = self.accuracy.predict_features_with_std(x)
            if risk:
                return np.asarray(mean, dtype=np.float64) - self.accuracy_risk * np.asarray(std, dtype=np.float64)
            return np.asarray(mean, dtype=np.float64)
        if risk:
            mean, std = self.accuracy.predict_with_std(m)
            return np.asarray(mean, dtype=np.float64) - self.accuracy_risk * np.asarray(std, dtype=np.float64)
        return np.asarray(self.accuracy.predict(m), dtype=np.float64)

    def _mean_std(self, m: np.ndarray, idx: SlotIndex | None) -> tuple[np.ndarray, np.ndarray]:
        """The accuracy predictor's (top-1, sigma) of rows `m`, by the fastest path (sigma 0 when
        it has none)."""
        fast = self._fast_path() if idx is not None else None
        if fast is not None and fast.ridge is not None:
            return fast.ridge(idx)
        if fast is not None and fast.acc_table is not None:
            mean, std = self.accuracy.predict_features_with_std(fast.acc_post(fast.acc_table.gather(idx)))
        elif hasattr(self.accuracy, "predict_with_std"):
            mean, std = self.accuracy.predict_with_std(m)
        else:
            mean, std = self.accuracy.predict(m), np.zeros(len(m))
        return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)

    def top1_estimate(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the accuracy predictor's own top-1, no risk penalty: what is reported; its one-sigma
        uncertainty, NaN if it has none) of rows `m`, in one call. In bf16 / INT8 (`top1_drop`): minus
        the predicted drop, the sigmas added in quadrature."""
        m = np.asarray(m, dtype=np.int32)
        if self.top1_drop is not None:
            mean, std = self._mean_std(m, None)
            drop, dstd = self.top1_drop.predict_with_std(m)
            return mean - np.asarray(drop, np.float64), np.sqrt(std ** 2 + np.asarray(dstd, np.float64) ** 2)
        if hasattr(self.accuracy, "predict_with_std"):
            mean, std = self.accuracy.predict_with_std(m)
            return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
        return np.asarray(self.accuracy.predict(m), dtype=np.float64), np.full(len(m), np.nan)

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
        return np.stack([-batch.cols[o] if o == TOP1 else batch.cols[o] for o in self.objectives], axis=1)

    def reference_point(self) -> np.ndarray:
        """A fixed hypervolume reference: top-1 0 %, each budget or limit, else 1.1 x the largest
        subnet's cost. Depends only on the problem, so fronts of different searches compare."""
        limits = self.limits
        biggest = None
        ref = []
        for o in self.objectives:
            if o == TOP1:
                ref.append(0.0)
            elif o in limits:
                ref.append(limits[o])
            else:
                if biggest is None:
                    biggest = {k: float(c(self.space.to_matrix([self.space.max_arch()]))[0])
                               for k, c in self._costs.items()}
                ref.append(1.1 * biggest[o])
        return np.asarray(ref, dtype=np.float64)

    # -- budgets -------------------------------------------------------------------------------
    def fastest(self, device: str, n_probe: int = 4096, seed: int = 0) -> tuple[float, np.ndarray]:
        """(predicted ms, row) of the fastest subnet on `device`: exact for a tabulated predictor,
        else the best of every resolution's minimum subnet and a graded small-to-large sample."""
        cost = self._costs[ms_key(device)]
        if cost.table is not None:
            row = argmin_row(cost.table)
        else:
            cand = np.concatenate([
                self.space.to_matrix([self.space.min_arch(r) for r in self.space.r_choices]),
                sample_graded(self.space, n_probe, np.random.default_rng(seed))])
            row = cand[int(np.argmin(cost(cand)))]
        return float(cost(row[None])[0]), row

    def check_budgets(self) -> dict[str, float]:
        """Raise a one-line BudgetError when a budget is below the fastest subnet's latency;
        returns each device's fastest predicted latency."""
        fastest = {}
        for dev, budget in self.budgets.items():
            ms, row = self.fastest(dev)
            fastest[dev] = ms
            if ms > budget:
                arch = self.space.from_matrix(np.asarray(row)[None])[0]
                raise BudgetError(f"no subnet meets {budget:g} ms on '{dev}': the fastest one ({arch.id}, "
                                  f"{arch.describe()}) is predicted at {ms:.4g} ms; ask for at least "
                                  f"{ms:.4g} ms")
        space = self.space
        for key, limit, flag in (("macs", self.max_macs, "--max-macs"), ("params", self.max_params, "--max-params")):
            if limit is not None:
                least = float(self._costs[key](space.to_matrix([space.min_arch()]))[0])
                if least > limit:
                    raise BudgetError(f"no subnet has {flag.removeprefix('--max-')} <= {limit:g}: the smallest "
                                      f"subnet has {least:.4g}; ask for at least {least:.4g}")
        return fastest

    def reset(self) -> None:
        """Zero the counters and forget memoised predictions (to time or count a fresh search)."""
        self.acc_calls = self.acc_batches = self.acc_computed = self.cost_calls = self.cost_batches = 0
        self.acc_s = self.cost_s = 0.0
        self._top1.clear()

    def counters(self) -> dict[str, int]:
        return {"predictor_calls": self.acc_calls, "accuracy_batches": self.acc_batches,
                "predictor_computed": self.acc_computed, "cost_calls": self.cost_calls,
                "cost_batches": self.cost_batches}

    def time_split(self, search_s: float) -> dict[str, float]:
        """Seconds of a search spent in the accuracy predictor, in the cost models (latency
        predictors, MACs, params) and in the algorithm's own bookkeeping (the rest)."""
        return {"accuracy_predictor_s": round(self.acc_s, 4), "latency_predictor_s": round(self.cost_s, 4),
                "bookkeeping_s": round(max(search_s - self.acc_s - self.cost_s, 0.0), 4)}

    def fast_paths(self) -> dict[str, Any]:
        """How a search evaluates: "path" ("tables": the family's slot layout gives exact tables,
        one fused gather per batch and choice-index breeding; "generic": every predictor called
        on whole int matrices), the fused gather's width, each cost column's path, and the
        accuracy features' ("gathered" from an exact table, or "model")."""
        fast = self._fast_path()
        return {"family": self.space.family.name,
                "path": "tables" if fast is not None else "generic",
                "index_breeding": self.gene_index() is not None,
                "fused_gather": fast is not None, "fused_width": fast.table.width if fast else 0,
                "costs": self.cost_paths(),
                "accuracy": ("ridge pair tables" if fast is not None and fast.ridge is not None
                             else "gathered features" if fast is not None and fast.acc_table is not None
                             else "model"),
                "accuracy_features": "gathered" if fast is not None and fast.acc_table is not None else "model"}


_clock = __import__("time").perf_counter


@dataclass
class SearchOutcome:
    """What a search algorithm hands back: every subnet it scored (its archive), the best-so-far
    history, and algorithm facts for the report."""

    archive: Batch
    history: list[float] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


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
