"""Analytic-feature latency model: exact per-part costs -> a small regularised regression.

Latency is close to a sum over layers of (compute time + memory time + launch/dispatch overhead).
The features say exactly how much of each a subnet has, summed over the family's cost layout
(`hwnas.latency.layout`), in the family's cost vocabulary (`CostLayout.cost_names`): MACs split
by operator type (for MBConv: pointwise, depthwise, squeeze-excite; the fixed stem/head), activation
and weight bytes, layer counts, and per-stage block counts, MACs and activation bytes (efficiency
differs between a 112x112 and a 7x7 feature map). Feature sets,
smallest first: ``macs`` (the FLOPs-only baseline), ``params`` (weight bytes), ``simple`` (MACs,
weight bytes, blocks), ``compact`` (MACs, activation bytes, weight bytes, layers: compute, memory
and launch cost), ``roofline`` (MACs by operator type, bytes, layers), ``stage`` (per-stage
blocks, MACs and bytes) and ``full`` (roofline with the `kernel_split` MACs, e.g. depthwise, split
by the family's block kernel sizes, e.g. 3/5/7 (other sizes count in none of them), + stage). The model is one of

- ``linear``: ``ms = b + sum_j w_j f_j`` with w >= 0 (every unit of work costs time), fitted on
  relative errors with a ridge penalty: few parameters with the right sign, robust from ~20 rows;
- ``log``: ridge regression of log(ms) on log-features: a power law, for runtimes whose cost is
  multiplicative rather than additive.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from hwnas.errors import InputError
from hwnas.families import NetworkSpec, get_family
from hwnas.families.parts import block_mac_names
from hwnas.latency._solvers import nnls_relative, ridge_fit
from hwnas.latency.base import LatencyPredictor, register
from hwnas.latency.layout import cost_kernels, family_cost_gather

__all__ = ["FEATURE_SETS", "FeatureCache", "all_features", "all_feature_names", "analytic_features",
           "cached_features", "feature_names", "select_features", "AnalyticPredictor"]

FEATURE_SETS: tuple[str, ...] = ("macs", "params", "simple", "compact", "roofline", "stage", "full")


def _stage_names(n_stages: int) -> list[str]:
    return [f"{what}_s{s}" for s in range(n_stages) for what in ("blocks", "macs", "act")]


class _Vocabulary(NamedTuple):
    """What a family's feature names depend on: its cost layout's vocabulary and shape."""

    costs: tuple[str, ...]  # `CostLayout.cost_names`
    block_macs: tuple[str, ...]  # the blocks' MAC counts among them (macs_<operator>)
    kernel_split: str | None  # `CostLayout.kernel_split` when the layout splits it by kernel
    split: tuple[str, ...]  # its per-kernel columns (none without a split)
    n_stages: int


@functools.lru_cache(maxsize=16)
def _vocabulary(family: str) -> _Vocabulary:
    layout = get_family(family).cost_layout(None, 1000)  # names do not depend on the width or classes
    costs = tuple(layout.cost_names)
    block_macs = block_mac_names(costs)
    kernels = cost_kernels(layout)
    split = tuple(f"{layout.kernel_split}_k{k}" for k in kernels)
    return _Vocabulary(costs, block_macs, layout.kernel_split if kernels else None, split, int(layout.n_stages))


@functools.lru_cache(maxsize=16)
def all_feature_names(family: str) -> tuple[str, ...]:
    """Every analytic column any feature set of `family` uses (its costs, stages and kernel split)."""
    v = _vocabulary(family)
    return v.costs + ("macs", "act_fixed") + v.split + tuple(_stage_names(v.n_stages))


@functools.lru_cache(maxsize=64)
def feature_names(feature_set: str, family: str) -> tuple[str, ...]:
    v = _vocabulary(family)
    stages = _stage_names(v.n_stages)
    roof = [n for n in v.costs if n != "blocks"]
    at = roof.index(v.kernel_split) if v.kernel_split else None  # its MACs, split by kernel, in its place
    kernel = roof if at is None else roof[:at] + list(v.split) + roof[at + 1:]
    names = {"macs": ["macs"], "params": ["weight_bytes"], "simple": ["macs", "weight_bytes", "blocks"],
             "compact": ["macs", "act_bytes", "weight_bytes", "convs"], "roofline": roof,
             "stage": stages + ["macs_fixed", "act_fixed"],
             "full": kernel + stages}
    if feature_set not in names:
        raise InputError(f"unknown feature set {feature_set!r}; use one of {', '.join(FEATURE_SETS)}")
    return tuple(names[feature_set])


@functools.lru_cache(maxsize=16)
def _sums(net: NetworkSpec) -> tuple:
    """The family's cost gather, and how `all_features` sums its parts: per stage its blocks, and
    the parts that are not blocks, each as [(0: switched | 1: always run, a slice where they are
    consecutive, else their indices)]."""
    gather = family_cost_gather(net)
    parts = gather.layout.parts

    def pick(keep) -> list[tuple[int, slice | np.ndarray]]:
        out = []
        for which, members in enumerate((gather.switched, gather.fixed)):
            at = np.flatnonzero([keep(parts[p]) for p in members])
            if len(at):
                out.append((which, slice(int(at[0]), int(at[-1]) + 1) if (np.diff(at) == 1).all() else at))
        return out

    stages = [pick(lambda p, s=s: p.kind == "block" and p.stage == s) for s in range(gather.layout.n_stages)]
    return gather, stages, pick(lambda p: p.kind != "block")


def _summed(picked: list, gathered: tuple[np.ndarray, np.ndarray], columns) -> np.ndarray | float:
    """The sum of `columns` over the `picked` parts of a gather's (switched, always run) values."""
    out: np.ndarray | float = 0.0
    for which, at in picked:
        out = out + gathered[which][:, at, columns].sum(axis=1)
    return out


