"""`LatencyPredictor`: the small base every latency predictor implements, and its file format.

A predictor maps subnets to milliseconds on one device: ``fit(archs, ms)``, ``predict(archs)``
(vectorised: a list of archs or the flat int matrix of the family named in ``meta.family``), ``save`` and
`load_predictor`. Subclasses implement `_fit`/`_predict` on int64 matrices and `_state`/`_from_state`.

File format (never pickle): ``PRED.json`` holds the kind, hyperparameters, metadata and every
small value; arrays go to ``PRED.npz`` beside it (read with ``allow_pickle=False``)::

    {"format": "hwnas-latency-predictor", "version": 2, "kind": "analytic",
     "params": {...hyperparameters...}, "meta": {...}, "state": {...}, "arrays": "PRED.npz"}

Predictors that wrap another (hybrid, transfer) nest its ``{"kind", "params", "state"}`` in their
state and prefix its arrays with ``"<name>/"`` in the same npz. Version 2 files record every
layout they were fitted with (a lookup table's part types, an encoder's genes); version 1 files
still read, their layouts told by what they hold (`READ_VERSIONS`).
"""

from __future__ import annotations

import copy
import json
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from hwnas.errors import CheckpointError, InputError, shown
from hwnas.families import NetworkSpec
from hwnas.fileio import read_npz
from hwnas.latency.record import PredictorMeta

__all__ = ["LatencyPredictor", "PredictorMeta", "ArchLike", "register", "predictor_class",
           "predictor_kinds", "load_predictor", "family_matrix", "FORMAT", "VERSION"]

FORMAT = "hwnas-latency-predictor"
VERSION = 2
#: the versions `load_predictor` reads: 1 left layouts implicit (a nameless family was the first;
#: its lookup tables and encoders had their own layouts, recognised by their shapes and keys)
READ_VERSIONS = (1, 2)
ArchLike = Sequence[Any] | np.ndarray  # archs of the predictor's family, or their flat int rows
P = TypeVar("P", bound="LatencyPredictor")
_REGISTRY: dict[str, type[LatencyPredictor]] = {}


def register(cls: type[P]) -> type[P]:
    """Class decorator: make `cls` loadable by its `kind`."""
    _REGISTRY[cls.kind] = cls
    return cls


#: the modules of the built-in kinds (each registers its class on import), by name: the base knows
#: no kind, as the families registry names its families
_BUILTIN_KINDS = ("hwnas.latency.analytic", "hwnas.latency.lut", "hwnas.latency.mlp", "hwnas.latency.hybrid",
                  "hwnas.latency.transfer")


def _ensure_registered() -> None:
    import importlib

    for name in _BUILTIN_KINDS:
        importlib.import_module(name)


def predictor_class(kind: str) -> type[LatencyPredictor]:
    _ensure_registered()
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise InputError(f"unknown latency predictor kind {kind!r}; known: "
                         f"{', '.join(sorted(_REGISTRY))}") from None


def predictor_kinds() -> list[str]:
    _ensure_registered()
    return sorted(_REGISTRY)


def candidate_classes() -> list[type[LatencyPredictor]]:
    """The registered kinds `fit_best` chooses among, simplest first."""
    _ensure_registered()
    ranked = [c for c in _REGISTRY.values() if c.candidate_rank is not None]
    return sorted(ranked, key=lambda c: c.candidate_rank)


def check_targets(ms: Any, n: int) -> np.ndarray:
    """Latencies as float64 [n]; every value finite and positive (predictors work in log space)."""
    y = np.asarray(ms, dtype=np.float64).reshape(-1)
    if len(y) != n:
        raise InputError(f"got {n} archs but {len(y)} latencies")
    bad = ~np.isfinite(y) | (y <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"latency #{i + 1} is {shown(y[i])}; latencies must be positive milliseconds")
    return y


_SINGLE_DEPTH = 0
_SINGLE_LOCK = threading.Lock()


@contextmanager
def single_thread() -> Iterator[None]:
    """Run BLAS single-threaded: the matrices here are small, and on a busy 2-core machine a
    2-thread BLAS made the ridge fits 25x slower. No-op when threadpoolctl is missing.

    Re-entrant and cheap when nested: BLAS thread limits are process-wide, so only the outermost
    scope sets and restores them. (Setting them scans the loaded libraries, ~3 ms: a search
    calling `predict` every generation inside `evolution_search`'s own scope spent most of its
    latency-cost time there.)"""
    global _SINGLE_DEPTH
    with _SINGLE_LOCK:
        outer = _SINGLE_DEPTH == 0
        _SINGLE_DEPTH += 1
    try:
        if not outer:
            yield
            return
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - comes with scikit-learn
            yield
            return
        with threadpool_limits(1):
            yield
    finally:
        with _SINGLE_LOCK:
            _SINGLE_DEPTH -= 1


