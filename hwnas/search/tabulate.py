"""Turn an additive per-block cost model into a dense table, checked exact, for fast search.

Lookup-table latency predictors, linear analytic ones, MACs and parameter counts all have the form
``cost = F(r) + sum over used slots of B(r, slot, k, e)`` (a block's shapes depend only on its slot,
kernel, expand and the input resolution). Such a model is fully known from a few thousand probe
archs, one batched call; afterwards a search scores a generation with one fancy-index gather
instead of calling the model (which may rebuild its tables per call).

`tabulate` never guesses: it checks the table against the model on random archs and returns None
(use the model directly) when the model is not additive, e.g. a log-space or tree model.

Models that are not additive but start from additive counts (analytic log, hybrid, MLP and
transfer latency predictors all start from the analytic features of `hwnas.latency.analytic`) get
the next best thing, `vectorised_latency`: those features come from an exact `VectorTable` (bit
for bit, they are integer counts) and only the model's own few vector ops run per batch.

All of this is OFA-MobileNetV3's layout (20 slots of kernel x expand, 5 stage depths): for the
other families (`hwnas.families`) `tabulate` and `tabulate_vector` return None, and a search calls
their models on whole int matrices instead (the generic vectorised path of `hwnas.search.problem`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwnas.search.operators import D, E, KS, sample_mixed, used_mask
from hwnas.space import MAX_DEPTH, N_SLOTS, N_STAGES, SearchSpace

__all__ = ["AdditiveTable", "tabulate", "VectorTable", "tabulate_vector", "feature_table", "vectorised_latency",
           "tabulable"]

CostFn = Callable[[np.ndarray], np.ndarray]


def tabulable(space) -> bool:
    """True when the tables here apply to `space`: OFA-MobileNetV3's `SearchSpace`."""
    return isinstance(space, SearchSpace)


def _init_index(table) -> None:
    """Choice -> position lookups of a table over `table.space` (shared by both table kinds)."""
    table._r_index = _index(table.space.r_choices)
    table._k_index = _index(table.space.ks_choices)
    table._e_index = _index(table.space.e_choices)
    table._d0 = min(table.space.d_choices)  # shallower stages drop blocks `fixed` counts


