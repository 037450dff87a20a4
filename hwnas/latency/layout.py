"""A family's subnets as sums over their parts, vectorised for latency models.

Every latency model here is a sum over the parts a subnet runs (its family's `cost_layout`: the
stem, the searchable blocks its depth genes keep, the head). A part's shapes depend only on a few
flat-row columns (its key), so any per-part quantity is computed once per distinct key and summed
over many rows with one fancy index (`PartGather`): `family_cost_gather` fills it with exact costs
(MACs, bytes, layers), `hwnas.latency.lut` with measured or fitted milliseconds.
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from hwnas.errors import InputError
from hwnas.families.parts import COST_NAMES, CostLayout
from hwnas.families.spec import NetworkSpec

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COST_NAMES", "ENTRY_COLUMNS", "PartGather", "cost_kernels", "family_cost_gather",
           "family_entry_keys"]

#: the lookup-table entry columns of most families (a layout's `entry_columns`)
ENTRY_COLUMNS: tuple[str, ...] = CostLayout.entry_columns

_MAX_SPAN = 1 << 12  # widest value range a key column is ranked by a dense table (else by sorting)
_MAX_TABLES = 1024  # memoised table sets per gather (bounds the memory of odd callers)


class _Plan(NamedTuple):
    """`PartGather`'s tables for one set of values of its key columns."""

    table: np.ndarray  # each part's values at every combination of its key values (row-major), then a zero row
    failed: dict[int, Exception]  # the rows whose key `part_fn` refused -> its error
    strides: np.ndarray  # [parts, key width]: each key column's weight in its part's row
    offset: np.ndarray  # [parts]: each part's first row
    rank: np.ndarray | None  # each (column, value - its least) -> the value's rank (dense values)


