"""One gather per batch: a problem's cost columns and accuracy features from fused tables.

Every exact table over a space (`hwnas.search.tabulate`) reads the same rows of a batch -- its
context's fixed row and, per slot, the slot's row (a `SlotIndex`). `FusedTable` puts several side
by side, so one gather and one sum give every column of a batch; `FastLatency` splits a
feature-based latency model into its additive parts (in the gather) and its few vector ops
(`post`); `RidgeOneHot` scores a ridge accuracy predictor on one-hot features as pair tables;
`FastPath` is all of it for one `Problem`: the interface the problem and the algorithms use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hwnas.search.indexed import GeneIndex, SlotIndex, gene_index
from hwnas.search.tabulate import VectorTable, accuracy_feature_table, feature_table, tabulate

__all__ = ["FusedTable", "FastLatency", "RidgeOneHot", "FastPath"]


class FusedTable:
    """Several `VectorTable`s over one space side by side, as one [rows + 1, W] matrix: a batch
    reads all their columns with one gather and one sum (`gather`)."""

    def __init__(self, slots, parts: list[VectorTable]) -> None:
        self.slots = slots
        self.widths = [p.width for p in parts]
        width = sum(self.widths)
        self.fixed = (np.concatenate([p.fixed for p in parts], axis=-1) if parts
                      else np.zeros((slots.n_ctx, 0)))
        rows = np.concatenate([p.rows for p in parts], axis=-1) if parts else np.zeros((slots.n_rows, 0))
        self.flat = np.concatenate([rows, np.zeros((1, width))])
        self._ones = np.ones((1, slots.n_slots))

    @property
    def width(self) -> int:
        return self.flat.shape[1]

    def gather(self, idx: SlotIndex) -> np.ndarray:
        """float64 [n, W]: every column of every part for the rows of `idx`."""
        vals = self.flat.take(idx.flat, axis=0)  # [n, slots, W] (`take`: ~3x faster than [] here)
        return self.fixed.take(idx.ctx, axis=0) + np.matmul(self._ones, vals)[:, 0]


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
    float rounding of the re-associated sums, ~1e-15 relative). ValueError when the model's
    features are not tabulable over `space` (another family's model, a family without slots)."""

    def __init__(self, pred, space) -> None:
        self.pred, self.space = pred, space
        self.parts: list[VectorTable] = []
        self.keys: list = []
        if pred.meta.family != space.family.name:
            raise ValueError("the latency model is another family's")
        key = (float(pred.meta.width_mult), int(pred.meta.n_classes))
        feats = feature_table(space, *key)
        if feats is None:
            raise ValueError("analytic features are not tabulable over this space")
        self._add(("features",) + key, feats)
        self._walk(pred)
        self._spans, at = {}, 0  # each part's columns in `post`'s `s`
        for key, part in zip(self.keys, self.parts):
            w = part.width
            self._spans[key] = slice(at, at + w) if w > 1 else at
            at += w
        self._cache = _gathered_cache_class(space.family.name)

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
                    self._add(("pred", id(base)), t.as_vector())
                else:
                    self._walk(base)
            else:
                self._walk(base)
        inputs = getattr(pred, "inputs", None)
        if getattr(pred, "residual", None) == "ridge" and inputs is not None and hasattr(inputs, "encoder_dot_fn"):
            t = tabulate(inputs.encoder_dot_fn(pred.coef), self.space)
            if t is not None:
                self._add(("encdot", id(inputs)), t.as_vector())

    def post(self, s: np.ndarray, m: np.ndarray) -> np.ndarray:
        """Milliseconds from this model's columns `s` (in `parts` order) of rows `m`."""
        return np.asarray(self.pred.predict_with_cache(m, self._cache(m, _Columns(s, m, self._spans))),
                          dtype=np.float64)


_CACHES: dict[str, type] = {}


