"""Accuracy predictors: top-1 (%) of a subnet from its architecture, with an uncertainty.

Every kind fits in seconds on a few hundred rows, predicts with numpy (a search scores tens of
thousands of subnets per second), knows its own spread, and never extrapolates: predictions are
clipped to the range of top-1 the table it was fitted on holds (`clip`), and a search is told so.

- ``ridge`` (features "compact" or "full"): Bayesian ridge regression; the penalty is chosen by
  exact leave-one-out error, the uncertainty is the posterior predictive standard deviation.
- ``gp``: a Gaussian process on the compact features (RBF kernel, hyperparameters by marginal
  likelihood); the uncertainty is its posterior standard deviation.
- ``mlp-ensemble``: five small MLPs, each with weight decay and early stopping on its own held-out
  rows; the prediction is their mean and the uncertainty their spread.
- ``mlp``: Once-for-All's single 3x400 MLP on the one-hot encoding, kept as a baseline: on small
  tables it memorises (train RMSE ~0) and loses to the others out of fold.

Saved as JSON (kind, settings, scalars, the space and its family) + .npz (arrays, sha256 in the
JSON); never pickled. Files without a family (written before families existed) are the default family's.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Mapping

import numpy as np

from hwnas.accuracy.features import arch_features
from hwnas.errors import CheckpointError, InputError
from hwnas.fileio import atomic_path, atomic_write_json, read_npz

__all__ = ["AccuracyPredictor", "RidgePredictor", "MLPEnsemblePredictor", "OFAMLPPredictor",
           "GaussianProcessPredictor", "accuracy_predictor_kinds", "make_accuracy_predictor", "load_predictor_file"]

FORMAT = "hwnas-accuracy-predictor"
VERSION = 3  # 3: compact features carry r's levels (older files are refitted)
_REGISTRY: dict[str, type["AccuracyPredictor"]] = {}


def accuracy_predictor_kinds() -> list[str]:
    return list(_REGISTRY)


def candidate_classes() -> list[type["AccuracyPredictor"]]:
    """The registered kinds the out-of-fold selection chooses among, simplest first."""
    return sorted((c for c in _REGISTRY.values() if c.candidate_rank is not None),
                  key=lambda c: c.candidate_rank)


def make_accuracy_predictor(kind: str, space, n_classes: int = 10, **settings: Any
                            ) -> "AccuracyPredictor":
    if kind not in _REGISTRY:
        raise InputError(f"unknown accuracy predictor {kind!r}; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[kind](space, n_classes, **settings)


class AccuracyPredictor(ABC):
    """Template: subclasses implement `_fit(x, y)`, `_predict(x) -> (mean, std)` and the state
    they persist; this base owns features, clipping, uncertainty scale and persistence."""

    kind: ClassVar[str]
    feature_set: ClassVar[str] = "full"
    #: where the kind's candidates stand in the out-of-fold selection (simplest first; None: not a
    #: candidate, e.g. Once-for-All's 3x400 MLP, which costs more than all the others together and
    #: memorises small tables -- `hwnas accuracy eval` can still score it)
    candidate_rank: ClassVar[int | None] = None

    @classmethod
    def candidates(cls, n_rows: int) -> list[tuple[str, dict[str, Any]]]:
        """This kind's (kind, settings) candidates for a table of `n_rows`."""
        return [(cls.kind, {"features": f}) for f in ("compact", "full")]

    def __init__(self, space, n_classes: int = 10, **settings: Any):
        """`space`: the run's space, any family (the family's space interface)."""
        self.space, self.n_classes = space, int(n_classes)
        self.settings: dict[str, Any] = dict(settings)
        self.clip: tuple[float, float] = (0.0, 100.0)
        self.std_scale = 1.0  # calibrates the raw spread on out-of-fold errors (select.py)
        self.meta: dict[str, Any] = {}
        self.x_mean: np.ndarray | None = None
        self.x_std: np.ndarray | None = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "kind" in cls.__dict__:  # concrete kinds register; shared bases do not
            _REGISTRY[cls.kind] = cls

    @property
    def name(self) -> str:
        return self.kind

    @property
    def out_of_fold(self) -> dict[str, Any] | None:
        """The out-of-fold metrics its selection measured (mae, bias, kendall_tau, ...), if any."""
        oof = self.meta.get("metrics", {}).get("oof") if isinstance(self.meta.get("metrics"), dict) else None
        return oof if isinstance(oof, dict) else None

    # -- features ---------------------------------------------------------------------------
    def features(self, archs) -> np.ndarray:
        return arch_features(self.space, archs, self.settings.get("features", self.feature_set), self.n_classes)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        return (x - self.x_mean) / self.x_std

    # -- fit / predict ----------------------------------------------------------------------
    def fit(self, archs, top1, *, seed: int = 0) -> "AccuracyPredictor":
        x = self.features(archs)
        y = np.asarray(top1, dtype=np.float64)
        if len(x) != len(y):
            raise InputError(f"got {len(x)} archs but {len(y)} accuracies")
        if len(y) < 3:
            raise InputError(f"fitting an accuracy predictor needs at least 3 subnets, got {len(y)}")
        if not np.all(np.isfinite(y)) or y.min() < 0 or y.max() > 100:
            raise InputError("top-1 values must be finite percentages within [0, 100]")
        self.x_mean = x.mean(0)
        self.x_std = np.where(x.std(0) > 1e-9, x.std(0), 1.0)
        self.clip = (float(y.min()), float(y.max()))
        self.meta["n_train"] = int(len(y))
        self._fit(self._standardise(x), y, seed)
        return self

    def predict_with_std(self, archs) -> tuple[np.ndarray, np.ndarray]:
        """(top-1 %, one-sigma uncertainty in points) of many archs; top-1 clipped to `clip`."""
        if self.x_mean is None:
            raise InputError("this accuracy predictor is not fitted yet")
        mean, std = self._predict(self._standardise(self.features(archs)))
        return np.clip(mean, *self.clip), std * self.std_scale

    def predict(self, archs) -> np.ndarray:
        return self.predict_with_std(archs)[0]

    def feature_set_name(self) -> str:
        return self.settings.get("features", self.feature_set)

    def predict_features_with_std(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`predict_with_std` from features already computed (`features`, or gathered by a search
        from `hwnas.search.tabulate.accuracy_feature_table`)."""
        if self.x_mean is None:
            raise InputError("this accuracy predictor is not fitted yet")
        mean, std = self._predict(self._standardise(x))
        return np.clip(mean, *self.clip), std * self.std_scale

    @abstractmethod
    def _fit(self, x: np.ndarray, y: np.ndarray, seed: int) -> None: ...

    @abstractmethod
    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    @abstractmethod
    def _arrays(self) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def _load_arrays(self, arrays: Mapping[str, np.ndarray], doc: Mapping[str, Any]) -> None: ...

    def _scalars(self) -> dict[str, Any]:
        return {}

    # -- persistence ------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """``path`` (JSON) + ``path`` with suffix .npz (the arrays), both atomically."""
        path = Path(path)
        npz = path.with_suffix(".npz")
        arrays = {"x_mean": self.x_mean, "x_std": self.x_std, **self._arrays()}
        with atomic_path(npz, suffix=".npz") as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        doc = {"format": FORMAT, "version": VERSION, "kind": self.kind, "target": "top1",
               "family": self.space.family.name, "space": self.space.to_dict(), "n_classes": self.n_classes, "settings": self.settings,
               "clip": list(self.clip), "std_scale": self.std_scale, **self._scalars(),
               "meta": self.meta, "arrays": npz.name, "sha256": digest}
        atomic_write_json(path, doc)
        return path

    @staticmethod
    def load(path: str | Path) -> "AccuracyPredictor":
        return load_predictor_file(path)


def load_predictor_file(path: str | Path) -> AccuracyPredictor:
    """Any saved accuracy predictor; one-line errors for missing, foreign or damaged files."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"accuracy predictor {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is not an accuracy predictor (not valid JSON: "
                              f"{str(err).splitlines()[0]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise CheckpointError(f"{path} is not a version-{VERSION} hwnas accuracy predictor; "
                              "refit it with `hwnas accuracy fit --run DIR`")
    arrays = read_npz(path.parent / str(doc.get("arrays")), path)
    from hwnas.errors import HwnasError
    from hwnas.families import DEFAULT_FAMILY, get_family

    try:
        space = get_family(str(doc.get("family", DEFAULT_FAMILY))).space_from_dict(doc["space"])
    except (HwnasError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path} is a damaged accuracy predictor (its space: {err}); refit it with "
                              "`hwnas accuracy fit --run DIR`") from None
    try:
        pred = make_accuracy_predictor(doc["kind"], space,
                                       doc["n_classes"], **doc.get("settings", {}))
        pred.x_mean, pred.x_std = np.asarray(arrays["x_mean"]), np.asarray(arrays["x_std"])
        pred.clip = (float(doc["clip"][0]), float(doc["clip"][1]))
        pred.std_scale, pred.meta = float(doc["std_scale"]), dict(doc.get("meta") or {})
        pred._load_arrays(arrays, doc)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise CheckpointError(f"{path} is a damaged accuracy predictor ({type(err).__name__}: "
                              f"{err}); refit it with `hwnas accuracy fit --run DIR`") from None
    if pred.x_mean.shape[0] != pred.features([pred.space.min_arch()]).shape[1]:
        raise CheckpointError(f"{path} was fitted on other features than this space encodes; refit it")
    return pred


# -- ridge -----------------------------------------------------------------------------------
class RidgePredictor(AccuracyPredictor):
    kind = "ridge"
    candidate_rank = 0
    feature_set = "compact"
    ALPHAS = np.logspace(-3, 4, 29)

    @property
    def name(self) -> str:
        return f"ridge[{self.settings.get('features', self.feature_set)}]"

    def _fit(self, x: np.ndarray, y: np.ndarray, seed: int) -> None:
        n, p = x.shape
        self.y_mean = float(y.mean())
        yc = y - self.y_mean
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        uty = u.T @ yc
        best = (np.inf, 1.0)
        for a in self.ALPHAS:  # exact leave-one-out error of each penalty, from one SVD
            shrink = s**2 / (s**2 + a)
            fitted = u @ (shrink * uty)
            hat = (u**2) @ shrink + 1.0 / n  # + the intercept's leverage
            loo = (yc - fitted) / np.maximum(1.0 - hat, 1e-6)
            best = min(best, (float(np.mean(loo**2)), float(a)))
        self.alpha = best[1]
        a = self.alpha
        self.coef = vt.T @ ((s / (s**2 + a)) * uty)
        dof = float(np.sum(s**2 / (s**2 + a))) + 1.0
        resid = yc - x @ self.coef
        self.sigma2 = float(resid @ resid / max(n - dof, 1.0))
        self.cov = np.linalg.inv(x.T @ x + a * np.eye(p))  # posterior covariance / sigma^2
        self.meta["alpha"] = self.alpha

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = x @ self.coef + self.y_mean
        quad = np.sum((x @ self.cov) * x, axis=1)  # x^T C x per row (a BLAS matmul, not einsum's loop)
        var = self.sigma2 * (1.0 / max(self.meta.get("n_train", 1), 1) + quad)
        return mean, np.sqrt(np.maximum(var, 0.0))

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"coef": self.coef, "cov": self.cov}

    def _scalars(self) -> dict[str, Any]:
        return {"y_mean": self.y_mean, "sigma2": self.sigma2, "alpha": self.alpha}

    def _load_arrays(self, arrays, doc) -> None:
        self.coef, self.cov = np.asarray(arrays["coef"]), np.asarray(arrays["cov"])
        self.y_mean, self.sigma2, self.alpha = float(doc["y_mean"]), float(doc["sigma2"]), float(doc["alpha"])