class PartGather:
    """Sum a per-(part, key) quantity over the parts many rows run, vectorised.

    `part_fn(p, key) -> float[F]` is called once per key of part `p` (memoised); every row then
    reads its parts' values with one fancy index into per-part tables. The tables cover every
    combination of the values the key columns hold in a batch and are kept per such set of
    values, so a search's batches reuse a few; a key `part_fn` refuses (a lookup table without
    that entry) is an error only for the rows that run it. When the family describes its rows as
    slots (`Family.slot_layout`), which parts run follows from the depth genes (one compare per
    slot; the parts keyed by the context always run), else from `layout.active`."""

    def __init__(self, layout: CostLayout, part_fn: Callable[[int, tuple[int, ...]], np.ndarray],
                 n_features: int) -> None:
        self.layout, self.part_fn, self.n_features = layout, part_fn, int(n_features)
        parts = layout.parts
        slots = layout.family.slot_layout()
        slot_of = slots.slot_of_parts(parts) if slots is not None else None
        if slot_of is None:  # every part switched by `layout.active`
            self.switched, self.fixed, self._when = np.arange(len(parts)), np.zeros(0, np.intp), None
        else:
            self.switched = np.array([p for p, s in enumerate(slot_of) if s is not None], dtype=np.intp)
            self.fixed = np.array([p for p, s in enumerate(slot_of) if s is None], dtype=np.intp)
            # a part runs while row[depth] > after; one without a depth gene reads r (> 0) > -1
            run = [slots.slots[slot_of[p]] for p in self.switched]
            self._when = (np.array([0 if s.depth is None else s.depth for s in run], dtype=np.intp),
                          np.array([-1 if s.depth is None else s.after for s in run], dtype=np.int64))
        self.cols = np.array(sorted({c for p in parts for c in p.columns}), dtype=np.intp)
        at = {c: i for i, c in enumerate(self.cols)}
        # per part: where its key columns sit among `cols` (padded at the end: weight 0)
        width = max(len(p.columns) for p in parts)
        self._key_at = np.zeros((len(parts), width), dtype=np.intp)
        self._key_real = np.zeros((len(parts), width), dtype=bool)
        for p, part in enumerate(parts):
            self._key_at[p, :len(part.columns)] = [at[c] for c in part.columns]
            self._key_real[p, :len(part.columns)] = True
        self._memo: list[dict[tuple[int, ...], np.ndarray]] = [{} for _ in parts]
        self._plans: dict[tuple, _Plan] = {}

    # -- the gather -----------------------------------------------------------------------------
    def used(self, m: np.ndarray) -> np.ndarray:
        """bool [n, len(switched)]: which of the switched parts each row runs."""
        if self._when is None:
            return self.layout.active(m)
        depth, after = self._when
        return m.take(depth, axis=1) > after

    def gather(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values of the switched parts [n, len(switched), F], zero where a row does not run
        one; values of the parts every row runs [n, len(fixed), F])."""
        n, f = len(m), self.n_features
        if n == 0:
            return np.zeros((0, len(self.switched), f)), np.zeros((0, len(self.fixed), f))
        block = m.take(self.cols, axis=1)
        lo = block.min(axis=0)
        span = int((block.max(axis=0) - lo).max()) + 1
        if span <= _MAX_SPAN:  # the values each key column holds, as a dense [columns, span] mask
            flat = (block - lo) + np.arange(len(self.cols)) * span
            seen = np.zeros((len(self.cols), span), dtype=bool)
            seen.ravel()[flat] = True
            plan = self._plan((span, lo.tobytes(), seen.tobytes()),
                              lambda: ([lo[i] + np.flatnonzero(s) for i, s in enumerate(seen)],
                                       (np.cumsum(seen, axis=1) - 1).ravel()))
            pos = plan.rank[flat]
        else:  # huge resolutions: sort instead
            ranked = [np.unique(col, return_inverse=True) for col in block.T]
            plan = self._plan(tuple(u.tobytes() for u, _ in ranked), lambda: ([u for u, _ in ranked], None))
            pos = np.stack([inv.reshape(-1) for _, inv in ranked], axis=1)
        codes = (pos[:, self._key_at] * plan.strides).sum(axis=2)  # [n, parts]: row of each part's key
        flat_sw = np.where(self.used(m), codes[:, self.switched] + plan.offset[self.switched], len(plan.table) - 1)
        flat_fx = codes[:, self.fixed] + plan.offset[self.fixed]
        if plan.failed:
            self._raise_failed(plan.failed, np.concatenate([flat_sw, flat_fx], axis=1))
        return plan.table[flat_sw], plan.table[flat_fx]

    def total(self, m: np.ndarray, chunk: int = 20000) -> np.ndarray:
        """[n, F]: the sum over each row's parts (the switched ones, then those every row runs)."""
        out = np.empty((len(m), self.n_features))
        for lo in range(0, len(m), chunk):
            vals, fixed = self.gather(m[lo:lo + chunk])
            out[lo:lo + chunk] = vals.sum(axis=1) + fixed.sum(axis=1)
        return out

    def per_part(self, m: np.ndarray) -> np.ndarray:
        """[n, parts, F]: each part's value per row (zero where the row does not run the part)."""
        vals, fixed = self.gather(m)
        out = np.zeros((len(m), len(self.layout.parts), self.n_features))
        out[:, self.switched], out[:, self.fixed] = vals, fixed
        return out

    # -- tables ---------------------------------------------------------------------------------
    def _plan(self, key: tuple, make: Callable[[], tuple]) -> _Plan:
        """The tables for one set of key-column values, memoised by `key` (`make()`: per column,
        its sorted distinct values; and their dense ranks, or None)."""
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _MAX_TABLES:
                self._plans.clear()
            plan = self._plans[key] = self._build(*make())
        return plan

    def _build(self, values: list[np.ndarray], rank: np.ndarray | None) -> _Plan:
        sizes = np.array([len(v) for v in values], dtype=np.intp)
        dims = np.where(self._key_real, sizes[self._key_at], 1)
        weights = np.cumprod(dims[:, ::-1], axis=1)[:, ::-1]  # [:, 0]: each part's number of keys
        strides = np.where(self._key_real, np.append(weights[:, 1:], np.ones((len(dims), 1), np.intp), 1), 0)
        offset = np.concatenate([[0], np.cumsum(weights[:, 0])[:-1]]).astype(np.intp)
        blocks, failed = [], {}
        for p, part in enumerate(self.layout.parts):
            keys = itertools.product(*(values[c].tolist() for c in self._key_at[p, :len(part.columns)]))
            block = np.empty((int(weights[p, 0]), self.n_features))
            for i, key in enumerate(keys):
                try:
                    block[i] = self._value(p, key)
                except Exception as err:  # noqa: BLE001 -- an error only for the rows that run it
                    block[i], failed[int(offset[p]) + i] = np.nan, err
            blocks.append(block)
        return _Plan(np.concatenate(blocks + [np.zeros((1, self.n_features))]), failed, strides, offset, rank)

    def _value(self, p: int, key: tuple[int, ...]) -> np.ndarray:
        memo = self._memo[p]
        got = memo.get(key)
        if got is None:
            got = np.asarray(self.part_fn(p, key), dtype=np.float64).reshape(self.n_features)
            memo[key] = got
        return got

    @staticmethod
    def _raise_failed(failed: dict[int, Exception], flat: np.ndarray) -> None:
        """Raise the error of the first refused key that a row runs, if any does."""
        hit = np.isin(flat, np.fromiter(failed, dtype=np.intp, count=len(failed)))
        if hit.any():
            raise failed[int(flat[hit][0])]