class LatencyPredictor(ABC):
    """Predicts one device's latency (ms) of one family's subnets (`meta.family`): rows are that
    family's flat int matrix."""

    kind: ClassVar[str]
    #: fewest rows `fit` accepts
    min_rows: ClassVar[int] = 2
    #: where the kind's candidates stand in `fit_best`'s list (simplest first; None: not a candidate)
    candidate_rank: ClassVar[int | None] = None

    @classmethod
    def candidates(cls, n_rows: int, *, auto: bool, base: "LatencyPredictor | None",
                   entries_lut: "LatencyPredictor | None", **kw: Any) -> list["LatencyPredictor"]:
        """This kind's unfitted candidates for `n_rows` training rows (`auto`: the kinds were not
        restricted, so leave out what does not suit so few rows); `kw` = net."""
        return []

    def __init__(self, *, net: NetworkSpec) -> None:
        self.meta = PredictorMeta(family=net.family, width_mult=net.width_mult, n_classes=net.n_classes)
        self._fitted = False

    # -- hyperparameters -----------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """JSON-able constructor arguments (besides `net`)."""
        return {}

    def clone(self: P) -> P:
        """An unfitted copy with the same hyperparameters and layout."""
        return type(self)(net=self.meta.net, **copy.deepcopy(self.get_params()))

    def describe(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.get_params().items()
                           if not isinstance(v, (dict, list)))
        return f"{self.kind}({params})"

    # -- fit / predict -------------------------------------------------------------------
    @property
    def fitted(self) -> bool:
        """Whether it has coefficients (from `fit`, or loaded)."""
        return self._fitted

    def as_matrix(self, archs: ArchLike) -> np.ndarray:
        """`archs` as the int matrix of the predictor's family (the checks and conversion `fit` and
        `predict` make)."""
        return family_matrix(self.meta.family, archs, self.meta.width_mult)

    def fit(self: P, archs: ArchLike, ms: Any) -> P:
        """Fit to measured latencies `ms` (milliseconds, one per arch); returns self."""
        m = self.as_matrix(archs)
        y = check_targets(ms, len(m))
        if len(m) < self.min_rows:
            raise InputError(f"{self.kind} predictor needs at least {self.min_rows} measured "
                             f"subnets, got {len(m)}")
        with single_thread():
            self._fit(m, y)
        self.meta.n_train = int(len(m))
        self._fitted = True
        return self

    def predict(self, archs: ArchLike) -> np.ndarray:
        """Predicted milliseconds, float64 [n]."""
        if not self._fitted:
            raise InputError(f"this {self.kind} predictor is not fitted yet; call fit() first")
        m = self.as_matrix(archs)
        if len(m) == 0:
            return np.zeros(0)
        with single_thread():
            return np.asarray(self._predict(m), dtype=np.float64)

    @abstractmethod
    def _fit(self, m: np.ndarray, y: np.ndarray) -> None:
        """Fit on the family's flat rows `m` (int64, `Family.check_model_rows`) and positive
        latencies `y`."""

    @abstractmethod
    def _predict(self, m: np.ndarray) -> np.ndarray:
        """Milliseconds for flat rows `m`."""

    def predict_with_cache(self, m: np.ndarray, cache: Any) -> np.ndarray:
        """Milliseconds for checked flat rows `m`, reusing the features a caller already gathered
        in `cache` (the search's fused gather); kinds override the hook `_predict_cached`."""
        return self._predict_cached(m, cache)

    def _predict_cached(self, m: np.ndarray, cache: Any) -> np.ndarray:
        """`_predict` reusing the analytic features in `cache` (`hwnas.latency.analytic.FeatureCache`)
        when the kind uses them; wrappers call this on their base so both share one pass."""
        return self._predict(m)

    def _predict_part(self, m: np.ndarray, cache: Any) -> np.ndarray:
        """What a wrapper (hybrid, transfer) calls on its base: the base's milliseconds from the
        search's fused gather when it tabulated them there (`cache.tabulated`), else
        `_predict_cached`."""
        hit = getattr(cache, "tabulated", None)
        got = hit(self) if hit is not None else None
        return got if got is not None else self._predict_cached(m, cache)

    # -- persistence ---------------------------------------------------------------------
    @abstractmethod
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able fitted values, named arrays)."""

    @abstractmethod
    def _load_state(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Inverse of `_state` on an unfitted instance built from the saved params."""

    def to_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON document without the arrays file name, arrays)."""
        if not self._fitted:
            raise InputError(f"cannot save an unfitted {self.kind} predictor; fit it first")
        state, arrays = self._state()
        doc = {"format": FORMAT, "version": VERSION, "kind": self.kind, "params": self.get_params(),
               "meta": self.meta.to_dict(), "state": state}
        return doc, arrays

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> LatencyPredictor:
        """Build any kind from a document (dispatching on ``doc["kind"]``)."""
        kind = doc.get("kind")
        if not isinstance(kind, str):
            raise CheckpointError("latency predictor document has no 'kind'")
        klass = predictor_class(kind)
        meta = PredictorMeta.from_dict(doc.get("meta") or {})
        params = dict(doc.get("params") or {})
        obj = klass(net=meta.net, **params)
        obj.meta = meta
        obj._load_state(doc.get("state") or {}, arrays)
        obj._fitted = True
        return obj

    def save(self, path: str | Path) -> Path:
        """Write ``path`` (JSON) and, when there are arrays, ``path`` with suffix .npz, atomically."""
        from hwnas.fileio import atomic_path, atomic_write_json

        path = Path(path)
        doc, arrays = self.to_dict()
        npz = path.with_suffix(".npz")
        if arrays:
            with atomic_path(npz, suffix=".npz") as tmp:
                with open(tmp, "wb") as f:
                    np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})
            doc["arrays"] = npz.name
        else:
            doc["arrays"] = None
        atomic_write_json(path, doc)
        return path

    @classmethod
    def load(cls, path: str | Path) -> LatencyPredictor:
        obj = load_predictor(path)
        if cls is not LatencyPredictor and not isinstance(obj, cls):
            raise CheckpointError(f"{path} holds a '{obj.kind}' predictor, not '{cls.kind}'")
        return obj

    def __repr__(self) -> str:
        state = f"n_train={self.meta.n_train}" if self._fitted else "unfitted"
        return f"<{type(self).__name__} {self.describe()} {state}>"


def family_matrix(family: str, archs: ArchLike, width_mult: float) -> np.ndarray:
    """`family`'s int64 flat rows (`Family.check_model_rows`) from its int matrix or a list of its
    archs (each at `width_mult`)."""
    from hwnas.families import get_family

    fam = get_family(family)
    if not isinstance(archs, np.ndarray):
        archs = list(archs)
        for a in archs:
            if getattr(a, "family_name", None) != fam.name:
                what = getattr(a, "family_name", None) or type(a).__name__
                raise InputError(f"this predictor is for {fam.name} subnets, got a {what} arch")
            if abs(a.w - width_mult) > 1e-9:
                raise InputError(f"archs have width multiplier {a.w} but this predictor is for "
                                 f"width_mult={width_mult}")
        archs = np.asarray([a.to_row() for a in archs], dtype=np.int64).reshape(-1, len(fam.flat_columns()))
    return fam.check_model_rows(archs)


# -- nested predictors ---------------------------------------------------------------------------
def nested_state(pred: LatencyPredictor, prefix: str
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A wrapped predictor's document (minus format fields) and its arrays under `prefix`/."""
    doc, arrays = pred.to_dict()
    return ({k: doc[k] for k in ("kind", "params", "meta", "state")},
            {f"{prefix}/{k}": v for k, v in arrays.items()})


