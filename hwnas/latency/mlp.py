"""Learned latency model: a small MLP ensemble on the architecture encoding (+ log analytic costs).

Input (`InputScaler`): the standardised log of the exact analytic costs (MACs by operator type,
bytes, layers, per-stage blocks/MACs/bytes) plus down-weighted `GeneEncoder` one-hots, so the
network starts from good inductive bias rather than learning "more MACs = slower" from scratch. Target: standardised log-latency (relative errors).
Trained in plain numpy (full-batch AdamW, cosine schedule, the ensemble batched); the weights are
saved as arrays, never pickled.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.families import NetworkSpec
from hwnas.latency.analytic import FeatureCache, cached_features, feature_names, select_features
from hwnas.latency.base import LatencyPredictor, register
from hwnas.latency.encoding import GeneEncoder, encoder_from_dict

__all__ = ["MLPPredictor", "train_mlp", "mlp_forward", "mse_gradients"]

Weights = list[tuple[np.ndarray, np.ndarray]]


def train_mlp(x: np.ndarray, t: np.ndarray, hidden: int = 64, layers: int = 2, epochs: int = 500,
              lr: float = 3e-3, weight_decay: float = 1e-3, seeds: int = 3) -> list[Weights]:
    """Fit `seeds` MLPs x -> t (float64 [n, d] -> [n]) with MSE; returns their weights.

    Plain numpy: the ensemble members train side by side as one batched network (full-batch
    AdamW, cosine learning rate, SiLU), which for a few hundred rows is faster than a framework's
    per-step overhead and needs no torch at all."""
    n, d = x.shape
    dims = [d] + [hidden] * layers + [1]
    ws, bs = [], []
    for a, b in zip(dims[:-1], dims[1:]):
        bound = 1.0 / np.sqrt(a)
        ws.append(np.stack([np.random.default_rng([s, a, b]).uniform(-bound, bound, (a, b))
                            for s in range(seeds)]))
        bs.append(np.zeros((seeds, 1, b)))
    params = ws + bs
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    target = t.reshape(1, n, 1)
    for step in range(1, epochs + 1):
        gw, gb = mse_gradients(ws, bs, x, target)
        rate = lr * 0.5 * (1.0 + np.cos(np.pi * (step - 1) / epochs))
        for j, (p, g) in enumerate(zip(params, gw + gb)):
            m1[j] = beta1 * m1[j] + (1 - beta1) * g
            m2[j] = beta2 * m2[j] + (1 - beta2) * g * g
            if j < len(ws):
                p *= 1.0 - rate * weight_decay  # decoupled weight decay, weights only
            p -= rate * (m1[j] / (1 - beta1**step)) / (np.sqrt(m2[j] / (1 - beta2**step)) + eps)
    return [[(ws[i][s].copy(), bs[i][s, 0].copy()) for i in range(len(ws))] for s in range(seeds)]


def mse_gradients(ws: list[np.ndarray], bs: list[np.ndarray], x: np.ndarray, target: np.ndarray
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Gradients of each member's mean squared error w.r.t. its weights and biases (stacked over
    members: ws[i] [seeds, a, b], bs[i] [seeds, 1, b]; x [n, d]; target [1, n, 1]), by hand-written
    backprop through SiLU layers (tests/latency/test_predictors.py checks it against autograd)."""
    seeds, n, d = ws[0].shape[0], x.shape[0], x.shape[1]
    hs, zs = [np.broadcast_to(x, (seeds, n, d))], []  # forward, keeping pre-activations
    for i in range(len(ws)):
        z = hs[-1] @ ws[i] + bs[i]
        zs.append(z)
        if i < len(ws) - 1:
            hs.append(z / (1.0 + np.exp(-np.clip(z, -60, 60))))
    grad = 2.0 * (zs[-1] - target) / n  # d mean-squared-error / d output
    gw: list[np.ndarray] = [np.empty(0)] * len(ws)
    gb: list[np.ndarray] = [np.empty(0)] * len(ws)
    for i in range(len(ws) - 1, -1, -1):
        gw[i] = hs[i].transpose(0, 2, 1) @ grad
        gb[i] = grad.sum(axis=1, keepdims=True)
        if i:
            sig = 1.0 / (1.0 + np.exp(-np.clip(zs[i - 1], -60, 60)))
            grad = (grad @ ws[i].transpose(0, 2, 1)) * sig * (1.0 + zs[i - 1] * (1.0 - sig))
    return gw, gb