# -- Gaussian process ------------------------------------------------------------------------
class GaussianProcessPredictor(AccuracyPredictor):
    """Exact Gaussian process on the standardised compact features: one RBF length scale, signal
    and noise variance by maximum marginal likelihood (a few starts). Out of fold on the shipped
    Fashion-MNIST supernet's 100-row table it ranked subnets better than ridge (tau 0.80 vs 0.78,
    MAE 0.40 vs 0.46 points): top-1 saturates in r and in size, which a smooth kernel follows and a
    linear model cannot. The noise variance absorbs the evaluation's own noise, and the posterior
    spread grows away from the table (a search is told where it extrapolates)."""

    kind = "gp"
    candidate_rank = 1
    feature_set = "compact"
    max_rows = 2000  # O(n^3) fit; beyond this ridge and the MLP ensemble are the candidates

    @classmethod
    def candidates(cls, n_rows: int) -> list[tuple[str, dict[str, Any]]]:
        return [(cls.kind, {"features": "compact"})] if n_rows <= cls.max_rows else []

    @property
    def name(self) -> str:
        return f"gp[{self.settings.get('features', self.feature_set)}]"

    def _fit(self, x: np.ndarray, y: np.ndarray, seed: int) -> None:
        from scipy.optimize import minimize

        self.y_mean, self.y_std = float(y.mean()), float(y.std()) or 1.0
        yt = (y - self.y_mean) / self.y_std
        d2 = _sq_dist(x, x)
        scale = np.sqrt(max(x.shape[1], 1))
        best = None
        for start in (0.3, 1.0, 3.0):  # log length scale, log signal and log noise variance
            theta0 = np.log([start * scale, 1.0, 0.1])
            res = minimize(_gp_nll, theta0, args=(d2, yt), method="L-BFGS-B",
                           bounds=[(np.log(0.05 * scale), np.log(100 * scale)), (np.log(1e-2), np.log(1e2)),
                                   (np.log(1e-4), np.log(2.0))])
            if best is None or res.fun < best.fun:
                best = res
        self.length, self.signal, self.noise = (float(v) for v in np.exp(best.x))
        self.x_train = x
        chol = np.linalg.cholesky(_gp_kernel(d2, self.length, self.signal) + self.noise * np.eye(len(x)))
        self._set_chol(chol)
        self.alpha = _chol_solve(chol, yt)
        self.meta.update(length_scale=self.length, signal_var=self.signal, noise_var=self.noise)

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = _gp_kernel(_sq_dist(x, self.x_train), self.length, self.signal)
        mean = k @ self.alpha
        # L^-1 k^T as one product, in float32 where that is safe (`_set_chol`): it is most of a
        # search's ~500 calls' cost
        v = (self.chol_inv @ k.T.astype(self.chol_inv.dtype)).astype(np.float64)
        var = np.maximum(self.signal + self.noise - np.sum(v * v, axis=0), 0.0)
        return mean * self.y_std + self.y_mean, np.sqrt(var) * self.y_std

    def _set_chol(self, chol: np.ndarray) -> None:
        """The Cholesky factor and its inverse, computed once (before any search's clock starts).
        float32 only where the kernel is well conditioned: with signal >> noise the variance is a
        small difference of large numbers, which float32 would round to zero."""
        self.chol = chol
        inverse = np.linalg.solve(chol, np.eye(len(chol)))
        self.chol_inv = inverse.astype(np.float32) if self.signal < 1e3 * self.noise else inverse

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"x_train": self.x_train, "alpha": self.alpha, "chol": self.chol}

    def _scalars(self) -> dict[str, Any]:
        return {"y_mean": self.y_mean, "y_std": self.y_std, "length": self.length, "signal": self.signal,
                "noise": self.noise}

    def _load_arrays(self, arrays, doc) -> None:
        self.x_train, self.alpha = np.asarray(arrays["x_train"]), np.asarray(arrays["alpha"])
        self.y_mean, self.y_std = float(doc["y_mean"]), float(doc["y_std"])
        self.length, self.signal, self.noise = float(doc["length"]), float(doc["signal"]), float(doc["noise"])
        self._set_chol(np.asarray(arrays["chol"]))


