"""What an accuracy predictor sees of a subnet.

- ``full``: Once-for-All's one-hot encoding (kernel and expand per used slot, depth per stage,
  resolution) plus log MACs and log parameters. Expressive; needs a few hundred rows.
- ``compact``: 19 numbers a small table can support: per stage the depth, mean kernel and mean
  expand over used blocks, the resolution, log MACs and log parameters.

MACs and parameters are exact, from additive tables built once per space (`tabulate`), so a
search scores a population with a few gathers, not a network count per subnet.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from hwnas.errors import InputError
from hwnas.space import MAX_DEPTH, N_SLOTS, N_STAGES, SearchSpace

__all__ = ["FEATURE_SETS", "arch_features"]

FEATURE_SETS = ("full", "compact")


@functools.lru_cache(maxsize=16)
def _cost_tables(space_json: str, n_classes: int):
    from hwnas.search.tabulate import tabulate
    from hwnas.supernet.stats import stats_frame

    space = SearchSpace.from_dict(json.loads(space_json))

    def counter(what: str):
        return lambda m: stats_frame(np.asarray(m), space.width_mult, n_classes)[what].to_numpy(np.float64)

    return tuple(tabulate(counter(w), space) or counter(w) for w in ("macs", "params"))


@functools.lru_cache(maxsize=16)
def _both_table(space: SearchSpace, n_classes: int):
    """(MACs, params) as one bit-exact two-column table (one gather per batch), or None."""
    from hwnas.search.tabulate import tabulate_vector
    from hwnas.supernet.stats import stats_frame

    return tabulate_vector(lambda m: stats_frame(np.asarray(m), space.width_mult, n_classes)[["macs", "params"]]
                           .to_numpy(np.float64), space)


def _log_costs(space: SearchSpace, m: np.ndarray, n_classes: int) -> np.ndarray:
    both = _both_table(space, int(n_classes))
    if both is not None:
        return np.log(np.maximum(both.predict(m), 1.0))
    tables = _cost_tables(json.dumps(space.to_dict(), sort_keys=True), int(n_classes))
    cols = [t.predict(m) if hasattr(t, "predict") else t(m) for t in tables]
    return np.log(np.maximum(np.stack(cols, axis=1), 1.0))


def arch_features(space: SearchSpace, archs, feature_set: str = "full", n_classes: int = 10) -> np.ndarray:
    """float64 [n, F] features of many archs (a list of Arch or an int [n, 46] matrix)."""
    if feature_set not in FEATURE_SETS:
        raise InputError(f"unknown feature set {feature_set!r}; use one of {', '.join(FEATURE_SETS)}")
    m = space.to_matrix(archs)
    costs = _log_costs(space, m, n_classes)
    if feature_set == "full":
        return np.concatenate([space.encode(m, "onehot").astype(np.float64), costs], axis=1)
    n = len(m)
    ks, e, d = m[:, 1:21].reshape(n, N_STAGES, MAX_DEPTH), m[:, 21:41].reshape(n, N_STAGES, MAX_DEPTH), m[:, 41:46]
    used = np.arange(MAX_DEPTH)[None, None, :] < d[:, :, None]
    depth = np.maximum(d, 1)
    mean_k = (ks * used).sum(2) / depth
    mean_e = (e * used).sum(2) / depth
    assert N_SLOTS == N_STAGES * MAX_DEPTH
    return np.concatenate([d, mean_k, mean_e, m[:, :1], costs], axis=1).astype(np.float64)


def _pre_features(space: SearchSpace, m: np.ndarray, feature_set: str, n_classes: int) -> np.ndarray:
    """The additive raw material of `arch_features` (counts and sums per used block; MACs and
    parameters before the log): float64 [n, P]."""
    from hwnas.supernet.stats import stats_frame

    m = np.asarray(m)
    costs = stats_frame(m, space.width_mult, n_classes)[["macs", "params"]].to_numpy(np.float64)
    if feature_set == "full":
        return np.concatenate([space.encode(m, "onehot").astype(np.float64), costs], axis=1)
    n = len(m)
    ks, e, d = m[:, 1:21].reshape(n, N_STAGES, MAX_DEPTH), m[:, 21:41].reshape(n, N_STAGES, MAX_DEPTH), m[:, 41:46]
    used = np.arange(MAX_DEPTH)[None, None, :] < d[:, :, None]
    return np.concatenate([d, (ks * used).sum(2), (e * used).sum(2), m[:, :1], costs], axis=1).astype(np.float64)


def features_from_pre(pre: np.ndarray, feature_set: str) -> np.ndarray:
    """`arch_features` from `_pre_features` (gathered from `feature_table`): the same values."""
    costs = np.log(np.maximum(pre[:, -2:], 1.0))
    if feature_set == "full":
        return np.concatenate([pre[:, :-2], costs], axis=1)
    depth = np.maximum(pre[:, :N_STAGES], 1)
    return np.concatenate([pre[:, :N_STAGES], pre[:, N_STAGES:2 * N_STAGES] / depth,
                           pre[:, 2 * N_STAGES:3 * N_STAGES] / depth, pre[:, 3 * N_STAGES:-2], costs], axis=1)


@functools.lru_cache(maxsize=16)
def feature_table(space: SearchSpace, feature_set: str, n_classes: int):
    """An exact `hwnas.search.tabulate.VectorTable` of `_pre_features` over `space`, checked to give
    `arch_features` bit for bit through `features_from_pre`; None when it does not. A search
    gathers a batch's accuracy features from it (with the slot index its costs already derived)."""
    from hwnas.search.operators import sample_mixed
    from hwnas.search.tabulate import tabulate_vector

    if feature_set not in FEATURE_SETS:
        return None
    table = tabulate_vector(lambda m: _pre_features(space, m, feature_set, n_classes), space)
    if table is None:
        return None
    rows = sample_mixed(space, 512, np.random.default_rng(7))
    if not np.array_equal(features_from_pre(table.predict(rows), feature_set),
                          arch_features(space, rows, feature_set, n_classes)):
        return None
    return table