def mlp_forward(models: list[Weights], x: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """Mean output of the ensemble on x [n, d] (SiLU hidden activations).

    Evaluated in float32 in row chunks (cache-sized): 100k archs in a fraction of a second; the
    arithmetic is deterministic, so a loaded model predicts bit-identically."""
    n_layers = len(models[0])
    w0, b0, rest = _float32_weights(models)
    hidden = models[0][0][0].shape[1]
    out = np.empty(len(x))
    for lo in range(0, len(x), chunk):
        h0 = x[lo:lo + chunk].astype(np.float32) @ w0 + b0
        h0 *= 1.0 / (1.0 + np.exp(-np.clip(h0, -60, 60)))
        total = np.zeros(len(h0), dtype=np.float32)
        for s, layers in enumerate(rest):
            h = h0[:, s * hidden:(s + 1) * hidden]
            for j, (w, b) in enumerate(layers):
                h = h @ w + b
                if j < n_layers - 2:
                    h = h / (1.0 + np.exp(-np.clip(h, -60, 60)))
            total += h[:, 0]
        out[lo:lo + chunk] = total / len(models)
    return out


_F32: dict[int, tuple] = {}


def _float32_weights(models: list[Weights]) -> tuple[np.ndarray, np.ndarray, list]:
    """The ensemble's weights as `mlp_forward` uses them (first layers side by side: one wide
    matmul instead of one per member; float32), converted once per weight set rather than per call
    (a search calls the model ~500 times). Keyed by the arrays' identities, kept alive with them."""
    key = id(models)
    hit = _F32.get(key)
    if hit is not None and len(hit[0]) == len(models) and all(
            a is b for m_old, m_new in zip(hit[0], models) for (a, _), (b, _) in zip(m_old, m_new)):
        return hit[1]
    w0 = np.concatenate([w[0][0] for w in models], axis=1).astype(np.float32)
    b0 = np.concatenate([w[0][1] for w in models]).astype(np.float32)
    rest = [[(w.astype(np.float32), b.astype(np.float32)) for w, b in ws[1:]] for ws in models]
    if len(_F32) > 64:
        _F32.clear()
    _F32[key] = ([list(m) for m in models], (w0, b0, rest))
    return w0, b0, rest


def pack_models(models: list[Weights], prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}{i}.{j}.{name}": arr for i, weights in enumerate(models)
            for j, pair in enumerate(weights) for name, arr in zip(("w", "b"), pair)}


def unpack_models(arrays: Mapping[str, np.ndarray], prefix: str, n_models: int, n_layers: int
                  ) -> list[Weights]:
    return [[(np.asarray(arrays[f"{prefix}{i}.{j}.w"], dtype=np.float64),
              np.asarray(arrays[f"{prefix}{i}.{j}.b"], dtype=np.float64)) for j in range(n_layers)]
            for i in range(n_models)]


