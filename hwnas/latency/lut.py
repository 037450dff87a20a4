"""Lookup-table latency model (Once-for-All style): a subnet costs the sum of its parts.

Parts are the fixed stem (stem conv + first block), each active searchable block and the fixed head
(`hwnas.latency.layout`). Two ways to get the per-part costs:

- ``mode="entries"``: measured per-part latencies (`LookupTablePredictor.from_entries`), the table
  a per-block profile produces. Summing isolated parts misses the runtime's per-call overhead and
  fusion across parts, so `fit` on a few whole subnets then calibrates ``ms = a + b * sum``.
- ``mode="nnls"``: no per-part measurements, only whole subnets (a flat table). A block of type t
  (stage, first-or-later position, kernel, expand) at input feature size ``size`` costs
  ``theta * MACs + a_t + b_t * (size / 32)^2``, the stem and head ``theta * MACs + c * (r/128)^2``,
  plus a free constant. All terms but the constant are non-negative; (a_t, b_t) carry a ridge
  penalty `alpha`, so with few rows the table shrinks toward a FLOPs-proportional model instead of
  toward zero, and with many rows each block type gets its own cost.

Entries table (a DataFrame; `ENTRY_COLUMNS` + a latency column, default ``ms``):

    part   "stem" | "block" | "head"
    stage  0..4 for blocks (-1 stem, 5 head)
    j      position in the stage; later positions (j >= 1) share shapes, so any j >= 1 serves all
    in_ch  the block's input channels (checks the entries' width multiplier)
    k, e   kernel and expand ratio (0 for stem/head)
    size   input feature size: the image resolution for the stem, the head's input size for the head
    ms     measured latency in milliseconds

Sizes that were not measured are interpolated per part type as ``ms = a + b * size^2``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError, TableError
from hwnas.latency._solvers import nnls_relative
from hwnas.latency.base import LatencyPredictor, register
from hwnas.latency.layout import (ENTRY_COLUMNS, MBV3, PartGather, SlotGather, block_cost, family_layout,
                                  fixed_cost, slot_sizes, slot_specs)

__all__ = ["LookupTablePredictor", "check_entries"]

_SIZE_REF = 32.0
_PART_CODE = {"stem": 0, "block": 1, "head": 2}


def check_entries(df, ms_column: str = "ms", source: str = "entries",
                  columns: tuple[str, ...] = ENTRY_COLUMNS) -> np.ndarray:
    """Validate an entries table; returns float64 [n, 8]: part code, stage, j, in_ch, k, e, size, ms
    (another family's `columns`: part code, its five integers, size, ms).

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
        raise TableError(f"{source} row {i + 1}, column part: {df['part'].iat[i]!r} is not "
                         "stem, block or head")
    values = df[cols[1:]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    for j, name in enumerate(cols[1:]):
        col = values[:, j]
        wrong = ~np.isfinite(col) | ((col <= 0) if name == ms_column else (col != np.round(col)))
        if wrong.any():
            i = int(np.argmax(wrong))
            what = "a positive latency" if name == ms_column else "an integer"
            raise TableError(f"{source} row {i + 1}, column {name}: {df[name].iat[i]!r} is not {what}")
    return np.concatenate([parts.map(_PART_CODE).to_numpy(dtype=np.float64)[:, None], values], axis=1)


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

    def __init__(self, mode: str = "nnls", alpha: float = 1.0, *, width_mult: float = 1.0,
                 n_classes: int = 1000, family: str = MBV3) -> None:
        super().__init__(width_mult=width_mult, n_classes=n_classes, family=family)
        if mode not in ("nnls", "entries"):
            raise InputError(f"unknown lookup-table mode {mode!r}; use 'nnls' or 'entries'")
        self.mode, self.alpha = mode, float(alpha)
        self.entries = np.zeros((0, 8))  # entries mode: validated table
        self.calib = np.array([0.0, 1.0])  # entries mode: ms = a + b * sum
        # nnls mode: stage, pos, k, e (other families: the layout's `type_key`, 6 integers)
        self.type_keys = np.zeros((0, self._type_width()), dtype=np.int64)
        self.type_cost = np.zeros((0, 2))  # nnls mode: a_t, b_t
        self.fixed_cost = np.zeros(3)  # nnls mode: constant, stem/head (r/128)^2, theta per MMAC
        self._cache: dict[tuple, float] = {}

    def get_params(self) -> dict[str, Any]:
        return {"mode": self.mode, "alpha": self.alpha}

    def _type_width(self) -> int:
        return 4 if self.meta.family == MBV3 else 6

    def _layout(self):
        return family_layout(self.meta.family, self.meta.width_mult, self.meta.n_classes)

    def describe(self) -> str:
        return "lut(mode=entries)" if self.mode == "entries" else f"lut(mode=nnls, alpha={self.alpha})"

    def clone(self) -> LookupTablePredictor:
        """Unfitted copy; an entries table keeps its entries (only the calibration is refitted)."""
        twin = super().clone()
        twin.entries = self.entries.copy()
        return twin

    # -- entries ---------------------------------------------------------------------------
    @classmethod
    def from_entries(cls, df, *, width_mult: float = 1.0, n_classes: int = 1000, ms_column: str = "ms",
                     device: str = "", source: str = "entries", family: str = MBV3) -> LookupTablePredictor:
        """A fitted (uncalibrated: ms = sum of parts) predictor from a per-part entries table
        (another family's: the columns of its cost layout's `entry_columns`)."""
        if family != MBV3:
            pred = cls(mode="entries", width_mult=width_mult, n_classes=n_classes, family=family)
            pred.entries = check_entries(df, ms_column, source, tuple(pred._layout().entry_columns))
            pred.meta.device = device
            pred.meta.notes["entries"] = int(len(pred.entries))
            pred._fitted = True
            return pred
        table = check_entries(df, ms_column, source)
        pred = cls(mode="entries", width_mult=width_mult, n_classes=n_classes)
        specs = slot_specs(width_mult)
        for i, row in enumerate(table):
            if row[0] == _PART_CODE["block"]:
                stage, j = int(row[1]), int(row[2])
                if not 0 <= stage < 5 or not 0 <= j < 4:
                    raise TableError(f"{source} row {i + 1}: a block needs stage 0..4 and j 0..3")
                want = specs[4 * stage + j].in_channels
                if int(row[3]) != want:
                    raise TableError(f"{source} row {i + 1}, column in_ch: {int(row[3])} but stage "
                                     f"{stage} position {j} has {want} input channels at "
                                     f"width_mult={width_mult}; the entries are for another width")
        table[:, 2] = np.where(table[:, 0] == _PART_CODE["block"], np.minimum(table[:, 2], 1), 0)
        pred.entries = table
        pred.meta.device = device
        pred.meta.notes["entries"] = int(len(table))
        pred._fitted = True
        return pred

    def _entry_ms(self, part: str, size: int, stage: int = 0, pos: int = 0, k: int = 0, e: int = 0
                  ) -> float:
        key = (part, size, stage, pos, k, e)
        if key not in self._cache:
            t = self.entries
            sel = t[:, 0] == _PART_CODE[part]
            if part == "block":
                sel &= (t[:, 1] == stage) & (t[:, 2] == pos) & (t[:, 4] == k) & (t[:, 5] == e)
            if not sel.any():
                what = part if part != "block" else f"block stage {stage} j={pos} k={k} e={e}"
                raise InputError(f"the lookup table has no entry for the {what}; measure that part "
                                 "(a per-block profile) or fit an nnls lookup table from subnets")
            self._cache[key] = _interp(t[sel, 6], t[sel, 7], size)
        return self._cache[key]

    # -- gather ---------------------------------------------------------------------------
    def _gather(self) -> SlotGather:
        """The table's gather, built once per fit/load (its per-resolution blocks are memoised,
        so a search does not rebuild them every generation)."""
        got = self.__dict__.get("_slot_gather")
        if got is None:
            got = self._slot_gather = self._make_gather()
        return got

    def _make_gather(self) -> SlotGather | PartGather:
        if self.meta.family != MBV3:
            return self._make_part_gather()
        specs = slot_specs(self.meta.width_mult)
        if self.mode == "entries":
            def block(r: int, slot: int, k: int, e: int) -> np.ndarray:
                spec = specs[slot]
                return np.array([self._entry_ms("block", slot_sizes(r)[0][slot], spec.stage,
                                                min(spec.index, 1), k, e)])

            def fixed(r: int) -> np.ndarray:
                return np.array([self._entry_ms("stem", r) + self._entry_ms("head", slot_sizes(r)[2])])
            return SlotGather(block, fixed, 1)
        index = {tuple(int(v) for v in key): i for i, key in enumerate(self.type_keys)}

        def block_nnls(r: int, slot: int, k: int, e: int) -> np.ndarray:
            spec = specs[slot]
            i = index.get((spec.stage, min(spec.index, 1), k, e))
            if i is None:  # a type never seen in training: the mean of its stage and position
                same = [j for key, j in index.items() if key[:2] == (spec.stage, min(spec.index, 1))]
                cost = self.type_cost[same].mean(axis=0) if same else np.zeros(2)
            else:
                cost = self.type_cost[i]
            return np.array([cost[0] + cost[1] * (slot_sizes(r)[0][slot] / _SIZE_REF) ** 2
                             + self.fixed_cost[2] * self._macs(r, slot, k, e)])

        def fixed_nnls(r: int) -> np.ndarray:
            return np.array([self.fixed_cost[0] + self.fixed_cost[1] * (r / _SIZE_REF / 4) ** 2
                             + self.fixed_cost[2] * self._macs_fixed(r)])
        return SlotGather(block_nnls, fixed_nnls, 1)

    def _macs(self, r: int, slot: int, k: int, e: int) -> float:
        """Block MACs in millions (the FLOPs anchor of the nnls table)."""
        c = block_cost(self.meta.width_mult, slot, k, e, r)
        return float(c[0] + c[1] + c[2]) / 1e6

    def _macs_fixed(self, r: int) -> float:
        return float(fixed_cost(self.meta.width_mult, self.meta.n_classes, r)[3]) / 1e6

    def part_sum(self, m: np.ndarray) -> np.ndarray:
        if self.meta.family != MBV3 and self.mode == "nnls":
            return self._gather().total(m)[:, 0] + self.fixed_cost[0]
        return self._gather().total(m)[:, 0]

    # -- any other family: its cost layout's parts ------------------------------------------
    def _family_entry_ms(self, entry: tuple) -> float:
        """Measured ms of one entry of the layout (exact size or interpolated over sizes)."""
        key = ("family",) + tuple(entry)
        if key not in self._cache:
            t = self.entries
            code = _PART_CODE[entry[0]]
            sel = (t[:, 0] == code) & (t[:, 1:6] == np.asarray(entry[1:6], dtype=np.float64)).all(axis=1)
            if not sel.any():
                names = self._layout().entry_columns
                what = ", ".join(f"{n}={v}" for n, v in zip(names, entry[:-1]))
                raise InputError(f"the lookup table has no entry for {what}; measure that part "
                                 "(`hwnas profile --blocks`) or fit an nnls lookup table from subnets")
            self._cache[key] = _interp(t[sel, 6], t[sel, 7], int(entry[-1]))
        return self._cache[key]

    def _family_macs(self, p: int, key: tuple[int, ...]) -> float:
        return float(self._layout().cost(p, key)[:4].sum()) / 1e6

    def _make_part_gather(self) -> PartGather:
        layout = self._layout()
        if self.mode == "entries":
            return PartGather(layout, lambda p, key: np.array([self._family_entry_ms(layout.entry(p, key))]), 1)
        index = {tuple(int(v) for v in key): i for i, key in enumerate(self.type_keys)}

        def part_nnls(p: int, key: tuple[int, ...]) -> np.ndarray:
            entry = layout.entry(p, key)
            t = layout.type_key(entry)
            i = index.get(t)
            if i is None:  # a type never seen in training: the mean of its part, stage and position
                same = [j for k, j in index.items() if k[:3] == t[:3]]
                cost = self.type_cost[same].mean(axis=0) if same else np.zeros(2)
            else:
                cost = self.type_cost[i]
            return np.array([cost[0] + cost[1] * (layout.entry_size(entry) / _SIZE_REF) ** 2
                             + self.fixed_cost[2] * self._family_macs(p, key)])
        return PartGather(layout, part_nnls, 1)

    def _fit_family_nnls(self, m: np.ndarray, y: np.ndarray) -> None:
        """nnls over the layout's part types: ms = const + sum over active parts of
        (a_t + b_t * (size/32)^2 + theta * MMACs), all but the constant non-negative."""
        layout = self._layout()
        active = layout.active(m)
        types: set[tuple[int, ...]] = set()
        for p, part in enumerate(layout.parts):
            for key in np.unique(m[active[:, p]][:, part.columns], axis=0):
                types.add(layout.type_key(layout.entry(p, tuple(int(v) for v in key))))
        keys = sorted(types)
        index = {key: i for i, key in enumerate(keys)}
        n_t = len(keys)

        def part(p: int, key: tuple[int, ...]) -> np.ndarray:
            entry = layout.entry(p, key)
            v = np.zeros(2 * n_t + 1)
            i = index[layout.type_key(entry)]
            v[i] = 1.0
            v[n_t + i] = (layout.entry_size(entry) / _SIZE_REF) ** 2
            v[-1] = self._family_macs(p, key)
            return v

        x = PartGather(layout, part, 2 * n_t + 1).total(m)
        x = np.concatenate([x[:, :2 * n_t], np.ones((len(x), 1)), x[:, -1:]], axis=1)
        free = np.zeros(x.shape[1], bool)
        free[2 * n_t] = True
        penalize = np.zeros(x.shape[1], bool)
        penalize[:2 * n_t] = True
        w = nnls_relative(x, y, self.alpha, free, penalize)
        self.type_keys = np.array(keys, dtype=np.int64).reshape(-1, self._type_width())
        self.type_cost = np.stack([w[:n_t], w[n_t:2 * n_t]], axis=1)
        self.fixed_cost = np.array([w[2 * n_t], 0.0, w[2 * n_t + 1]])

    # -- fit / predict ----------------------------------------------------------------------
    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        self._slot_gather = None
        if self.mode == "entries":
            if not len(self.entries):
                raise InputError("an entries lookup table is built with "
                                 "LookupTablePredictor.from_entries(df); fit() then calibrates it")
            s = self.part_sum(m)
            a = np.stack([np.ones_like(s), s], axis=1)
            self.calib = nnls_relative(a, y, 0.0, np.array([True, False]))
            return
        if self.meta.family != MBV3:
            self._fit_family_nnls(m, y)
            self._cache.clear()
            self._slot_gather = None
            return
        specs = slot_specs(self.meta.width_mult)
        used_k = np.unique(m[:, 1:21])
        used_e = np.unique(m[:, 21:41])
        keys = [(s, p, int(k), int(e)) for s in range(5) for p in (0, 1) for k in used_k for e in used_e]
        index = {key: i for i, key in enumerate(keys)}
        n_t = len(keys)

        def block(r: int, slot: int, k: int, e: int) -> np.ndarray:
            spec = specs[slot]
            v = np.zeros(2 * n_t + 3)
            i = index[(spec.stage, min(spec.index, 1), k, e)]
            v[i] = 1.0
            v[n_t + i] = (slot_sizes(r)[0][slot] / _SIZE_REF) ** 2
            v[-1] = self._macs(r, slot, k, e)
            return v

        def fixed(r: int) -> np.ndarray:
            v = np.zeros(2 * n_t + 3)
            v[2 * n_t:] = (1.0, (r / _SIZE_REF / 4) ** 2, self._macs_fixed(r))
            return v

        x = SlotGather(block, fixed, 2 * n_t + 3).total(m)
        free = np.zeros(x.shape[1], bool)
        free[2 * n_t] = True
        penalize = np.zeros(x.shape[1], bool)
        penalize[:2 * n_t] = True
        w = nnls_relative(x, y, self.alpha, free, penalize)
        present = (x[:, :n_t] > 0).any(axis=0)
        self.type_keys = np.array(keys, dtype=np.int64)[present]
        self.type_cost = np.stack([w[:n_t], w[n_t:2 * n_t]], axis=1)[present]
        self.fixed_cost = w[2 * n_t:]
        self._cache.clear()
        self._slot_gather = None

    def _predict(self, m: np.ndarray) -> np.ndarray:
        s = self.part_sum(m)
        if self.mode == "entries":
            s = self.calib[0] + self.calib[1] * s
        return np.maximum(s, 1e-6)

    # -- persistence ----------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self.mode == "entries":
            return {"calib": self.calib.tolist()}, {"entries": self.entries}
        return ({"fixed_cost": self.fixed_cost.tolist()},
                {"type_keys": self.type_keys, "type_cost": self.type_cost})

    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        if self.mode == "entries":
            self.calib = np.asarray(state["calib"], dtype=np.float64).reshape(2)
            self.entries = np.asarray(arrays["entries"], dtype=np.float64).reshape(-1, 8)
        else:
            self.fixed_cost = np.asarray(state["fixed_cost"], dtype=np.float64).reshape(3)
            self.type_keys = np.asarray(arrays["type_keys"], dtype=np.int64).reshape(-1, self._type_width())
            self.type_cost = np.asarray(arrays["type_cost"], dtype=np.float64).reshape(-1, 2)
            if len(self.type_keys) != len(self.type_cost):
                raise ValueError("type_keys and type_cost differ in length")
        self._cache = {}
        self._slot_gather = None
