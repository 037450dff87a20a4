"""Analytic-feature latency model: exact per-part costs -> a small regularised regression.

Latency is close to a sum over layers of (compute time + memory time + launch/dispatch overhead).
The features say exactly how much of each a subnet has, computed from the network layout
(`hwnas.latency.layout`): MACs split by operator type (pointwise, depthwise, squeeze-excite, the
fixed stem/head), activation and weight bytes, layer counts, and per-stage block counts, MACs and
activation bytes (efficiency differs between a 112x112 and a 7x7 feature map). Feature sets, smallest first: ``macs`` (the FLOPs-only baseline), ``params`` (weight bytes),
``simple`` (MACs, weight bytes, blocks), ``compact`` (MACs, activation bytes, weight bytes,
layers: compute, memory and launch cost), ``roofline`` (MACs by operator type, bytes, layers),
``stage`` (per-stage blocks, MACs and bytes) and ``full`` (roofline with depthwise MACs split by
kernel size 3/5/7 (other kernel sizes count in none of them), + stage). The model is one of

- ``linear``: ``ms = b + sum_j w_j f_j`` with w >= 0 (every unit of work costs time), fitted on
  relative errors with a ridge penalty: few parameters with the right sign, robust from ~20 rows;
- ``log``: ridge regression of log(ms) on log-features: a power law, for runtimes whose cost is
  multiplicative rather than additive.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.latency._solvers import nnls_relative, ridge_fit
from hwnas.latency.base import LatencyPredictor, register
from hwnas.latency.layout import MBV3, COST_NAMES, analytic_gather, family_cost_gather, family_layout

__all__ = ["FEATURE_SETS", "ALL_FEATURES", "FeatureCache", "all_features", "all_feature_names",
           "analytic_features", "cached_features", "feature_names", "select_features", "AnalyticPredictor"]

_C = {name: i for i, name in enumerate(COST_NAMES)}
FEATURE_SETS: tuple[str, ...] = ("macs", "params", "simple", "compact", "roofline", "stage", "full")


def _stage_names(n_stages: int = 5) -> list[str]:
    return [f"{what}_s{s}" for s in range(n_stages) for what in ("blocks", "macs", "act")]


def _all_names(kernels: tuple[int, ...], n_stages: int) -> tuple[str, ...]:
    return (COST_NAMES + ("macs", "act_fixed") + tuple(f"macs_dw_k{k}" for k in kernels)
            + tuple(_stage_names(n_stages)))


#: every analytic column any feature set uses (OFA-MobileNetV3; other families: `all_feature_names`)
ALL_FEATURES: tuple[str, ...] = _all_names((3, 5, 7), 5)
_A = {name: i for i, name in enumerate(ALL_FEATURES)}


@functools.lru_cache(maxsize=16)
def _shape(family: str) -> tuple[tuple[int, ...], int]:
    """(block kernel sizes, stages) of a family's cost layout: what its feature names depend on."""
    if family == MBV3:
        return (3, 5, 7), 5
    from hwnas.families import get_family

    layout = get_family(family).cost_layout()
    return tuple(layout.kernels), int(layout.n_stages)


@functools.lru_cache(maxsize=16)
def all_feature_names(family: str = MBV3) -> tuple[str, ...]:
    """`ALL_FEATURES` of a family (its stages and block kernel sizes)."""
    return ALL_FEATURES if family == MBV3 else _all_names(*_shape(family))


@functools.lru_cache(maxsize=64)
def feature_names(feature_set: str, family: str = MBV3) -> tuple[str, ...]:
    kernels, n_stages = _shape(family)
    stages = _stage_names(n_stages)
    roof = ["macs_pw", "macs_dw", "macs_se", "macs_fixed", "act_bytes", "weight_bytes", "convs"]
    kernel = ["macs_pw"] + [f"macs_dw_k{k}" for k in kernels] + roof[2:]
    names = {"macs": ["macs"], "params": ["weight_bytes"], "simple": ["macs", "weight_bytes", "blocks"],
             "compact": ["macs", "act_bytes", "weight_bytes", "convs"], "roofline": roof,
             "stage": stages + ["macs_fixed", "act_fixed"],
             "full": kernel + stages}
    if feature_set not in names:
        raise InputError(f"unknown feature set {feature_set!r}; use one of {', '.join(FEATURE_SETS)}")
    return tuple(names[feature_set])


def all_features(m: np.ndarray, width_mult: float, n_classes: int, chunk: int = 20000,
                 family: str = MBV3) -> np.ndarray:
    """Every `ALL_FEATURES` column [n, A] of flat rows `m`: exact, vectorised, one pass
    (another family's: `all_feature_names(family)`, from its cost layout)."""
    if family != MBV3:
        return _family_features(m, width_mult, n_classes, family, min(chunk, 5000))
    gather = analytic_gather(width_mult, n_classes)
    out = np.empty((len(m), len(ALL_FEATURES)))
    pw, dw, se = _C["macs_pw"], _C["macs_dw"], _C["macs_se"]
    for lo in range(0, len(m), chunk):
        per_slot, fixed = gather.per_slot(m[lo:lo + chunk])
        block = out[lo:lo + chunk]
        block[:, :len(COST_NAMES)] = per_slot.sum(axis=1) + fixed
        block[:, _A["macs"]] = block[:, [pw, dw, se, _C["macs_fixed"]]].sum(axis=1)
        block[:, _A["act_fixed"]] = fixed[:, _C["act_bytes"]]
        ks = m[lo:lo + chunk, 1:21]
        for k in (3, 5, 7):  # depthwise efficiency differs by kernel size on most runtimes
            block[:, _A[f"macs_dw_k{k}"]] = (per_slot[:, :, dw] * (ks == k)).sum(axis=1)
        stage = per_slot.reshape(len(per_slot), 5, 4, -1).sum(axis=2)  # [n, 5, C]
        for s in range(5):
            block[:, _A[f"blocks_s{s}"]] = stage[:, s, _C["blocks"]]
            block[:, _A[f"macs_s{s}"]] = stage[:, s, [pw, dw, se]].sum(axis=1)
            block[:, _A[f"act_s{s}"]] = stage[:, s, _C["act_bytes"]]
    return out


