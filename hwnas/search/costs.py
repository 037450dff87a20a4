"""A problem's cost columns: each device's latency model, the exact MACs / params counts and the
memory columns (``ram_kb``: the planned activation arena, not additive, so never tabulated;
``flash_kb``: weight bytes; `hwnas.families.memory`).

Additive models (lookup tables, linear analytic predictors, MACs, params) are replaced by an
exact dense table (`hwnas.search.tabulate`) when the check passes; the table also gives the exact
cheapest subnet, which is what an impossible budget is reported against. An hwnas latency model of
the space's family that is not additive itself is `vectorised`: its analytic features come from
exact tables (`hwnas.search.tabulate.vectorised_latency`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hwnas.search.goals import ms_key
from hwnas.search.operators import sample_graded
from hwnas.search.tabulate import AdditiveTable, argmin_row, tabulable, tabulate, vectorised_latency

__all__ = ["Cost", "CostModels"]


@dataclass
class Cost:
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


class CostModels:
    """The cost columns by key (``ms:<device>`` for each latency model, then the `counts` asked
    for: ``macs``, ``params``), tabulated where exact unless `use_tables` is off."""

    def __init__(self, space: Any, latency: Mapping[str, Any], counts: Sequence[str], n_classes: int,
                 use_tables: bool = True, memory_precision: str = "fp32") -> None:
        self.space, self.latency, self.counts = space, latency, tuple(counts)
        self.n_classes, self.use_tables, self.memory_precision = n_classes, use_tables, memory_precision
        self._build()

    def _build(self) -> None:
        from hwnas.latency.base import LatencyPredictor

        self._last_counts: Any = None  # (rows' bytes, params, MACs) of the last batch
        self._memory: dict[bytes, tuple[int, int]] = {}  # row bytes -> (arena, weight) bytes
        self.columns: dict[str, Cost] = {}
        for dev, pred in self.latency.items():
            fast = (self.use_tables and tabulable(self.space) and isinstance(pred, LatencyPredictor)
                    and pred.meta.family == self.space.family.name)
            cost = self._cost(vectorised_latency(pred, self.space) if fast else pred.predict)
            cost.vectorised = fast
            self.columns[ms_key(dev)] = cost
        for what in self.counts:
            fn = lambda m, what=what: self.count(m, what)  # noqa: E731
            self.columns[what] = Cost(fn) if what == "ram_kb" else self._cost(fn)

    def _cost(self, fn: Callable[[np.ndarray], np.ndarray]) -> Cost:
        return Cost(fn, tabulate(fn, self.space) if self.use_tables else None)

    # worker processes get the models by pickling (in memory, never on disk): the tables hold
    # closures, so they are rebuilt there rather than sent
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("columns", "_last_counts", "_memory")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build()

    def count(self, m: np.ndarray, what: str) -> np.ndarray:
        """Exact ``macs`` or ``params`` of rows `m` (both from one count per batch), or their
        ``ram_kb`` / ``flash_kb`` at `memory_precision` (each distinct row planned once)."""
        from hwnas.accuracy.features import params_macs

        m = np.ascontiguousarray(m, dtype=np.int64)
        if what in ("ram_kb", "flash_kb"):
            from hwnas.families.memory import KB, family_memory

            ram, flash = family_memory(self.space.family, m, self.space.width_mult, self.n_classes,
                                       self.memory_precision, self._memory)
            return (ram if what == "ram_kb" else flash) / KB
        key = m.tobytes()
        if self._last_counts is None or self._last_counts[0] != key:
            self._last_counts = (key, *params_macs(self.space, m, self.n_classes))
        return self._last_counts[2] if what == "macs" else self._last_counts[1]

    def __getitem__(self, key: str) -> Cost:
        return self.columns[key]

    def __call__(self, m: np.ndarray) -> dict[str, np.ndarray]:
        """Every column of rows `m`, each model called on the whole batch."""
        return {k: c(m) for k, c in self.columns.items()}

    def paths(self) -> dict[str, str]:
        """How each column is evaluated: "table", "vectorised" or "direct" (`Cost.path`)."""
        return {k: c.path for k, c in self.columns.items()}

    def tabulated(self) -> dict[str, bool]:
        """Which columns run from an exact table."""
        return {k: c.table is not None for k, c in self.columns.items()}

    def least(self, key: str, n_probe: int = 4096, seed: int = 0) -> tuple[float, np.ndarray]:
        """(cost, row) of the cheapest subnet in column `key`: exact for a tabulated column, else the
        best of every resolution's minimum subnet and a graded small-to-large sample."""
        cost = self.columns[key]
        if cost.table is not None:
            row = argmin_row(cost.table)
        else:
            cand = np.concatenate([
                self.space.to_matrix([self.space.min_arch(r) for r in self.space.r_choices]),
                sample_graded(self.space, n_probe, np.random.default_rng(seed))])
            row = cand[int(np.argmin(cost(cand)))]
        return float(cost(row[None])[0]), row

    def of_arch(self, key: str, arch: Any) -> float:
        """Column `key` of one arch."""
        return float(self.columns[key](self.space.to_matrix([arch]))[0])