def load_nested(doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray], prefix: str
                ) -> LatencyPredictor:
    sub = {k[len(prefix) + 1:]: v for k, v in arrays.items() if k.startswith(prefix + "/")}
    return LatencyPredictor.from_dict(doc, sub)


def load_predictor(path: str | Path) -> LatencyPredictor:
    """Load any predictor written by `LatencyPredictor.save` (dispatches on its "kind")."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"latency predictor {path} does not exist")
    def no_nan(constant: str) -> Any:
        raise ValueError(f"{constant} is not a number a saved predictor can hold")

    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=no_nan)
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise CheckpointError(f"{path} is not a latency predictor (not valid JSON: "
                              f"{str(err).splitlines()[0]}); refit it with `hwnas latency fit`"
                              ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an hwnas latency predictor (no \"format\": "
                              f"\"{FORMAT}\"); write one with `hwnas latency fit`")
    if doc.get("version") not in READ_VERSIONS:
        raise CheckpointError(f"{path} is a version {doc.get('version')} latency predictor; this "
                              f"hwnas reads version {VERSION}; refit it with `hwnas latency fit`")
    arrays = read_npz(path.parent / str(doc["arrays"]), path) if doc.get("arrays") else {}
    for name, array in arrays.items():  # NaN weights would make every prediction NaN
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            raise CheckpointError(f"arrays file {doc['arrays']} of {path} holds NaN or infinite "
                                  f"values in '{name}'; the predictor is damaged: refit it with "
                                  "`hwnas latency fit`")
    try:
        return LatencyPredictor.from_dict(doc, arrays)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise CheckpointError(f"{path} is a damaged '{doc.get('kind')}' predictor "
                              f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                              "refit it") from None