def _slot_indices(table, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(resolution index, flat block index per slot, used slots, rows the table cannot express)."""
    ri = _lookup(table._r_index, m[:, 0])
    ki = _lookup(table._k_index, m[:, KS])
    ei = _lookup(table._e_index, m[:, E])
    used = used_mask(m)
    bad = (ri < 0) | (((ki < 0) | (ei < 0)) & used).any(axis=1) | (m[:, D] < table._d0).any(axis=1)
    n_slots, nk, ne = table.block.shape[1:4]
    flat = ((np.maximum(ri, 0)[:, None] * n_slots + np.arange(n_slots)) * nk
            + np.maximum(ki, 0)) * ne + np.maximum(ei, 0)
    return ri, flat, used, bad


@dataclass
class AdditiveTable:
    """``fixed[r_idx] + sum(block[r_idx, slot, k_idx, e_idx] over used slots)``.

    Rows the table cannot express (r, k or e not among the space's choices, a stage shallower than
    the smallest depth choice) go to `fallback`, the tabulated model: never silently wrong."""

    space: SearchSpace
    fixed: np.ndarray  # [n_r]
    block: np.ndarray  # [n_r, 20, n_k, n_e]
    fallback: CostFn

    def __post_init__(self) -> None:
        _init_index(self)

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        ri, flat, used, bad = _slot_indices(self, m)
        vals = np.take(self.block, flat)
        out = np.take(self.fixed, np.maximum(ri, 0)) + (vals * used).sum(axis=1)
        if bad.any():
            out[bad] = np.asarray(self.fallback(m[bad]), dtype=np.float64)
        return out


def _index(choices: tuple[int, ...]) -> np.ndarray:
    """Value -> choice position, -1 for anything else. Position 0 and the last one are sentinels
    (choices are positive), so `np.take(..., mode="clip")` maps every out-of-range value to -1."""
    idx = np.full(max(choices) + 2, -1, dtype=np.int64)
    idx[np.asarray(choices)] = np.arange(len(choices))
    return idx


def _lookup(index: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.take(index, values, mode="clip")


def _probes(space: SearchSpace) -> np.ndarray:
    """Probe rows, for every resolution (in this order): the base arch (minimum depth, first kernel
    and expand everywhere); each slot at each (k, e) -- an optional slot is brought into use by
    deepening its stage to hold it, earlier optional slots at the base choices; and, per slot, the
    arch it is compared with (the base, or its stage one block shallower)."""
    d0 = min(space.d_choices)
    base = np.zeros(1 + 2 * N_SLOTS + N_STAGES, dtype=np.int32)
    base[KS], base[E], base[D] = space.ks_choices[0], space.e_choices[0], d0
    blocks, refs = [], []
    for slot in range(N_SLOTS):
        stage, j = divmod(slot, MAX_DEPTH)
        ref = base.copy()
        if j > d0:
            ref[D.start + stage] = j
        refs.append(ref)
        for k in space.ks_choices:
            for e in space.e_choices:
                row = base.copy()
                if j >= d0:
                    row[D.start + stage] = j + 1
                row[KS.start + slot], row[E.start + slot] = k, e
                blocks.append(row)
    per_r = np.concatenate([base[None], np.stack(blocks), np.stack(refs)])
    out = np.tile(per_r, (len(space.r_choices), 1))
    out[:, 0] = np.repeat(np.asarray(space.r_choices, dtype=np.int32), len(per_r))
    return out


def tabulate(fn: CostFn, space: SearchSpace, *, n_check: int = 512, rtol: float = 1e-6,
             seed: int = 0) -> AdditiveTable | None:
    """An exact `AdditiveTable` of `fn` (cost of each row of an [n, 46] matrix) over `space`,
    or None when `fn` is not additive per block (or `space` is another family's)."""
    if not tabulable(space):
        return None
    nk, ne = len(space.ks_choices), len(space.e_choices)
    n_block = N_SLOTS * nk * ne
    y = np.asarray(fn(_probes(space)), dtype=np.float64).reshape(len(space.r_choices), -1)
    base = y[:, 0]
    block = y[:, 1:1 + n_block].reshape(-1, N_SLOTS, nk, ne)
    ref = y[:, 1 + n_block:]  # [n_r, 20]
    # an always-used slot's entry is its change from the base (whose blocks sit in `fixed`); an
    # optional slot's entry is what adding it costs
    table = AdditiveTable(space, base.copy(), block - ref[:, :, None, None], fn)
    check = sample_mixed(space, n_check, np.random.default_rng(seed))
    want = np.asarray(fn(check), dtype=np.float64)
    got = table.predict(check)
    if not np.allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max(initial=0)))):
        return None
    return table


# -- vector-valued tables: the exact analytic features of hwnas latency models ------------------
@dataclass
class VectorTable:
    """`AdditiveTable` of a vector-valued model: ``fixed[r_idx] + sum(block[r_idx, slot, k, e])``
    over used slots, float64 [n, F]; rows it cannot express go to `fallback`."""

    space: SearchSpace
    fixed: np.ndarray  # [n_r, F]
    block: np.ndarray  # [n_r, 20, n_k, n_e, F]
    fallback: CostFn

    def __post_init__(self) -> None:
        _init_index(self)
        width = self.block.shape[-1]
        # the blocks as rows, plus a zero row that unused slots point at
        self._flat = np.concatenate([self.block.reshape(-1, width), np.zeros((1, width))])
        self._ones = np.ones((1, N_SLOTS))

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        ri, flat, used, bad = _slot_indices(self, m)
        vals = np.take(self._flat, np.where(used, flat, len(self._flat) - 1), axis=0)  # [n, 20, F]
        # sum over slots as a batched matmul: several times faster than a strided sum
        out = self.fixed[np.maximum(ri, 0)] + np.matmul(self._ones, vals)[:, 0]
        if bad.any():
            out[bad] = np.asarray(self.fallback(m[bad]), dtype=np.float64)
        return out


