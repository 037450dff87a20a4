"""Lookup-table latency model (Once-for-All style): a subnet costs the sum of its parts.

Parts are those of the family's cost layout (the stem, each searchable block the subnet runs, the
head: `hwnas.families.parts`, gathered by `hwnas.latency.layout.PartGather`). Per-part costs are
either measured (``mode="entries"``: summing isolated parts misses the runtime's per-call overhead
and fusion across parts, so `fit` on a few whole subnets calibrates ``ms = a + b * sum``) or fitted
from whole subnets alone (``mode="nnls"``: non-negative costs, ridge-shrunk toward a
FLOPs-proportional model while rows are few).

Both modes' cost formulas and the entries table's columns: docs/pipeline.md, 'Lookup-table predictor'.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError, TableError, shown
from hwnas.families import NetworkSpec
from hwnas.families.base import OFA_RESOLUTIONS
from hwnas.latency._solvers import nnls_relative
from hwnas.latency.base import LatencyPredictor, register
from hwnas.latency.layout import ENTRY_COLUMNS, PartGather

__all__ = ["LookupTablePredictor", "check_entries"]

_SIZE_REF = 32.0
_PART_CODE = {"stem": 0, "block": 1, "head": 2}


@dataclass(frozen=True)
class _Types:
    """How an nnls table names part types: the values of `CostLayout.type_key` (part, stage, j,
    four more integers) a type keeps, and whether the stem and head are priced together by r."""

    keep: tuple[int, ...]
    lumped: bool

    @property
    def group(self) -> int:
        """Types that agree on this many leading values (through j) share the cost of an unseen one."""
        return self.keep.index(2) + 1


_TYPES = _Types((0, 1, 2, 3, 4, 5), lumped=False)
#: stage, j, k, e with stem and head priced by r: the layout of OFA-MobileNetV3's version-1 tables
_SLOT_TYPES = _Types((1, 2, 4, 5), lumped=True)


def _saved_types(state: Mapping[str, Any], type_keys: np.ndarray) -> _Types:
    """The part types a saved nnls table was fitted with: recorded (version 2), else told by the
    width of its type keys (version 1)."""
    saved = state.get("types")
    if saved is not None:
        return _Types(tuple(int(v) for v in saved["keep"]), bool(saved["lumped"]))
    width = type_keys.shape[1] if type_keys.ndim == 2 else len(_TYPES.keep)
    return _SLOT_TYPES if width == len(_SLOT_TYPES.keep) else _TYPES


def check_entries(df, ms_column: str = "ms", source: str = "entries",
                  columns: tuple[str, ...] = ENTRY_COLUMNS) -> np.ndarray:
    """Validate an entries table; returns float64 [n, 8]: part code, the five integers of
    `columns` (stage, j, in_ch, k, e), size, ms.

    Raises a one-line `TableError` naming the row and column of the first bad value."""
    import pandas as pd

    cols = list(columns) + [ms_column]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise TableError(f"{source} lacks the column(s) {', '.join(missing)}; it needs "
                         f"{', '.join(cols)}")
    parts = df["part"].astype(str).str.strip().str.lower()
    bad = ~parts.isin(list(_PART_CODE))
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise TableError(f"{source} row {i + 1}, column part: {shown(df['part'].iat[i])} is not "
                         "stem, block or head")
    values = df[cols[1:]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    for j, name in enumerate(cols[1:]):
        col = values[:, j]
        wrong = ~np.isfinite(col) | ((col <= 0) if name == ms_column else (col != np.round(col)))
        if wrong.any():
            i = int(np.argmax(wrong))
            what = "a positive latency" if name == ms_column else "an integer"
            raise TableError(f"{source} row {i + 1}, column {name}: {shown(df[name].iat[i])} is not {what}")
    return np.concatenate([parts.map(_PART_CODE).to_numpy(dtype=np.float64)[:, None], values], axis=1)


@functools.lru_cache(maxsize=32)
def _block_inputs(net: NetworkSpec) -> dict[tuple[int, int], set[int]]:
    """(stage, j) -> the input widths (entry value 3) the layout's blocks there can have."""
    layout = net.cost_layout()
    choices = [(OFA_RESOLUTIONS[-1],)] + [tuple(g.to_codes(g.choices)) for g in net.get_family().gene_groups()
                                          for _ in range(g.count)]
    out: dict[tuple[int, int], set[int]] = {}
    for p, part in enumerate(layout.parts):
        if part.kind == "block":
            for key in itertools.product(*(choices[c] for c in part.columns)):
                entry = layout.entry(p, key)
                out.setdefault((int(entry[1]), int(entry[2])), set()).add(int(entry[3]))
    return out


