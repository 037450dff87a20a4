"""What an accuracy predictor sees of a subnet.

- ``full``: Once-for-All's one-hot encoding (kernel and expand per used slot, depth per stage,
  resolution) plus log MACs and log parameters. Expressive; needs a few hundred rows.
- ``compact``: 19 numbers a small table can support: per stage the depth, mean kernel and mean
  expand over used blocks, the resolution, log MACs and log parameters.

MACs and parameters are exact, from additive tables built once per space (`tabulate`), so a
search scores a population with a few gathers, not a network count per subnet.

Other families (`hwnas.families`: ProxylessNAS, ResNet50) have no hand-made layout here: ``full``
is their space's one-hot `encode` plus log MACs and log parameters from the family's exact
vectorised `count_params_macs`; ``compact`` keeps the gene groups that are always active (depths,
ResNet's widths) as values and summarises the others (kernels, expand ratios) by the mean of their
active genes' values and how many are active, plus r and the two log costs. Both are computed on
whole int matrices (no tables).
"""

from __future__ import annotations

import functools
import json

import numpy as np

from hwnas.errors import InputError
from hwnas.space import MAX_DEPTH, N_SLOTS, N_STAGES, SearchSpace

__all__ = ["FEATURE_SETS", "arch_features", "is_mbv3", "params_macs"]

FEATURE_SETS = ("full", "compact")


def is_mbv3(space) -> bool:
    """True for OFA-MobileNetV3's `SearchSpace` (its hand-made layouts and exact tables apply)."""
    return isinstance(space, SearchSpace)


def params_macs(space, m: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact (params, MACs) as float64 [n] of int rows `m` of `space` (any family)."""
    if is_mbv3(space):
        from hwnas.supernet.stats import stats_frame

        df = stats_frame(np.asarray(m), space.width_mult, n_classes)
        return df["params"].to_numpy(np.float64), df["macs"].to_numpy(np.float64)
    m = np.asarray(m, dtype=np.int64)
    if not len(m):
        return np.zeros(0), np.zeros(0)
    params, macs = space.family.count_params_macs(m, space.width_mult, int(n_classes))
    return np.asarray(params, dtype=np.float64), np.asarray(macs, dtype=np.float64)


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


def arch_features(space, archs, feature_set: str = "full", n_classes: int = 10) -> np.ndarray:
    """float64 [n, F] features of many archs (a list of archs or the space's int matrix)."""
    if feature_set not in FEATURE_SETS:
        raise InputError(f"unknown feature set {feature_set!r}; use one of {', '.join(FEATURE_SETS)}")
    if not is_mbv3(space):
        return _generic_features(space, space.to_matrix(archs), feature_set, n_classes)
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


# -- other families: generic features from the space's matrix interface ---------------------------
@functools.lru_cache(maxsize=16)
def _generic_layout(space) -> tuple[tuple[np.ndarray, np.ndarray, bool], ...]:
    """Per gene group of the family: (the gene columns it contributes, within the genes; code ->
    value lookup; whether each of those genes is active in every network). Genes active in no
    network (ProxylessNAS's fixed last depth) are left out. Activity is read off the space's
    smallest and largest networks and a fixed sample: depths decide it."""
    family = space.family
    probe = np.concatenate([space.to_matrix([space.min_arch(), space.max_arch()]),
                            np.asarray(space.sample_matrix(256, np.random.default_rng(0)))])
    active = space.active_mask(probe)
    always, ever = active.all(axis=0), active.any(axis=0)
    out = []
    for g, sl in zip(family.gene_groups(), family.group_slices().values()):
        genes = np.arange(sl.start - 1, sl.stop - 1)
        genes = genes[ever[genes]]
        if not len(genes):
            continue
        codes = g.to_codes(g.choices)
        lookup = np.zeros(max(codes) + 1, dtype=np.float64)
        lookup[codes] = np.asarray(g.choices, dtype=np.float64)
        out.append((genes, lookup, bool(always[genes].all())))
    return tuple(out)


def _generic_features(space, m: np.ndarray, feature_set: str, n_classes: int) -> np.ndarray:
    params, macs = params_macs(space, m, n_classes)
    costs = np.log(np.maximum(np.stack([macs, params], axis=1), 1.0))
    if feature_set == "full":
        return np.concatenate([space.encode(m, "onehot").astype(np.float64), costs], axis=1)
    genes = np.asarray(m[:, 1:], dtype=np.int64)
    active = space.active_mask(m)
    parts = []
    for cols, lookup, always in _generic_layout(space):
        values = lookup[np.clip(genes[:, cols], 0, len(lookup) - 1)]
        if always:  # depths, widths: each gene as its value
            parts.append(values)
            continue
        act = active[:, cols]  # kernels, expand ratios: mean over active genes, and their number
        count = act.sum(axis=1)
        parts.append(np.stack([(values * act).sum(axis=1) / np.maximum(count, 1), count], axis=1))
    return np.concatenate(parts + [np.asarray(m[:, :1], dtype=np.float64), costs], axis=1)


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

    if feature_set not in FEATURE_SETS or not is_mbv3(space):
        return None
    table = tabulate_vector(lambda m: _pre_features(space, m, feature_set, n_classes), space)
    if table is None:
        return None
    rows = sample_mixed(space, 512, np.random.default_rng(7))
    if not np.array_equal(features_from_pre(table.predict(rows), feature_set),
                          arch_features(space, rows, feature_set, n_classes)):
        return None
    return table