def tabulate_vector(fn: CostFn, space: SearchSpace, *, n_check: int = 512, seed: int = 0
                    ) -> VectorTable | None:
    """An exact `VectorTable` of `fn` ([n, 46] rows -> float [n, F]), or None unless it reproduces
    `fn` bit for bit on random archs (so a model fed from it predicts exactly as before: true of
    integer-valued counts such as the analytic features, whose sums are exact in float64)."""
    if not tabulable(space):
        return None
    nk, ne = len(space.ks_choices), len(space.e_choices)
    n_block = N_SLOTS * nk * ne
    y = np.asarray(fn(_probes(space)), dtype=np.float64)
    if y.ndim != 2:
        return None
    y = y.reshape(len(space.r_choices), -1, y.shape[1])
    ref = y[:, 1 + n_block:]  # [n_r, 20, F]
    block = y[:, 1:1 + n_block].reshape(len(space.r_choices), N_SLOTS, nk, ne, -1) - ref[:, :, None, None, :]
    table = VectorTable(space, y[:, 0].copy(), block, fn)
    check = sample_mixed(space, n_check, np.random.default_rng(seed))
    if not np.array_equal(table.predict(check), np.asarray(fn(check), dtype=np.float64)):
        return None
    return table


@functools.lru_cache(maxsize=16)
def feature_table(space: SearchSpace, width_mult: float, n_classes: int) -> VectorTable | None:
    """The exact table of `hwnas.latency.analytic.all_features` over `space` (None if not exact)."""
    from hwnas.latency.analytic import all_features

    return tabulate_vector(lambda m: all_features(np.asarray(m, dtype=np.int64), width_mult, n_classes),
                           space)


def vectorised_latency(pred, space: SearchSpace) -> CostFn:
    """`pred.predict` of an hwnas `LatencyPredictor`, for search: the analytic features every
    feature-based kind (analytic, hybrid, mlp, transfer) starts from are gathered from exact
    per-space tables (`feature_table`) instead of being counted per call; the rest of the model
    (log, ridge, MLP, exp) runs as before on the whole batch, so predictions are identical."""
    from hwnas.latency.analytic import FeatureCache, all_features
    from hwnas.latency.base import single_thread
    from hwnas.latency.layout import as_matrix

    class _TableCache(FeatureCache):
        def get(self, width_mult: float, n_classes: int) -> np.ndarray:
            key = (float(width_mult), int(n_classes))
            if key not in self._done:
                table = feature_table(space, *key)
                self._done[key] = (table.predict(self.m) if table is not None
                                   else all_features(self.m, *key))
            return self._done[key]

    def predict(m: np.ndarray) -> np.ndarray:
        if not getattr(pred, "_fitted", False) or not isinstance(m, np.ndarray):
            return np.asarray(pred.predict(m), dtype=np.float64)
        m = as_matrix(m)
        if not len(m):
            return np.zeros(0)
        with single_thread():
            return np.asarray(pred._predict_cached(m, _TableCache(m)), dtype=np.float64)

    return predict


# -- one gather for a whole problem --------------------------------------------------------------
class SlotIndex:
    """Where each row of a batch reads every `FusedTable` over the same space: the resolution
    position per row and the flat (resolution, slot, kernel, expand) row per slot, unused slots
    pointing at a zero row. Derived once per batch and shared by every cost column and the
    accuracy features; `take(rows)` keeps the rows it names."""

    __slots__ = ("ri", "flat")

    def __init__(self, ri: np.ndarray, flat: np.ndarray) -> None:
        self.ri, self.flat = ri, flat

    def take(self, rows: np.ndarray) -> SlotIndex:
        return SlotIndex(self.ri[rows], self.flat[rows])

    def __len__(self) -> int:
        return len(self.ri)