def _gathered_cache_class(family: str) -> type:
    """A `FeatureCache` class answered from a fused gather over `family`'s space: analytic
    features (`get_for` that family), tabulated sub-predictors (`tabulated`) and encoding
    projections (`encoder_dot`)."""
    if family in _CACHES:
        return _CACHES[family]
    from hwnas.latency.analytic import FeatureCache

    class GatheredCache(FeatureCache):
        def __init__(self, m: np.ndarray, cols: _Columns) -> None:
            super().__init__(m)
            self.cols = cols

        def get_for(self, net) -> np.ndarray:
            got = self.cols.col(("features", net.width_mult, net.n_classes)) if net.family == family else None
            return got if got is not None else super().get_for(net)

        def tabulated(self, pred) -> np.ndarray | None:
            return self.cols.col(("pred", id(pred)))

        def encoder_dot(self, inputs) -> np.ndarray | None:
            return self.cols.col(("encdot", id(inputs)))

    _CACHES[family] = GatheredCache
    return GatheredCache


class RidgeOneHot:
    """A Bayesian ridge accuracy predictor on the one-hot ("full") features, as gathers.

    Its features are one-hots summed over running slots (independent of the slot's context) plus
    log MACs and log params; standardised, ``x = z0[context] + sum over running slots of
    z[slot, genes]`` for the one-hot part. So the mean's one-hot share, its cross terms with the
    costs, and the posterior variance's quadratic form ``x C x = sum_ij z_i C z_j`` are tables
    over (slot option, slot option): a batch reads [n, slots + 1, slots + 1] numbers instead of
    building [n, F] features and an [F, F] product. Same values as `predict_with_std` up to float
    re-association (~1e-12). Only for spaces with few contexts (the pair table is squared)."""

    MAX_Z = 2048

    def __init__(self, acc, local: np.ndarray, g: np.ndarray, h: np.ndarray, costs: FusedTable,
                 c_mean: np.ndarray, c_std: np.ndarray, beta_c: np.ndarray, cov_cc: np.ndarray) -> None:
        self.acc, self.g, self.h, self.costs = acc, g, h, costs
        self.c_mean, self.c_std, self.beta_c, self.cov_cc = c_mean, c_std, beta_c, cov_cc
        self._local = local  # slot row (and the zero row) -> row of z
        self.n_local = int(local[-1])
        self._g_flat = g.ravel()
        self._n_z = g.shape[0]

    @staticmethod
    def build(acc, table: VectorTable) -> "RidgeOneHot | None":
        slots = table.slots
        p = table.width - 2  # one-hot columns; the last two are MACs and params
        local, chunks, at = [], [], 0
        for s in range(slots.n_slots):
            n_opt, n_ctx = int(slots.n_opt[s]), int(slots.n_ctx_of[s])
            block = table.rows[slots.offset[s]:slots.offset[s] + n_ctx * n_opt, :p].reshape(n_ctx, n_opt, p)
            if not np.array_equal(block, np.broadcast_to(block[:1], block.shape)):
                return None  # one-hot entries depend on the slot's context: not this layout
            chunks.append(block[0])
            local.append(np.tile(np.arange(at, at + n_opt), n_ctx))
            at += n_opt
        n_local = at
        if n_local + 1 + slots.n_ctx > RidgeOneHot.MAX_Z:
            return None
        mu, sd = np.asarray(acc.x_mean, np.float64), np.asarray(acc.x_std, np.float64)
        cov, coef = np.asarray(acc.cov, np.float64), np.asarray(acc.coef, np.float64)
        if cov.shape != (p + 2, p + 2) or len(mu) != p + 2:
            return None
        z = np.concatenate([np.concatenate(chunks) / sd[:p], np.zeros((1, p)), (table.fixed[:, :p] - mu[:p]) / sd[:p]])
        g = z @ cov[:p, :p] @ z.T
        h = np.concatenate([z @ coef[:p, None], z @ cov[:p, p:]], axis=1)  # mean share, cross terms
        costs = FusedTable(slots, [VectorTable(slots, table.fixed[:, p:], table.rows[:, p:], table.fallback)])
        local = np.append(np.concatenate(local), n_local).astype(np.intp)  # the zero row -> zero row of z
        return RidgeOneHot(acc, local, g, h, costs, mu[p:], sd[p:], coef[p:], cov[p:, p:])

    def __call__(self, idx: SlotIndex) -> tuple[np.ndarray, np.ndarray]:
        n = len(idx)
        j = np.empty((n, idx.flat.shape[1] + 1), dtype=np.intp)
        j[:, :-1] = self._local.take(idx.flat)  # slots that do not run: the zero row
        j[:, -1] = idx.ctx + (self.n_local + 1)
        quad = self._g_flat.take(((j * self._n_z)[:, :, None] + j[:, None, :]).reshape(n, -1)).sum(axis=1)
        lin = self.h.take(j, axis=0).sum(axis=1)  # [n, 3]
        c = (np.log(np.maximum(self.costs.gather(idx), 1.0)) - self.c_mean) / self.c_std
        acc = self.acc
        mean = lin[:, 0] + c @ self.beta_c + acc.y_mean
        quad = quad + 2.0 * (lin[:, 1:] * c).sum(axis=1) + ((c @ self.cov_cc) * c).sum(axis=1)
        var = acc.sigma2 * (1.0 / max(acc.meta.get("n_train", 1), 1) + quad)
        return np.clip(mean, *acc.clip), np.sqrt(np.maximum(var, 0.0)) * acc.std_scale


