"""Turn an additive per-slot cost model into dense tables, checked exact, for fast search.

Lookup-table latency predictors, linear analytic ones, MACs and parameter counts all have the form
``cost = F(context) + sum over running slots of B(slot, its context, its genes)`` (the family's
`slot_layout`; for the MobileNet-style families the context is the resolution, a slot's genes
its kernel and expand). Such a model is fully known from a few thousand probe rows
(`hwnas.search.slots.SpaceSlots.probes`), one batched call; afterwards a search scores a
generation with one fancy-index gather instead of calling the model (which may rebuild its tables
per call).

`tabulate` never guesses: it checks the table against the model on random rows of the space and
returns None (use the model directly) when the model is not additive, e.g. a log-space or tree
model, or when the space's family has no slot layout.

Models that are not additive but start from additive counts (analytic log, hybrid, MLP and
transfer latency predictors all start from the analytic features of `hwnas.latency.analytic`) get
the next best thing, `vectorised_latency`: those features come from an exact `VectorTable` (bit
for bit, they are integer counts) and only the model's own few vector ops run per batch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwnas.search.operators import sample_mixed
from hwnas.search.slots import SpaceSlots, space_slots

__all__ = ["AdditiveTable", "tabulate", "VectorTable", "tabulate_vector", "feature_table", "accuracy_feature_table",
           "vectorised_latency", "tabulable", "argmin_row"]

CostFn = Callable[[np.ndarray], np.ndarray]


def tabulable(space) -> bool:
    """True when the tables here apply to `space`: its family describes a slot layout."""
    return space_slots(space) is not None


@dataclass
class VectorTable:
    """``fixed[context] + sum(rows[slot row] over running slots)``, float64 [n, F] (`slots` says
    where each row reads); rows the table cannot express go to `fallback`, the tabulated model:
    never silently wrong."""

    slots: SpaceSlots
    fixed: np.ndarray  # [n_ctx, F]
    rows: np.ndarray  # [n_rows, F]
    fallback: CostFn

    def __post_init__(self) -> None:
        # the slot rows plus the zero row that slots a subnet does not run point at
        self.flat = np.concatenate([self.rows, np.zeros((1,) + self.rows.shape[1:])])
        self._ones = np.ones((1, self.slots.n_slots))

    @property
    def space(self):
        return self.slots.space

    @property
    def width(self) -> int:
        return self.flat.shape[1]

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        ctx, flat, bad = self.slots.index_values(m)
        vals = self.flat.take(flat, axis=0)  # [n, slots, F]
        # sum over slots as a batched matmul: several times faster than a strided sum
        out = self.fixed[ctx] + np.matmul(self._ones, vals)[:, 0]
        if bad.any():
            out[bad] = np.asarray(self.fallback(m[bad]), dtype=np.float64)
        return out


@dataclass
class AdditiveTable:
    """The scalar `VectorTable`: ``fixed[context] + sum(rows[slot row] over running slots)``."""

    slots: SpaceSlots
    fixed: np.ndarray  # [n_ctx]
    rows: np.ndarray  # [n_rows]
    fallback: CostFn

    def __post_init__(self) -> None:
        self.flat = np.append(self.rows, 0.0)

    @property
    def space(self):
        return self.slots.space

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        ctx, flat, bad = self.slots.index_values(m)
        out = np.take(self.fixed, ctx) + np.take(self.flat, flat).sum(axis=1)
        if bad.any():
            out[bad] = np.asarray(self.fallback(m[bad]), dtype=np.float64)
        return out

    def as_vector(self) -> VectorTable:
        """This table as a one-column `VectorTable` (for a fused gather)."""
        return VectorTable(self.slots, self.fixed[:, None], self.rows[:, None],
                           lambda m: np.asarray(self.fallback(m), dtype=np.float64)[:, None])


def tabulate(fn: CostFn, space, *, n_check: int = 512, rtol: float = 1e-6,
             seed: int = 0) -> AdditiveTable | None:
    """An exact `AdditiveTable` of `fn` (cost of each row of a flat int matrix) over `space`,
    or None when `fn` is not additive per slot (or the family has no slot layout)."""
    slots = space_slots(space)
    if slots is None:
        return None
    fixed, rows = slots.assemble(np.asarray(fn(slots.probes()), dtype=np.float64))
    if fixed.ndim != 1:
        return None
    table = AdditiveTable(slots, fixed, rows, fn)
    check = sample_mixed(space, n_check, np.random.default_rng(seed))
    want = np.asarray(fn(check), dtype=np.float64)
    got = table.predict(check)
    if not np.allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max(initial=0)))):
        return None
    return table


def tabulate_vector(fn: CostFn, space, *, n_check: int = 512, seed: int = 0) -> VectorTable | None:
    """An exact `VectorTable` of `fn` (flat rows -> float [n, F]), or None unless it reproduces
    `fn` bit for bit on random rows (so a model fed from it predicts exactly as before: true of
    integer-valued counts such as the analytic features, whose sums are exact in float64)."""
    slots = space_slots(space)
    if slots is None:
        return None
    y = np.asarray(fn(slots.probes()), dtype=np.float64)
    if y.ndim != 2:
        return None
    table = VectorTable(slots, *slots.assemble(y), fn)
    check = sample_mixed(space, n_check, np.random.default_rng(seed))
    if not np.array_equal(table.predict(check), np.asarray(fn(check), dtype=np.float64)):
        return None
    return table


def argmin_row(table: AdditiveTable) -> np.ndarray:
    """The canonical row minimising an additive table, exactly: per context, each slot at its
    cheapest genes, each depth gene at the value whose optional slots add least; then the cheapest
    context."""
    slots = table.slots
    pos = slots.ctx_values()
    low, arg, where = [], [], []  # per slot: cheapest entry and option per its context; each context's
    for s in range(slots.n_slots):
        entries = table.rows[slots.offset[s]:slots.offset[s] + slots.n_ctx_of[s] * slots.n_opt[s]]
        entries = entries.reshape(slots.n_ctx_of[s], slots.n_opt[s])
        arg.append(entries.argmin(axis=1))
        low.append(entries[np.arange(len(entries)), arg[-1]])
        sub = [pos[:, slots.context.index(c)] for c in slots.keys[s]]
        where.append(np.ravel_multi_index(sub, slots.counts[list(slots.keys[s])]))
    groups: dict[int | None, list[int]] = {}
    for s, slot in enumerate(slots.slots):
        groups.setdefault(slot.depth, []).append(s)
    best_cost, best_ci = np.inf, 0
    best_depths: dict[int, int] = {}
    for ci in range(slots.n_ctx):
        lows = [low[s][where[s][ci]] for s in range(slots.n_slots)]
        total, depths = table.fixed[ci], {}
        for depth, members in groups.items():
            always = np.asarray([lows[s] for s in members if slots.always_runs(s)]).sum()
            if depth is None:
                total += always
                continue
            options = {int(d): always + np.asarray([lows[s] for s in members if not slots.always_runs(s)
                                                    and slots.slots[s].after < d]).sum()
                       for d in slots.choices[depth]}
            depths[depth] = min(options, key=options.get)
            total += options[depths[depth]]
        if total < best_cost:
            best_cost, best_ci, best_depths = total, ci, depths
    row = slots.base_row()
    for j, c in enumerate(slots.context):
        row[c] = slots.choices[c][pos[best_ci, j]]
    for s in range(slots.n_slots):
        row[list(slots.slots[s].genes)] = slots.options(s)[arg[s][where[s][best_ci]]]
    for depth, d in best_depths.items():
        row[depth] = d
    return slots.space.canonical(row[None])[0]


# -- the exact analytic features of hwnas latency models -----------------------------------------
@functools.lru_cache(maxsize=16)
def feature_table(space, width_mult: float, n_classes: int) -> VectorTable | None:
    """The exact table of `hwnas.latency.analytic.all_features` of `space`'s family over `space`
    (None if not exact, or the family has no slot layout)."""
    from hwnas.families import NetworkSpec
    from hwnas.latency.analytic import all_features

    net = NetworkSpec(space.family.name, width_mult, n_classes)
    return tabulate_vector(lambda m: all_features(np.asarray(m, dtype=np.int64), net), space)


@functools.lru_cache(maxsize=16)
def accuracy_feature_table(space, feature_set: str, n_classes: int) -> VectorTable | None:
    """An exact `VectorTable` of `hwnas.accuracy.features.pre_features` over `space`, checked to
    give `arch_features` bit for bit through `features_from_pre`; None when it does not. A search
    gathers a batch's accuracy features from it (with the slot index its costs already derived)."""
    from hwnas.accuracy.features import FEATURE_SETS, arch_features, features_from_pre, pre_features

    if feature_set not in FEATURE_SETS:
        return None
    table = tabulate_vector(lambda m: pre_features(space, m, feature_set, n_classes), space)
    if table is None:
        return None
    rows = sample_mixed(space, 512, np.random.default_rng(7))
    if not np.array_equal(features_from_pre(space, table.predict(rows), feature_set),
                          arch_features(space, rows, feature_set, n_classes)):
        return None
    return table


def vectorised_latency(pred, space) -> CostFn:
    """`pred.predict` of an hwnas `LatencyPredictor`, for search: the analytic features every
    feature-based kind (analytic, hybrid, mlp, transfer) starts from are gathered from exact
    per-space tables (`feature_table`) instead of being counted per call; the rest of the model
    (log, ridge, MLP, exp) runs as before on the whole batch, so predictions are identical."""
    from hwnas.latency.analytic import FeatureCache
    from hwnas.latency.base import single_thread

    own = space.family.name

    def tabulated(m: np.ndarray, net) -> np.ndarray | None:
        table = feature_table(space, net.width_mult, net.n_classes) if net.family == own else None
        return None if table is None else table.predict(m)

    def predict(m: np.ndarray) -> np.ndarray:
        if not getattr(pred, "fitted", False) or not isinstance(m, np.ndarray):
            return np.asarray(pred.predict(m), dtype=np.float64)
        m = pred.as_matrix(m)  # (its own checks and conversion, as `predict` makes them)
        if not len(m):
            return np.zeros(0)
        with single_thread():
            return np.asarray(pred.predict_with_cache(m, FeatureCache(m, tabulated)), dtype=np.float64)

    return predict