class SlotIndexer:
    """`SlotIndex` of [n, 46] rows over `space` (None for a batch with a row the tables cannot
    express: a value outside the space's choices, or a stage shallower than its smallest depth)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        ks, es, rs = space.ks_choices, space.e_choices, space.r_choices
        nk, ne = len(ks), len(es)
        self.n_rows = len(rs) * N_SLOTS * nk * ne  # the zero row's position
        self._r_off = np.full(max(rs) + 2, -1, dtype=np.int64)
        self._r_off[np.asarray(rs)] = np.arange(len(rs)) * N_SLOTS * nk * ne
        self._r_pos = _index(rs)
        # (kernel, expand) value pair -> its offset inside a slot's block, -1 if not a choice
        self._ke = np.full((max(ks) + 2, max(es) + 2), -1, dtype=np.int64)
        for i, k in enumerate(ks):
            for j, e in enumerate(es):
                self._ke[k, e] = i * ne + j
        self._slot_off = np.arange(N_SLOTS, dtype=np.int64) * nk * ne
        self._d0 = min(space.d_choices)
        self._used = np.array([[j < d for j in range(MAX_DEPTH)] for d in range(MAX_DEPTH + 1)])
        self._hi = min(len(self._r_off), self._ke.shape[0], self._ke.shape[1])
        # (so every k, e, d value below `_hi` indexes `_ke` and `_used`: extend them with -1s)
        size = max(len(self._r_off), self._ke.shape[0], self._ke.shape[1], MAX_DEPTH + 1)
        ke = np.full((size, size), -1, dtype=np.int64)
        ke[:self._ke.shape[0], :self._ke.shape[1]] = self._ke
        self._ke = ke
        self._hi = size

    def __call__(self, m: np.ndarray, trusted: bool = False) -> SlotIndex | None:
        """`trusted`: rows a search bred from the space's own choices (the checks are skipped)."""
        n = len(m)
        if trusted:
            r = m[:, 0]
            used = self._used[m[:, D]].reshape(n, N_SLOTS)
            flat = np.where(used, self._ke[m[:, KS], m[:, E]] + self._slot_off + self._r_off[r][:, None],
                            self.n_rows)
            return SlotIndex(self._r_pos[r], flat)
        lo, hi = m.min(initial=0), m.max(initial=0)
        if lo < 0 or hi >= self._hi:  # (values index the lookups below)
            return None
        d = m[:, D]
        if d.min(initial=MAX_DEPTH) < self._d0 or d.max(initial=0) > MAX_DEPTH:
            return None
        r = m[:, 0]
        r_off = self._r_off.take(r, mode="clip")
        used = self._used[d].reshape(n, N_SLOTS)
        ke = self._ke[m[:, KS], m[:, E]]
        if r_off.min(initial=0) < 0 or ke[used].min(initial=0) < 0:
            return None
        flat = np.where(used, ke + self._slot_off + r_off[:, None], self.n_rows)
        return SlotIndex(self._r_pos.take(r, mode="clip"), flat)


class FusedTable:
    """Several `VectorTable`s over one space side by side, as one [rows + 1, W] matrix: a batch
    reads all their columns with one gather and one sum (`gather`)."""

    def __init__(self, space: SearchSpace, parts: list[VectorTable]) -> None:
        self.space = space
        self.widths = [p.block.shape[-1] for p in parts]
        width = sum(self.widths)
        block = np.concatenate([p.block for p in parts], axis=-1) if parts else np.zeros(
            (len(space.r_choices), N_SLOTS, len(space.ks_choices), len(space.e_choices), 0))
        self.fixed = (np.concatenate([p.fixed for p in parts], axis=-1) if parts
                      else np.zeros((len(space.r_choices), 0)))
        self.flat = np.concatenate([block.reshape(-1, width), np.zeros((1, width))])
        self._ones = np.ones((1, N_SLOTS))

    @property
    def width(self) -> int:
        return self.flat.shape[1]

    def gather(self, idx: SlotIndex) -> np.ndarray:
        """float64 [n, W]: every column of every part for the rows of `idx`."""
        vals = self.flat.take(idx.flat, axis=0)  # [n, 20, W] (`take`: ~3x faster than [] here)
        return self.fixed.take(idx.ri, axis=0) + np.matmul(self._ones, vals)[:, 0]