def all_features(m: np.ndarray, net: NetworkSpec, chunk: int = 20000) -> np.ndarray:
    """Every `all_feature_names(net.family)` column [n, A] of `net`'s flat rows `m`: exact (integer
    counts), vectorised, one gather over the family's cost layout."""
    gather, stages, not_blocks = _sums(net)
    v = _vocabulary(net.family)
    names = all_feature_names(net.family)
    at = {name: i for i, name in enumerate(names)}
    n_cost = len(v.costs)
    c = {name: i for i, name in enumerate(v.costs)}
    macs = [c[n] for n in v.block_macs]
    kernels = [at[n] for n in v.split]
    per_stage = [c["blocks"]] + macs + [c["act_bytes"]]
    out = np.empty((len(m), len(names)))
    for lo in range(0, len(m), chunk):
        gathered = gather.gather(m[lo:lo + chunk])  # (switched, always run): [n, parts, costs + kernels]
        block = out[lo:lo + chunk]
        total = gathered[0].sum(axis=1) + gathered[1].sum(axis=1)
        block[:, :n_cost] = total[:, :n_cost]
        block[:, at["macs"]] = block[:, macs + [c["macs_fixed"]]].sum(axis=1)
        block[:, at["act_fixed"]] = _summed(not_blocks, gathered, c["act_bytes"])
        block[:, kernels] = total[:, n_cost:]
        for s, picked in enumerate(stages):
            stage = _summed(picked, gathered, per_stage) + np.zeros(len(per_stage))  # blocks, MACs by kind, act
            block[:, at[f"blocks_s{s}"]] = stage[..., 0]
            block[:, at[f"macs_s{s}"]] = stage[..., 1:-1].sum(axis=-1)
            block[:, at[f"act_s{s}"]] = stage[..., -1]
    return out


@functools.lru_cache(maxsize=64)
def _columns(feature_set: str, family: str) -> list[int]:
    at = {name: i for i, name in enumerate(all_feature_names(family))}
    return [at[n] for n in feature_names(feature_set, family)]


def select_features(allf: np.ndarray, feature_set: str, family: str) -> np.ndarray:
    """The columns of `feature_set` from an `all_features` matrix."""
    return allf[:, _columns(feature_set, family)]


def analytic_features(m: np.ndarray, net: NetworkSpec, feature_set: str = "full") -> np.ndarray:
    """Exact features [n, F] (`feature_names(feature_set, net.family)`) of `net`'s flat rows `m`."""
    return select_features(all_features(m, net), feature_set, net.family)


class FeatureCache:
    """`all_features` of one matrix, computed at most once per network (`NetworkSpec`): a hybrid or
    transfer model and its base share one pass over the rows. `source(m, net)` may supply them
    faster (the search's per-space tables), or return None."""

    def __init__(self, m: np.ndarray, source: Callable[..., np.ndarray | None] | None = None) -> None:
        self.m = m
        self.source = source
        self._done: dict[NetworkSpec, np.ndarray] = {}

    def get_for(self, net: NetworkSpec) -> np.ndarray:
        """`all_features` of the rows as `net`'s."""
        if net not in self._done:
            got = None if self.source is None else self.source(self.m, net)
            self._done[net] = got if got is not None else all_features(self.m, net)
        return self._done[net]


