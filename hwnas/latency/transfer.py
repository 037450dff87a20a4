"""Few-shot transfer: adapt a predictor fitted on one device to another from 10-50 measurements.

Devices of one family differ mostly by a speed factor and by which resource binds (launch
overhead, compute, memory), so the source predictor's log-prediction is an excellent feature for
the target: ``log ms_target = a + b * log base(arch) + c . z(arch)``, where z are standardised
log analytic costs of the arch (MACs by operator type, bytes, layers). The fit is a ridge
regression with a prior pulling (b, c) toward (1, 0), i.e. toward "the source, rescaled"; its
strength is chosen by closed-form leave-one-out, so with 10 rows it stays near a pure rescale and
with 50 it may bend toward the target's own cost structure. ``features="none"`` keeps only
``a + b * log base`` (a calibrated rescale); the default ``compact`` adds MACs, activation bytes,
weight bytes and layers. (HELP meta-learns this adaptation;
this is its low-parameter, closed-form cousin.)
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.families import NetworkSpec
from hwnas.latency._solvers import ridge_fit, ridge_loo_alpha
from hwnas.latency.analytic import FeatureCache, cached_features, feature_names, select_features
from hwnas.latency.base import LatencyPredictor, load_nested, nested_state, register

__all__ = ["TransferPredictor", "TRANSFER_ALPHAS"]

TRANSFER_ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1e3, 1e4, 1e6)


@register
class TransferPredictor(LatencyPredictor):
    """A fitted source predictor plus a low-dimensional log-space correction to the target."""

    kind = "transfer"
    candidate_rank = 0

    @classmethod
    def candidates(cls, n_rows, *, auto, base, entries_lut, **kw):
        if base is None:
            return []
        return [cls(base, features, **kw) for features in ("none", "compact", "roofline")]
    min_rows = 3

    def __init__(self, base: LatencyPredictor | None = None, features: str = "compact", *,
                 net: NetworkSpec) -> None:
        super().__init__(net=net)
        family = net.family
        if features != "none":
            feature_names(features, family)
        if base is not None and not base.fitted:
            raise InputError("few-shot transfer needs a fitted source predictor as its base")
        if base is not None and base.meta.family != family:
            raise InputError(f"the source predictor is for {base.meta.family} subnets, these rows are "
                             f"{family}'s: transfer needs a source fitted on the same family")
        self.base = base
        self.features = features
        self.center = np.zeros(0)
        self.scale = np.zeros(0)
        self.coef = np.zeros(0)
        self.intercept = 0.0
        self.alpha = 0.0

    def get_params(self) -> dict[str, Any]:
        return {"features": self.features}

    def clone(self) -> TransferPredictor:
        return TransferPredictor(self.base, self.features, net=self.meta.net)

    def describe(self) -> str:
        if self.base is None:
            return f"transfer(?, features={self.features})"
        prior = self.base.meta.notes.prior  # a runtime prior (`hwnas.latency.priors`) by its name
        source = f"prior {prior}" if prior else self.base.describe()
        return f"transfer({source}, features={self.features})"

    @property
    def from_prior(self) -> bool:
        """Whether the source is a runtime prior (`hwnas.latency.priors`) rather than a device's."""
        return bool(self.base is not None and self.base.meta.notes.prior)

    def slope(self) -> float:
        """d log(ms) / d log(source ms) of the fitted model: 1 when the target's latencies scale
        with the source's (the same runtime's cost structure), far from 1 when they do not."""
        return float(self.coef[0] / self.scale[0])

    def _phi(self, m: np.ndarray, cache: FeatureCache | None = None) -> np.ndarray:
        cache = cache or FeatureCache(m)
        z = np.log(np.maximum(self.base._predict_part(m, cache), 1e-9))
        if self.features == "none":
            return z[:, None]
        allf = cached_features(cache, m, self.meta.net)
        f = np.log(np.maximum(select_features(allf, self.features, self.meta.family), 1.0))
        return np.concatenate([z[:, None], f], axis=1)

    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        if self.base is None:
            raise InputError("few-shot transfer needs a source predictor: "
                             "TransferPredictor(base=load_predictor('source.json'))")
        phi = self._phi(m)
        self.center, self.scale = phi.mean(axis=0), phi.std(axis=0)
        self.scale[self.scale < 1e-9] = 1.0
        x = (phi - self.center) / self.scale
        prior = np.zeros(x.shape[1])
        prior[0] = self.scale[0]  # coefficient 1 on log base, in standardised units
        t = np.log(y)
        self.alpha, _ = ridge_loo_alpha(x, t, TRANSFER_ALPHAS, prior)
        self.coef, self.intercept = ridge_fit(x, t, self.alpha, prior)

    def _predict(self, m: np.ndarray) -> np.ndarray:
        return self._predict_cached(m, FeatureCache(m))

    def _predict_cached(self, m: np.ndarray, cache: FeatureCache) -> np.ndarray:
        return np.exp(((self._phi(m, cache) - self.center) / self.scale) @ self.coef + self.intercept)

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        base_doc, arrays = nested_state(self.base, "base")
        return ({"base": base_doc, "center": self.center.tolist(), "scale": self.scale.tolist(),
                 "coef": self.coef.tolist(), "intercept": self.intercept, "alpha": self.alpha},
                arrays)

    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        self.base = load_nested(state["base"], arrays, "base")
        self.center = np.asarray(state["center"], dtype=np.float64)
        self.scale = np.asarray(state["scale"], dtype=np.float64)
        self.coef = np.asarray(state["coef"], dtype=np.float64)
        self.intercept, self.alpha = float(state["intercept"]), float(state["alpha"])
        n = 1 + (0 if self.features == "none" else len(feature_names(self.features, self.meta.family)))
        if not len(self.center) == len(self.scale) == len(self.coef) == n:
            raise ValueError(f"expected {n} transfer coefficients")