def _check_blocks(table: np.ndarray, net: NetworkSpec, source: str) -> None:
    """Every block entry is at a stage and position the layout has, with one of its input widths."""
    inputs = _block_inputs(net)
    for i in np.flatnonzero(table[:, 0] == _PART_CODE["block"]):
        stage, j, in_ch = (int(v) for v in table[i, 1:4])
        want = inputs.get((stage, j))
        if want is None:
            raise TableError(f"{source} row {i + 1}: {net.family} has no block at stage {stage} position {j}")
        if in_ch not in want:
            raise TableError(f"{source} row {i + 1}, column in_ch: {in_ch} but stage {stage} position {j} "
                             f"has {' or '.join(map(str, sorted(want)))} input channels at "
                             f"width_mult={net.width_mult}; the entries are for another width")


def _interp(sizes: np.ndarray, ms: np.ndarray, size: int) -> float:
    """Latency at `size` from measurements at `sizes`: exact when measured, else a + b*size^2."""
    hit = sizes == size
    if hit.any():
        return float(np.median(ms[hit]))
    s2 = sizes.astype(np.float64) ** 2
    if len(np.unique(sizes)) < 2:
        return float(np.median(ms) * size**2 / s2.mean())
    a = np.stack([np.ones_like(s2), s2], axis=1)
    (c0, c1), *_ = np.linalg.lstsq(a, ms, rcond=None)
    return float(max(c0 + c1 * size**2, 0.05 * np.min(ms)))