def cached_features(cache: FeatureCache | None, m: np.ndarray, net: NetworkSpec) -> np.ndarray:
    """The `all_features` of `net`'s rows `m`, from `cache` when there is one."""
    return (cache or FeatureCache(m)).get_for(net)


@register
class AnalyticPredictor(LatencyPredictor):
    """Regression on exact analytic features (see the module docstring)."""

    kind = "analytic"
    candidate_rank = 1

    @classmethod
    def candidates(cls, n_rows, *, auto, base, entries_lut, **kw):
        out = [cls("macs", "linear", 0.0, **kw)]
        for features in ("simple", "compact", "roofline", "stage", "full"):
            if len(feature_names(features, kw["net"].family)) > n_rows / 2:
                continue  # at least 2 rows per coefficient, or CV picks overfitted sets by luck
            for alpha in ((1e-4,) if features in ("simple", "compact") else (1e-4, 1e-2)):
                out.append(cls(features, "linear", alpha, **kw))
            out.append(cls(features, "log", 1e-2 if n_rows < 50 else 1e-3, **kw))
        return out

    def __init__(self, features: str = "stage", model: str = "linear", alpha: float = 1e-3, *,
                 net: NetworkSpec) -> None:
        super().__init__(net=net)
        feature_names(features, net.family)  # validates
        if model not in ("linear", "log"):
            raise InputError(f"unknown analytic model {model!r}; use 'linear' or 'log'")
        if not alpha >= 0:
            raise InputError(f"alpha must be >= 0, got {alpha}")
        self.features, self.model, self.alpha = features, model, float(alpha)
        self.coef = np.zeros(0)
        self.intercept = 0.0
        self.center = np.zeros(0)
        self.scale = np.zeros(0)

    def get_params(self) -> dict[str, Any]:
        return {"features": self.features, "model": self.model, "alpha": self.alpha}

    def transform(self, m: np.ndarray, cache: FeatureCache | None = None) -> np.ndarray:
        return select_features(cached_features(cache, m, self.meta.net), self.features, self.meta.family)

    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        x = self.transform(m)
        if self.model == "linear":
            a = np.concatenate([np.ones((len(x), 1)), x], axis=1)
            free = np.zeros(a.shape[1], bool)
            free[0] = True
            w = nnls_relative(a, y, self.alpha, free)
            self.intercept, self.coef = float(w[0]), w[1:]
        else:
            lx = np.log(np.maximum(x, 1e-9))
            self.center, self.scale = lx.mean(axis=0), lx.std(axis=0)
            self.scale[self.scale < 1e-12] = 1.0
            self.coef, self.intercept = ridge_fit((lx - self.center) / self.scale, np.log(y),
                                                  self.alpha * len(y))

    def _predict(self, m: np.ndarray) -> np.ndarray:
        return self._predict_cached(m, FeatureCache(m))

    def _predict_cached(self, m: np.ndarray, cache: FeatureCache) -> np.ndarray:
        x = self.transform(m, cache)
        if self.model == "linear":
            return np.maximum(x @ self.coef + self.intercept, 1e-6)
        lx = (np.log(np.maximum(x, 1e-9)) - self.center) / self.scale
        return np.exp(lx @ self.coef + self.intercept)

    def contributions(self, archs) -> dict[str, np.ndarray]:
        """Linear model only: the ms each feature contributes, per arch (explains a prediction)."""
        if self.model != "linear":
            raise InputError("contributions are defined for the linear analytic model only")
        x = self.transform(self.as_matrix(archs))
        names = feature_names(self.features, self.meta.family)
        return {"intercept": np.full(len(x), self.intercept),
                **{n: x[:, i] * self.coef[i] for i, n in enumerate(names)}}

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return ({"feature_names": list(feature_names(self.features, self.meta.family)), "intercept": self.intercept,
                 "coef": self.coef.tolist(), "center": self.center.tolist(),
                 "scale": self.scale.tolist()}, {})

    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        n = len(feature_names(self.features, self.meta.family))
        self.intercept = float(state["intercept"])
        self.coef = np.asarray(state["coef"], dtype=np.float64)
        self.center = np.asarray(state.get("center") or [], dtype=np.float64)
        self.scale = np.asarray(state.get("scale") or [], dtype=np.float64)
        if len(self.coef) != n or (self.model == "log" and (len(self.center) != n or len(self.scale) != n)):
            raise ValueError(f"expected {n} coefficients for feature set {self.features!r}")