class InputScaler:
    """The learned models' shared input: standardised log analytic costs (the "full" feature set)
    next to the raw architecture one-hots scaled by `ENCODING_WEIGHT`.

    The costs carry most of the signal; standardising 150 sparse one-hots would let them drown it
    (an MLP on standardised one-hots + costs missed +-10% on 44% of held-out GPU rows, on scaled
    one-hots 0%). The small weight is a prior: details of the encoding correct the costs, not
    replace them."""

    ENCODING_WEIGHT = 0.25

    def __init__(self, net: NetworkSpec) -> None:
        self.net, self.family = net, net.family
        self.encoder = GeneEncoder(net.family)
        self.center = np.zeros(0)
        self.scale = np.zeros(0)

    def _costs(self, m: np.ndarray, cache: FeatureCache | None) -> np.ndarray:
        allf = cached_features(cache, m, self.net)
        return np.log(np.maximum(select_features(allf, "full", self.family), 1.0))

    def _raw(self, m: np.ndarray, cache: FeatureCache | None = None) -> np.ndarray:
        return np.concatenate([self.encoder(m), self._costs(m, cache)], axis=1)

    def fit(self, m: np.ndarray) -> np.ndarray:
        self.encoder = GeneEncoder.from_rows(self.family, m)
        raw = self._raw(m)
        width = self.encoder.width
        self.center = raw.mean(axis=0)
        self.scale = raw.std(axis=0)
        self.scale[self.scale < 1e-9] = 1.0
        self.center[:width] = 0.0
        self.scale[:width] = 1.0 / self.ENCODING_WEIGHT
        return (raw - self.center) / self.scale

    def __call__(self, m: np.ndarray, cache: FeatureCache | None = None) -> np.ndarray:
        return (self._raw(m, cache) - self.center) / self.scale

    def dot(self, m: np.ndarray, cache: FeatureCache | None, w: np.ndarray) -> np.ndarray:
        """``self(m, cache) @ w``. In a search, the encoding's share comes from the fused gather
        (`cache.encoder_dot`, tabulated from `encoder_dot_fn`) and only the costs' share is
        computed: the same value up to float re-association."""
        hit = getattr(cache, "encoder_dot", None)
        enc = hit(self) if hit is not None else None
        if enc is None:
            return self(m, cache) @ w
        width = self.encoder.width
        costs = self._costs(m, cache)
        return enc + ((costs - self.center[width:]) / self.scale[width:]) @ w[width:]

    def encoder_dot_fn(self, w: np.ndarray):
        """rows -> the encoding's share of ``self(m) @ w`` (additive per block: tabulable)."""
        width = self.encoder.width
        wenc = np.asarray(w[:width], dtype=np.float64) / self.scale[:width]
        shift = float((self.center[:width] / self.scale[:width]) @ w[:width])
        return lambda m: self.encoder(np.asarray(m)) @ wenc - shift

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {"encoder": self.encoder.to_dict()}, {"x_center": self.center, "x_scale": self.scale}

    def load(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        self.encoder = encoder_from_dict(state["encoder"], self.family)
        self.center = np.asarray(arrays["x_center"], dtype=np.float64)
        self.scale = np.asarray(arrays["x_scale"], dtype=np.float64)
        if len(self.center) != self.encoder.width + len(feature_names("full", self.family)):
            raise ValueError("input scaler does not match its encoder")


@register
class MLPPredictor(LatencyPredictor):
    """MLP ensemble on encoding + log analytic costs, predicting log-latency."""

    kind = "mlp"
    candidate_rank = 4

    @classmethod
    def candidates(cls, n_rows, *, auto, base, entries_lut, **kw):
        return [cls(**kw)] if not auto or n_rows >= 100 else []
    min_rows = 10

    def __init__(self, hidden: int = 64, layers: int = 2, epochs: int = 500, weight_decay: float = 1e-3,
                 seeds: int = 3, *, net: NetworkSpec) -> None:
        super().__init__(net=net)
        if hidden < 1 or layers < 1 or epochs < 1 or seeds < 1:
            raise InputError("MLP hidden, layers, epochs and seeds must be positive")
        self.hidden, self.layers, self.epochs = int(hidden), int(layers), int(epochs)
        self.weight_decay, self.seeds = float(weight_decay), int(seeds)
        self.inputs = InputScaler(net)
        self.models: list[Weights] = []
        self.t_center, self.t_scale = 0.0, 1.0

    def get_params(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "layers": self.layers, "epochs": self.epochs,
                "weight_decay": self.weight_decay, "seeds": self.seeds}

    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        x = self.inputs.fit(m)
        t = np.log(y)
        self.t_center, self.t_scale = float(t.mean()), float(max(t.std(), 1e-6))
        self.models = train_mlp(x, (t - self.t_center) / self.t_scale, self.hidden, self.layers,
                                self.epochs, weight_decay=self.weight_decay, seeds=self.seeds)

    def _predict(self, m: np.ndarray) -> np.ndarray:
        return self._predict_cached(m, FeatureCache(m))

    def _predict_cached(self, m: np.ndarray, cache: FeatureCache) -> np.ndarray:
        return np.exp(mlp_forward(self.models, self.inputs(m, cache)) * self.t_scale + self.t_center)

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        state, arrays = self.inputs.state()
        state.update(t_center=self.t_center, t_scale=self.t_scale)
        return state, {**arrays, **pack_models(self.models, "mlp")}

    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        self.inputs.load(state, arrays)
        self.t_center, self.t_scale = float(state["t_center"]), float(state["t_scale"])
        self.models = unpack_models(arrays, "mlp", self.seeds, self.layers + 1)