@register
class LookupTablePredictor(LatencyPredictor):
    """Sum of per-part costs (see the module docstring)."""

    kind = "lut"
    candidate_rank = 2

    @classmethod
    def candidates(cls, n_rows, *, auto, base, entries_lut, **kw):
        out = [entries_lut.clone()] if entries_lut is not None else []
        if not auto or n_rows >= 30:
            out += [cls("nnls", alpha, **kw) for alpha in (1.0, 10.0)]
        return out

    def __init__(self, mode: str = "nnls", alpha: float = 1.0, *, net: NetworkSpec) -> None:
        super().__init__(net=net)
        if mode not in ("nnls", "entries"):
            raise InputError(f"unknown lookup-table mode {mode!r}; use 'nnls' or 'entries'")
        self.mode, self.alpha = mode, float(alpha)
        self.types = _TYPES
        self.entries = np.zeros((0, 8))  # entries mode: validated table
        self.calib = np.array([0.0, 1.0])  # entries mode: ms = a + b * sum
        self.type_keys = np.zeros((0, len(self.types.keep)), dtype=np.int64)  # nnls mode: `types.keep`
        self.type_cost = np.zeros((0, 2))  # nnls mode: a_t, b_t
        self.fixed_cost = np.zeros(3)  # nnls mode: constant, stem+head (r/128)^2 (lumped), theta per MMAC
        self._cache: dict[tuple, float] = {}

    def get_params(self) -> dict[str, Any]:
        return {"mode": self.mode, "alpha": self.alpha}

    def _layout(self):
        return self.meta.net.cost_layout()

    def describe(self) -> str:
        return "lut(mode=entries)" if self.mode == "entries" else f"lut(mode=nnls, alpha={self.alpha})"

    def clone(self) -> LookupTablePredictor:
        """Unfitted copy; an entries table keeps its entries (only the calibration is refitted)."""
        twin = super().clone()
        twin.entries = self.entries.copy()
        return twin

    # -- entries ---------------------------------------------------------------------------
    @classmethod
    def from_entries(cls, df, *, net: NetworkSpec, ms_column: str = "ms", device: str = "",
                     source: str = "entries") -> LookupTablePredictor:
        """A fitted (uncalibrated: ms = sum of parts) predictor from a per-part entries table in
        the columns of the family's cost layout (`entry_columns`)."""
        pred = cls(mode="entries", net=net)
        table = check_entries(df, ms_column, source, tuple(pred._layout().entry_columns))
        block = table[:, 0] == _PART_CODE["block"]
        table[:, 2] = np.where(block, np.minimum(table[:, 2], 1), table[:, 2])  # any j >= 1 serves all
        _check_blocks(table, net, source)
        pred.entries = table
        pred.meta.device = device
        pred.meta.notes.entries = int(len(table))
        pred._fitted = True
        return pred

    def _entry_ms(self, entry: tuple) -> float:
        """Measured ms of one entry of the layout (at its size, or interpolated over sizes)."""
        key = tuple(entry)
        if key not in self._cache:
            t = self.entries
            same = (t[:, 1:6] == np.asarray(entry[1:6], dtype=np.float64)).all(axis=1)
            sel = (t[:, 0] == _PART_CODE[entry[0]]) & same
            if not sel.any():
                names = self._layout().entry_columns
                what = " ".join([entry[0]] + [f"{n}={v}" for n, v in zip(names[1:-1], entry[1:-1])])
                raise InputError(f"the lookup table has no entry for the {what}; measure that part "
                                 "(`hwnas profile --blocks`) or fit an nnls lookup table from subnets")
            self._cache[key] = _interp(t[sel, 6], t[sel, 7], int(entry[-1]))
        return self._cache[key]

    # -- gather ---------------------------------------------------------------------------
    def _gather(self) -> PartGather:
        """The table's gather, built once per fit/load (its tables are memoised, so a search does
        not rebuild them every generation)."""
        got = self.__dict__.get("_part_gather")
        if got is None:
            got = self._part_gather = self._make_gather()
        return got

    def _macs(self, p: int, key: tuple[int, ...]) -> float:
        """A part's MACs in millions (the FLOPs anchor of the nnls table)."""
        return float(self._layout().cost(p, key)[:4].sum()) / 1e6

    def _type(self, entry: tuple) -> tuple[int, ...]:
        key = self._layout().type_key(entry)
        return tuple(key[i] for i in self.types.keep)

    def _typed(self, p: int) -> bool:
        return not (self.types.lumped and self._layout().parts[p].kind != "block")

    def _make_gather(self) -> PartGather:
        layout = self._layout()
        if self.mode == "entries":
            return PartGather(layout, lambda p, key: np.array([self._entry_ms(layout.entry(p, key))]), 1)
        index = {tuple(int(v) for v in key): i for i, key in enumerate(self.type_keys)}
        group = self.types.group

        def part_nnls(p: int, key: tuple[int, ...]) -> np.ndarray:
            theta = self.fixed_cost[2] * self._macs(p, key)
            if not self._typed(p):
                return np.array([theta])
            entry = layout.entry(p, key)
            t = self._type(entry)
            i = index.get(t)
            if i is None:  # a type never seen in training: the mean of its part, stage and position
                same = [j for k, j in index.items() if k[:group] == t[:group]]
                cost = self.type_cost[same].mean(axis=0) if same else np.zeros(2)
            else:
                cost = self.type_cost[i]
            return np.array([cost[0] + cost[1] * (layout.entry_size(entry) / _SIZE_REF) ** 2 + theta])
        return PartGather(layout, part_nnls, 1)

    def part_sum(self, m: np.ndarray) -> np.ndarray:
        s = self._gather().total(m)[:, 0]
        if self.mode == "entries":
            return s
        if self.types.lumped:
            return s + (self.fixed_cost[0] + self.fixed_cost[1] * (m[:, 0] / _SIZE_REF / 4) ** 2)
        return s + self.fixed_cost[0]

    # -- fit / predict ----------------------------------------------------------------------
    def _fit_nnls(self, m: np.ndarray, y: np.ndarray) -> None:
        """nnls over the part types: ms = const + sum over the parts a row runs of
        (a_t + b_t * (size/32)^2 + theta * MMACs), all but the constant non-negative (lumped stem
        and head: theta * MMACs, and c * (r/128)^2 once per row)."""
        layout = self._layout()
        active = layout.active(m)
        types: set[tuple[int, ...]] = set()
        for p, part in enumerate(layout.parts):
            if self._typed(p):
                for key in np.unique(m[active[:, p]][:, part.columns], axis=0):
                    types.add(self._type(layout.entry(p, tuple(int(v) for v in key))))
        keys = sorted(types)
        index = {key: i for i, key in enumerate(keys)}
        n_t = len(keys)

        def part(p: int, key: tuple[int, ...]) -> np.ndarray:
            v = np.zeros(2 * n_t + 1)
            if self._typed(p):
                entry = layout.entry(p, key)
                i = index[self._type(entry)]
                v[i] = 1.0
                v[n_t + i] = (layout.entry_size(entry) / _SIZE_REF) ** 2
            v[-1] = self._macs(p, key)
            return v

        x = PartGather(layout, part, 2 * n_t + 1).total(m)
        size = [(m[:, :1] / _SIZE_REF / 4) ** 2] if self.types.lumped else []
        x = np.concatenate([x[:, :2 * n_t], np.ones((len(x), 1))] + size + [x[:, -1:]], axis=1)
        free = np.zeros(x.shape[1], bool)
        free[2 * n_t] = True
        penalize = np.zeros(x.shape[1], bool)
        penalize[:2 * n_t] = True
        w = nnls_relative(x, y, self.alpha, free, penalize)
        self.type_keys = np.array(keys, dtype=np.int64).reshape(-1, len(self.types.keep))
        self.type_cost = np.stack([w[:n_t], w[n_t:2 * n_t]], axis=1)
        self.fixed_cost = np.array([w[2 * n_t], w[2 * n_t + 1] if self.types.lumped else 0.0, w[-1]])

    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        self._part_gather = None
        if self.mode == "entries":
            if not len(self.entries):
                raise InputError("an entries lookup table is built with "
                                 "LookupTablePredictor.from_entries(df); fit() then calibrates it")
            s = self.part_sum(m)
            a = np.stack([np.ones_like(s), s], axis=1)
            self.calib = nnls_relative(a, y, 0.0, np.array([True, False]))
            return
        self._fit_nnls(m, y)
        self._cache.clear()
        self._part_gather = None

    def _predict(self, m: np.ndarray) -> np.ndarray:
        s = self.part_sum(m)
        if self.mode == "entries":
            s = self.calib[0] + self.calib[1] * s
        return np.maximum(s, 1e-6)

    # -- persistence ----------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self.mode == "entries":
            return {"calib": self.calib.tolist()}, {"entries": self.entries}
        types = {"keep": list(self.types.keep), "lumped": self.types.lumped}
        return ({"fixed_cost": self.fixed_cost.tolist(), "types": types},
                {"type_keys": self.type_keys, "type_cost": self.type_cost})

    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        if self.mode == "entries":
            self.calib = np.asarray(state["calib"], dtype=np.float64).reshape(2)
            self.entries = np.asarray(arrays["entries"], dtype=np.float64).reshape(-1, 8)
        else:
            self.fixed_cost = np.asarray(state["fixed_cost"], dtype=np.float64).reshape(3)
            keys = np.asarray(arrays["type_keys"], dtype=np.int64)
            self.types = _saved_types(state, keys)
            self.type_keys = keys.reshape(-1, len(self.types.keep))
            self.type_cost = np.asarray(arrays["type_cost"], dtype=np.float64).reshape(-1, 2)
            if len(self.type_keys) != len(self.type_cost):
                raise ValueError("type_keys and type_cost differ in length")
        self._cache = {}
        self._part_gather = None