def _family_features(m: np.ndarray, width_mult: float, n_classes: int, family: str, chunk: int
                     ) -> np.ndarray:
    """`all_features` of another family: its cost layout's parts, gathered (`PartGather`)."""
    layout = family_layout(family, width_mult, n_classes)
    gather = family_cost_gather(family, width_mult, n_classes)
    names = all_feature_names(family)
    at = {name: i for i, name in enumerate(names)}
    n_cost = len(COST_NAMES)
    fixed = np.array([p.kind != "block" for p in layout.parts])
    stage_of = np.array([p.stage for p in layout.parts])
    macs_cols = [_C["macs_pw"], _C["macs_dw"], _C["macs_se"]]
    out = np.empty((len(m), len(names)))
    for lo in range(0, len(m), chunk):
        per_part = gather.per_part(m[lo:lo + chunk])  # [n, parts, costs + kernels]
        block = out[lo:lo + chunk]
        block[:, :n_cost] = per_part[:, :, :n_cost].sum(axis=1)
        block[:, at["macs"]] = block[:, macs_cols + [_C["macs_fixed"]]].sum(axis=1)
        block[:, at["act_fixed"]] = per_part[:, fixed, _C["act_bytes"]].sum(axis=1)
        for i, k in enumerate(layout.kernels):
            block[:, at[f"macs_dw_k{k}"]] = per_part[:, :, n_cost + i].sum(axis=1)
        for s in range(layout.n_stages):
            stage = per_part[:, stage_of == s].sum(axis=1)  # [n, costs + kernels]
            block[:, at[f"blocks_s{s}"]] = stage[:, _C["blocks"]]
            block[:, at[f"macs_s{s}"]] = stage[:, macs_cols].sum(axis=1)
            block[:, at[f"act_s{s}"]] = stage[:, _C["act_bytes"]]
    return out


@functools.lru_cache(maxsize=64)
def _columns(feature_set: str, family: str) -> list[int]:
    at = {name: i for i, name in enumerate(all_feature_names(family))}
    return [at[n] for n in feature_names(feature_set, family)]


def select_features(allf: np.ndarray, feature_set: str, family: str = MBV3) -> np.ndarray:
    """The columns of `feature_set` from an `all_features` matrix."""
    if family == MBV3:
        return allf[:, [_A[n] for n in feature_names(feature_set)]]
    return allf[:, _columns(feature_set, family)]


def analytic_features(m: np.ndarray, width_mult: float, n_classes: int, feature_set: str = "full",
                      family: str = MBV3) -> np.ndarray:
    """Exact features [n, F] (`feature_names(feature_set, family)`) of flat rows `m`, vectorised."""
    return select_features(all_features(m, width_mult, n_classes, family=family), feature_set, family)


class FeatureCache:
    """`all_features` of one matrix, computed at most once per (width_mult, n_classes): a hybrid
    or transfer model and its base share one pass over the rows."""

    def __init__(self, m: np.ndarray) -> None:
        self.m = m
        self._done: dict[tuple[float, int], np.ndarray] = {}

    def get(self, width_mult: float, n_classes: int) -> np.ndarray:
        key = (float(width_mult), int(n_classes))
        if key not in self._done:
            self._done[key] = all_features(self.m, width_mult, n_classes)
        return self._done[key]

    def get_for(self, family: str, width_mult: float, n_classes: int) -> np.ndarray:
        """`all_features` of the rows as `family`'s (OFA-MobileNetV3: `get`)."""
        if family == MBV3:
            return self.get(width_mult, n_classes)
        key = (family, float(width_mult), int(n_classes))
        if key not in self._done:
            self._done[key] = all_features(self.m, width_mult, n_classes, family=family)
        return self._done[key]


def cached_features(cache: FeatureCache | None, m: np.ndarray, meta) -> np.ndarray:
    """The `all_features` a predictor with `meta` (family, width, classes) reads from `cache`."""
    return (cache or FeatureCache(m)).get_for(meta.family, meta.width_mult, meta.n_classes)


@register
class AnalyticPredictor(LatencyPredictor):
    """Regression on exact analytic features (see the module docstring)."""

    kind = "analytic"
    candidate_rank = 1

    @classmethod
    def candidates(cls, n_rows, *, auto, base, entries_lut, **kw):
        out = [cls("macs", "linear", 0.0, **kw)]
        for features in ("simple", "compact", "roofline", "stage", "full"):
            if len(feature_names(features, kw["family"])) > n_rows / 2:
                continue  # at least 2 rows per coefficient, or CV picks overfitted sets by luck
            for alpha in ((1e-4,) if features in ("simple", "compact") else (1e-4, 1e-2)):
                out.append(cls(features, "linear", alpha, **kw))
            out.append(cls(features, "log", 1e-2 if n_rows < 50 else 1e-3, **kw))
        return out

    def __init__(self, features: str = "stage", model: str = "linear", alpha: float = 1e-3, *,
                 width_mult: float = 1.0, n_classes: int = 1000, family: str = MBV3) -> None:
        super().__init__(width_mult=width_mult, n_classes=n_classes, family=family)
        feature_names(features, family)  # validates
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
        return select_features(cached_features(cache, m, self.meta), self.features, self.meta.family)

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
        x = self.transform(self._matrix(archs))
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