@dataclass
class FastPath:
    """A problem's costs and accuracy features as fused gathers over one `SlotIndex` per batch."""

    genes: GeneIndex  # the space's choice-index rows: value rows' slot index, index-row breeding
    table: FusedTable
    posts: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]
    accuracy: Any = None  # the accuracy predictor the features below are for
    acc_table: FusedTable | None = None
    acc_post: Callable[[np.ndarray], np.ndarray] | None = None
    ridge: RidgeOneHot | None = None

    def index(self, m: np.ndarray, trusted: bool = False) -> SlotIndex | None:
        """The batch's `SlotIndex` (None when a row is outside what the tables express)."""
        return self.genes.index_values(m, trusted)

    def costs(self, idx: SlotIndex, m: np.ndarray) -> dict[str, np.ndarray]:
        """Every cost column of rows `m` (slot index `idx`) from one gather."""
        s = self.table.gather(idx)
        return {k: post(s, m) for k, post in self.posts.items()}

    def top1_mean_std(self, idx: SlotIndex) -> tuple[np.ndarray, np.ndarray] | None:
        """The accuracy predictor's (top-1, sigma) of a batch from its pair tables or gathered
        features; None when neither applies (the predictor is then called on the rows)."""
        if self.ridge is not None:
            return self.ridge(idx)
        if self.acc_table is None:
            return None
        mean, std = self.accuracy.predict_features_with_std(self.acc_post(self.acc_table.gather(idx)))
        return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)

    @property
    def accuracy_path(self) -> str:
        """How a batch's top-1 is read: "ridge pair tables", "gathered features" or "model"."""
        return ("ridge pair tables" if self.ridge is not None
                else "gathered features" if self.acc_table is not None else "model")

    @staticmethod
    def build(space, costs: dict[str, Any], latency: dict[str, Any], accuracy) -> "FastPath | None":
        """`costs`: the problem's cost columns by key (`hwnas.search.costs.Cost`: its exact `table`
        or None, whether it is a `vectorised` hwnas latency model); `latency`: the device models
        by key."""
        genes = gene_index(space)
        if genes is None:
            return None
        parts: list[VectorTable] = []
        posts: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {}

        def span(width: int) -> slice:
            at = sum(p.width for p in parts)
            return slice(at, at + width)

        for key, cost in costs.items():
            if cost.table is not None:
                sl = span(1)
                parts.append(cost.table.as_vector())
                posts[key] = lambda s, m, j=sl.start: s[:, j]
                continue
            fl = None
            if cost.vectorised:
                try:
                    fl = FastLatency(latency[key], space)
                except (ValueError, AttributeError):
                    fl = None
            if fl is not None:
                sl = span(sum(p.width for p in fl.parts))
                parts.extend(fl.parts)
                posts[key] = lambda s, m, fl=fl, sl=sl: fl.post(s[:, sl], m)
            else:
                posts[key] = lambda s, m, cost=cost: cost(m)
        fast = FastPath(genes, FusedTable(genes.slots, parts), posts, accuracy)
        if hasattr(accuracy, "predict_features_with_std") and getattr(accuracy, "space", None) == space:
            from hwnas.accuracy.features import features_from_pre

            fs = accuracy.feature_set_name()
            t = accuracy_feature_table(space, fs, int(accuracy.n_classes))
            if t is not None:
                fast.acc_table = FusedTable(genes.slots, [t])
                fast.acc_post = lambda pre, fs=fs: features_from_pre(space, pre, fs)
                if fs == "full" and getattr(accuracy, "kind", "") == "ridge":
                    fast.ridge = RidgeOneHot.build(accuracy, t)
        return fast
