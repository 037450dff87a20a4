"""Hybrid latency model: a physically grounded base times a learned correction.

``ms = base(arch) * exp(residual(arch))``. The base (by default ``"auto"``: the analytic model
that cross-validation picks on the same rows; or a given analytic/lookup-table predictor) carries
the bulk of the signal with few parameters; the residual model learns what
the base cannot express (a runtime that picks a slow kernel for 7x7 depthwise convolutions in
stage 3, say) from the architecture encoding, in log space so it is a ratio. Residual models:

- ``ridge``: ridge regression on the encoding + log costs, its strength picked by closed-form
  leave-one-out (so it shrinks to "no correction" when there is nothing to learn);
- ``mlp``: the MLP ensemble of `hwnas.latency.mlp`, for hundreds of rows and more.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.families import NetworkSpec
from hwnas.latency.analytic import FeatureCache
from hwnas.latency._solvers import ridge_fit, ridge_loo_alpha
from hwnas.latency.base import (LatencyPredictor, load_nested, nested_state, predictor_class,
                                register)
from hwnas.latency.mlp import InputScaler, mlp_forward, pack_models, train_mlp, unpack_models

__all__ = ["HybridPredictor", "RIDGE_ALPHAS"]

RIDGE_ALPHAS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 1e4)
AUTO = "auto"


def _base_of(base: LatencyPredictor | Mapping[str, Any] | str, net: NetworkSpec) -> LatencyPredictor | None:
    if base == AUTO:
        return None
    if isinstance(base, LatencyPredictor):
        if base.meta.family != net.family:
            raise InputError(f"a hybrid predictor for {net.family} cannot have a {base.meta.family} base")
        return base.clone()
    if not isinstance(base, Mapping):
        raise InputError(f"a hybrid base must be 'auto', a predictor or {{'kind', 'params'}}, got {base!r}")
    spec = dict(base)
    if spec.get("kind") in ("hybrid", "transfer"):
        raise InputError(f"a hybrid predictor's base cannot be a {spec['kind']} predictor")
    return predictor_class(str(spec.get("kind")))(net=net, **dict(spec.get("params") or {}))


@register
class HybridPredictor(LatencyPredictor):
    """Base predictor x learned ratio (see the module docstring)."""

    kind = "hybrid"
    candidate_rank = 3

    @classmethod
    def candidates(cls, n_rows, *, auto, base, entries_lut, **kw):
        if auto and n_rows < 30:
            return []
        out = [cls("auto", "ridge", **kw)]
        if entries_lut is not None:
            out.append(cls(entries_lut, "ridge", **kw))
        if not auto or n_rows >= 200:
            out.append(cls("auto", "mlp", **kw))
        return out
    min_rows = 5

    def __init__(self, base: LatencyPredictor | Mapping[str, Any] | str = AUTO,
                 residual: str = "ridge", *, net: NetworkSpec) -> None:
        super().__init__(net=net)
        if residual not in ("ridge", "mlp"):
            raise InputError(f"unknown residual model {residual!r}; use 'ridge' or 'mlp'")
        self.residual = residual
        self.auto_base = base == AUTO
        self.base: LatencyPredictor | None = _base_of(base, net)
        self.inputs = InputScaler(net)
        self.coef = np.zeros(0)
        self.intercept = 0.0
        self.alpha = 0.0
        self.models: list = []
        self.t_scale = 1.0

    def get_params(self) -> dict[str, Any]:
        base = AUTO if self.auto_base else {"kind": self.base.kind, "params": self.base.get_params()}
        return {"base": base, "residual": self.residual}

    def clone(self) -> HybridPredictor:
        return HybridPredictor(AUTO if self.auto_base else self.base, self.residual, net=self.meta.net)

    def describe(self) -> str:
        base = "auto-analytic" if self.auto_base else self.base.describe()
        return f"hybrid({base} x {self.residual})"

    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        if self.auto_base:
            from hwnas.latency.select import fit_best  # select imports this module

            # hybrids fit from 30 rows, where the within-10 choice is stable: kept, so a refit
            # gives the model a saved hybrid holds
            self.base = fit_best(m, y, net=self.meta.net, kinds=["analytic"], priors=(),
                                 criterion="within-10")[0]
        else:
            self.base.fit(m, y)
        target = np.log(y) - np.log(self.base.predict(m))
        x = self.inputs.fit(m)
        if self.residual == "ridge":
            self.alpha, _ = ridge_loo_alpha(x, target, RIDGE_ALPHAS)
            self.coef, self.intercept = ridge_fit(x, target, self.alpha)
        else:
            self.t_scale = float(max(target.std(), 1e-6))
            self.intercept = float(target.mean())
            self.models = train_mlp(x, (target - self.intercept) / self.t_scale, hidden=32,
                                    epochs=400, weight_decay=1e-2, seeds=3)

    def ratio(self, m: np.ndarray, cache: FeatureCache | None = None) -> np.ndarray:
        """The learned correction factor exp(residual) per row."""
        if self.residual == "ridge":
            return np.exp(self.inputs.dot(m, cache, self.coef) + self.intercept)
        x = self.inputs(m, cache)
        return np.exp(mlp_forward(self.models, x) * self.t_scale + self.intercept)

    def _predict(self, m: np.ndarray) -> np.ndarray:
        return self._predict_cached(m, FeatureCache(m))

    def _predict_cached(self, m: np.ndarray, cache: FeatureCache) -> np.ndarray:
        return self.base._predict_part(m, cache) * self.ratio(m, cache)

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        base_doc, arrays = nested_state(self.base, "base")
        state, in_arrays = self.inputs.state()
        state.update(base=base_doc, intercept=self.intercept, alpha=self.alpha, t_scale=self.t_scale,
                     n_models=len(self.models))
        arrays.update(in_arrays)
        if self.residual == "ridge":
            arrays["coef"] = self.coef
        else:
            arrays.update(pack_models(self.models, "mlp"))
        return state, arrays

    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        self.base = load_nested(state["base"], arrays, "base")
        self.inputs.load(state, arrays)
        self.intercept, self.alpha = float(state["intercept"]), float(state["alpha"])
        self.t_scale = float(state.get("t_scale", 1.0))
        if self.residual == "ridge":
            self.coef = np.asarray(arrays["coef"], dtype=np.float64)
            if len(self.coef) != len(self.inputs.center):
                raise ValueError("residual coefficients do not match the inputs")
        else:
            self.models = unpack_models(arrays, "mlp", int(state["n_models"]), 3)