def _sq_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0)


def _gp_kernel(d2: np.ndarray, length: float, signal: float) -> np.ndarray:
    return signal * np.exp(-0.5 * d2 / length**2)


def _chol_solve(chol: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.linalg import cho_solve

    return cho_solve((chol, True), y)


def _gp_nll(theta: np.ndarray, d2: np.ndarray, y: np.ndarray) -> float:
    """Negative log marginal likelihood of standardised targets (constant dropped)."""
    length, signal, noise = np.exp(theta)
    try:
        chol = np.linalg.cholesky(_gp_kernel(d2, length, signal) + (noise + 1e-8) * np.eye(len(y)))
    except np.linalg.LinAlgError:
        return 1e10
    return float(0.5 * y @ _chol_solve(chol, y) + np.log(np.diag(chol)).sum())


# -- MLPs ------------------------------------------------------------------------------------
def _train_mlp(x: np.ndarray, y: np.ndarray, hidden: tuple[int, ...], *, epochs: int, lr: float,
               weight_decay: float, seed: int, x_val: np.ndarray | None = None,
               y_val: np.ndarray | None = None, batch_size: int = 128) -> list[tuple[np.ndarray, np.ndarray]]:
    """Adam + cosine schedule on MSE; with a validation set, the weights of the best validation
    epoch are kept (early stopping). Returns [(W [in, out], b [out]), ...]."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: more threads only add synchronisation
    try:
        return _train_mlp_1t(x, y, hidden, epochs=epochs, lr=lr, weight_decay=weight_decay, seed=seed,
                             x_val=x_val, y_val=y_val, batch_size=batch_size)
    finally:
        torch.set_num_threads(threads)


def _train_mlp_1t(x, y, hidden, *, epochs, lr, weight_decay, seed, x_val, y_val, batch_size):
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    sizes = [x.shape[1], *hidden, 1]
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    xt, yt = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.float32))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    n_batches = max(1, -(-len(x) // batch_size))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, epochs * n_batches))
    val = None if x_val is None or not len(x_val) else (torch.from_numpy(x_val.astype(np.float32)),
                                                         torch.from_numpy(y_val.astype(np.float32)))
    best_loss, best_state = np.inf, None
    for epoch in range(epochs):
        net.train()
        for idx in torch.randperm(len(x), generator=gen).split(batch_size):
            loss = torch.nn.functional.mse_loss(net(xt[idx]).squeeze(1), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if val is not None and (epoch % 5 == 4 or epoch == epochs - 1):
            with torch.no_grad():
                v = float(torch.nn.functional.mse_loss(net(val[0]).squeeze(1), val[1]))
            if v < best_loss:
                best_loss, best_state = v, {k: t.clone() for k, t in net.state_dict().items()}
    if best_state is not None:
        net.load_state_dict(best_state)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    return [(m.weight.detach().double().numpy().T.copy(), m.bias.detach().double().numpy().copy())
            for m in linears]


def _ensemble_forward(stacked: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, n_members: int) -> np.ndarray:
    """(members, rows) outputs of ReLU MLPs stacked by `_MLPFamily._stacked`: the first layer of
    every member in one product, each further layer as one batched product over the members."""
    (w, b), rest = stacked[0], stacked[1:]
    h = (x @ w + b).reshape(len(x), n_members, -1).transpose(1, 0, 2)
    for w, b in rest:
        h = np.maximum(h, 0.0) @ w + b
    return h[:, :, 0]


class _MLPFamily(AccuracyPredictor):
    """Shared state of MLP kinds: `members` lists of layers, targets standardised."""

    members: list[list[tuple[np.ndarray, np.ndarray]]]

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        outs = _ensemble_forward(self._stacked(), x, len(self.members)) * self.y_std + self.y_mean
        std = outs.std(0) if len(outs) > 1 else np.zeros(outs.shape[1])
        return outs.mean(0), std

    def _stacked(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The members' layers stacked (first layer side by side, the others along a leading member
        axis), rebuilt when `members` changes: a search calls `_predict` ~500 times, and one product
        per layer for the whole ensemble costs a fraction of one per member."""
        if getattr(self, "_stack_of", None) is not self.members:
            first = (np.concatenate([m[0][0] for m in self.members], axis=1),
                     np.concatenate([m[0][1] for m in self.members]))
            rest = [(np.stack([m[i][0] for m in self.members]), np.stack([m[i][1] for m in self.members])[:, None])
                    for i in range(1, len(self.members[0]))]
            self._stack, self._stack_of = [first, *rest], self.members
        return self._stack

    def _arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for k, layers in enumerate(self.members):
            for i, (w, b) in enumerate(layers):
                out[f"m{k}_w{i}"], out[f"m{k}_b{i}"] = w, b
        return out

    def _scalars(self) -> dict[str, Any]:
        return {"y_mean": self.y_mean, "y_std": self.y_std, "n_members": len(self.members),
                "n_layers": len(self.members[0])}

    def _load_arrays(self, arrays, doc) -> None:
        self.y_mean, self.y_std = float(doc["y_mean"]), float(doc["y_std"])
        self.members = [[(np.asarray(arrays[f"m{k}_w{i}"]), np.asarray(arrays[f"m{k}_b{i}"]))
                         for i in range(int(doc["n_layers"]))] for k in range(int(doc["n_members"]))]

    def _targets(self, y: np.ndarray) -> np.ndarray:
        self.y_mean, self.y_std = float(y.mean()), float(y.std()) or 1.0
        return (y - self.y_mean) / self.y_std


class MLPEnsemblePredictor(_MLPFamily):
    kind = "mlp-ensemble"
    candidate_rank = 2
    min_rows = 150  # below this the ensembles cost seconds per fold and did not beat ridge here

    @classmethod
    def candidates(cls, n_rows: int) -> list[tuple[str, dict[str, Any]]]:
        return super().candidates(n_rows) if n_rows >= cls.min_rows else []

    def _fit(self, x: np.ndarray, y: np.ndarray, seed: int) -> None:
        s = {"members": 5, "hidden": (64, 64), "epochs": 300, "lr": 3e-3, "weight_decay": 1e-2,
             "val_fraction": 0.2, **self.settings}
        yt = self._targets(y)
        self.members = []
        for k in range(int(s["members"])):
            perm = np.random.default_rng([seed, k]).permutation(len(y))
            n_val = int(round(float(s["val_fraction"]) * len(y))) if len(y) >= 20 else 0
            val, tr = perm[:n_val], perm[n_val:]
            self.members.append(_train_mlp(x[tr], yt[tr], tuple(s["hidden"]), epochs=int(s["epochs"]),
                                           lr=float(s["lr"]), weight_decay=float(s["weight_decay"]),
                                           seed=seed * 1000 + k, x_val=x[val], y_val=yt[val]))


class OFAMLPPredictor(_MLPFamily):
    kind = "mlp"

    def _fit(self, x: np.ndarray, y: np.ndarray, seed: int) -> None:
        s = {"hidden": (400, 400, 400), "epochs": 300, "lr": 1e-3, "weight_decay": 1e-5, **self.settings}
        yt = self._targets(y)
        self.members = [_train_mlp(x, yt, tuple(s["hidden"]), epochs=int(s["epochs"]), lr=float(s["lr"]),
                                   weight_decay=float(s["weight_decay"]), seed=seed)]