@functools.lru_cache(maxsize=32)
def family_cost_gather(net: NetworkSpec) -> PartGather:
    """Exact costs per part of `net`'s networks (its layout's `cost_names`), then the block's `kernel_split`
    MACs again in the column of its kernel (`layout.kernels`; none without a split):
    [len(cost_names) + len(kernels)]. One shared instance per (family, width, classes), so its
    tables are built once per process."""
    layout = net.cost_layout()
    kernels = cost_kernels(layout)
    n_costs = len(layout.cost_names)
    split = layout.cost_names.index(layout.kernel_split) if kernels else 0

    def fn(p: int, key: tuple[int, ...]) -> np.ndarray:
        cost = np.asarray(layout.cost(p, key), dtype=np.float64)
        if len(cost) != n_costs:
            raise InputError(f"{layout.family_name}'s cost layout gave {len(cost)} costs for part {p}; "
                             f"its cost_names has {n_costs}")
        extra = np.zeros(len(kernels))
        k = layout.kernel(p, key)
        if k in kernels:
            extra[kernels.index(k)] = cost[split]
        return np.concatenate([cost, extra])

    return PartGather(layout, fn, n_costs + len(kernels))


def cost_kernels(layout: CostLayout) -> tuple[int, ...]:
    """The kernel sizes a layout's costs are split by (none when it has no `kernel_split`)."""
    return tuple(layout.kernels) if layout.kernel_split is not None else ()


def family_entry_keys(net: NetworkSpec, m: np.ndarray) -> "pd.DataFrame":
    """The distinct lookup-table entries (`layout.entry_columns`) the rows `m` of `net` run."""
    import pandas as pd

    layout = net.cost_layout()
    active = layout.active(m)
    rows: set[tuple] = set()
    for p, part in enumerate(layout.parts):
        keys = np.unique(m[active[:, p]][:, part.columns], axis=0)
        rows.update(layout.entry(p, tuple(int(v) for v in key)) for key in keys)
    order = {"stem": 0, "block": 1, "head": 2}
    return pd.DataFrame(sorted(rows, key=lambda t: (order[t[0]],) + tuple(t[1:])),
                        columns=list(layout.entry_columns))