def as_vector_table(table: AdditiveTable) -> VectorTable:
    """A scalar `AdditiveTable` as a one-column `VectorTable`."""
    return VectorTable(table.space, table.fixed[:, None], table.block[..., None],
                       lambda m: np.asarray(table.fallback(m), dtype=np.float64)[:, None])


class _Columns:
    """The columns a `FastLatency` owns in a fused gather: analytic features, tabulated
    sub-predictors and linear projections of encodings, by key."""

    def __init__(self, s: np.ndarray, m: np.ndarray, spans: dict) -> None:
        self.s, self.m, self.spans = s, m, spans

    def col(self, key) -> np.ndarray | None:
        span = self.spans.get(key)
        return None if span is None else self.s[:, span]


class FastLatency:
    """A feature-based hwnas latency model split into what is additive -- its analytic features,
    any sub-predictor that tabulates exactly (a linear analytic or lookup-table base), the
    encoding's share of a linear residual -- gathered in a problem's `FusedTable`, and the few
    vector ops left (`post`), run on the whole batch. Same predictions as `pred.predict` (up to
    float rounding of the re-associated sums, ~1e-15 relative)."""

    def __init__(self, pred, space: SearchSpace) -> None:
        from hwnas.latency.analytic import ALL_FEATURES

        self.pred, self.space = pred, space
        self.parts: list[VectorTable] = []
        self.keys: list = []
        key = (float(pred.meta.width_mult), int(pred.meta.n_classes))
        feats = feature_table(space, *key)
        if feats is None:
            raise ValueError("analytic features are not tabulable over this space")
        self._add(("features",) + key, feats)
        self._walk(pred)
        assert len(ALL_FEATURES) == feats.block.shape[-1]
        self._spans, at = {}, 0  # each part's columns in `post`'s `s`
        for key, part in zip(self.keys, self.parts):
            w = part.block.shape[-1]
            self._spans[key] = slice(at, at + w) if w > 1 else at
            at += w

    def _add(self, key, table: VectorTable) -> None:
        self.keys.append(key)
        self.parts.append(table)

    def _walk(self, pred) -> None:
        from hwnas.latency.base import LatencyPredictor

        base = getattr(pred, "base", None)
        if isinstance(base, LatencyPredictor):
            if getattr(base, "kind", "") in ("lut", "analytic"):
                t = tabulate(base.predict, self.space)
                if t is not None:
                    self._add(("pred", id(base)), as_vector_table(t))
                else:
                    self._walk(base)
            else:
                self._walk(base)
        inputs = getattr(pred, "inputs", None)
        if getattr(pred, "residual", None) == "ridge" and inputs is not None and hasattr(inputs, "encoder_dot_fn"):
            t = tabulate(inputs.encoder_dot_fn(pred.coef), self.space)
            if t is not None:
                self._add(("encdot", id(inputs)), as_vector_table(t))

    def post(self, s: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Milliseconds from this model's columns `s` (in `parts` order) of rows `m`."""
        return np.asarray(self.pred._predict_cached(m, _GatheredCache(m, _Columns(s, m, self._spans))),
                          dtype=np.float64)


def _gathered_cache_class():
    from hwnas.latency.analytic import FeatureCache

    class GatheredCache(FeatureCache):
        """A `FeatureCache` answered from a fused gather: analytic features, tabulated
        sub-predictors (`tabulated`) and encoding projections (`encoder_dot`)."""

        def __init__(self, m: np.ndarray, cols: _Columns) -> None:
            super().__init__(m)
            self.cols = cols

        def get(self, width_mult: float, n_classes: int) -> np.ndarray:
            got = self.cols.col(("features", float(width_mult), int(n_classes)))
            return got if got is not None else super().get(width_mult, n_classes)

        def tabulated(self, pred) -> np.ndarray | None:
            return self.cols.col(("pred", id(pred)))

        def encoder_dot(self, inputs) -> np.ndarray | None:
            return self.cols.col(("encdot", id(inputs)))

    return GatheredCache


_GC = None


def _GatheredCache(m, cols):
    global _GC
    if _GC is None:
        _GC = _gathered_cache_class()
    return _GC(m, cols)
