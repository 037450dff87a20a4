"""What an accuracy predictor sees of a subnet, for a space of any family.

- ``full``: the space's one-hot encoding (`encode(m, "onehot")`: per gene its choice, all zero
  where the gene is inactive; r) plus log MACs and log parameters. Expressive; needs a few hundred
  rows.
- ``compact``: a few numbers a small table can support: r (as a value and as one indicator per
  resolution of the space), log MACs and log parameters, and a
  summary of the genes in the family's style (`Family.compact_summary`):
  ``"groups"``: each gene group that is always active (depths, ResNet's widths) as values, each
  other group (kernels, expand ratios) by the mean of its active genes' values and how many are
  active; ``"stages"`` (the default family's): per depth gene its value, then per gene group its
  slots own the mean over the slots that depth runs.

MACs and parameters are the family's exact vectorised `count_params_macs`.

Every feature is computed in two steps: `pre_features`, additive over the slots a subnet runs
(one-hots, sums and counts, MACs and parameters before the log), then `features_from_pre` (logs
and means). A search tabulates the first exactly and gathers it for a whole batch
(`hwnas.search.fused`), with the same values bit for bit.
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.errors import InputError

__all__ = ["FEATURE_SETS", "arch_features", "params_macs", "pre_features", "features_from_pre"]

FEATURE_SETS = ("full", "compact")


def params_macs(space, m: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact (params, MACs) as float64 [n] of int rows `m` of `space` (any family)."""
    m = np.asarray(m, dtype=np.int64)
    if not len(m):
        return np.zeros(0), np.zeros(0)
    params, macs = space.family.count_params_macs(m, space.width_mult, int(n_classes))
    return np.asarray(params, dtype=np.float64), np.asarray(macs, dtype=np.float64)


def arch_features(space, archs, feature_set: str = "full", n_classes: int = 10) -> np.ndarray:
    """float64 [n, F] features of many archs (a list of archs or the space's int matrix)."""
    _check(feature_set)
    return features_from_pre(space, pre_features(space, space.to_matrix(archs), feature_set, n_classes),
                             feature_set)


def _check(feature_set: str) -> None:
    if feature_set not in FEATURE_SETS:
        raise InputError(f"unknown feature set {feature_set!r}; use one of {', '.join(FEATURE_SETS)}")


def pre_features(space, m: np.ndarray, feature_set: str, n_classes: int) -> np.ndarray:
    """The additive raw material of `arch_features` (one-hots, integer values, sums and counts
    over active genes; MACs and parameters before the log): float64 [n, P]."""
    _check(feature_set)
    m = np.asarray(m)
    params, macs = params_macs(space, m, n_classes)
    costs = np.stack([macs, params], axis=1)
    if feature_set == "full":
        return np.concatenate([space.encode(m, "onehot").astype(np.float64), costs], axis=1)
    summary = _stages if space.family.compact_summary == "stages" else _groups
    return np.concatenate([summary(space).pre(m), np.asarray(m[:, :1], dtype=np.float64), costs], axis=1)


def features_from_pre(space, pre: np.ndarray, feature_set: str) -> np.ndarray:
    """`arch_features` from `pre_features`: logs of the costs, means of the sums."""
    costs = np.log(np.maximum(pre[:, -2:], 1.0))
    if feature_set == "full":
        return np.concatenate([pre[:, :-2], costs], axis=1)
    summary = _stages if space.family.compact_summary == "stages" else _groups
    return np.concatenate([summary(space).post(pre[:, :-3]), pre[:, -3:-2], _r_levels(space, pre[:, -3]),
                           costs], axis=1)


def _r_levels(space, r: np.ndarray) -> np.ndarray:
    """One indicator per resolution of the space. Top-1 against r is far from linear (measured on
    the shipped Fashion-MNIST supernet: +0.9 points from r28 to r32, +0.1 from r36 to r40, then
    down at r44), so a linear model needs each level's own offset; out of fold on its 100-row
    table this alone took ridge's Kendall tau from 0.64 to 0.78."""
    return (np.asarray(r)[:, None] == np.asarray(space.r_choices, dtype=np.float64)[None, :]).astype(np.float64)


# -- "groups": each always-active group as values, the others' mean and count --------------------
class _GroupSummary:
    """Per gene group of the family: (the gene columns it contributes, within the genes; code ->
    integer value (the value times the group's `scale`, a power of ten that makes every choice an
    integer, so sums are exact); the scale; whether those genes are active in every network).
    Genes active in no network (ProxylessNAS's fixed last depth) are left out. Activity is read off
    the space's smallest and largest networks and a fixed sample: depths decide it."""

    def __init__(self, space) -> None:
        family = space.family
        self.space = space
        probe = np.concatenate([space.to_matrix([space.min_arch(), space.max_arch()]),
                                np.asarray(space.sample_matrix(256, np.random.default_rng(0)))])
        active = space.active_mask(probe)
        always, ever = active.all(axis=0), active.any(axis=0)
        self.groups = []
        for g, sl in zip(family.gene_groups(), family.group_slices().values()):
            genes = np.arange(sl.start - 1, sl.stop - 1)
            genes = genes[ever[genes]]
            if not len(genes):
                continue
            codes = g.to_codes(g.choices)
            scale = _scale(g.choices)
            lookup = np.zeros(max(codes) + 1, dtype=np.int64)
            lookup[codes] = np.rint(np.asarray(g.choices, dtype=np.float64) * scale).astype(np.int64)
            self.groups.append((genes, lookup, scale, bool(always[genes].all())))

    def pre(self, m: np.ndarray) -> np.ndarray:
        genes = np.asarray(m[:, 1:], dtype=np.int64)
        active = self.space.active_mask(m)
        parts = []
        for cols, lookup, _, always in self.groups:
            values = lookup[np.clip(genes[:, cols], 0, len(lookup) - 1)]
            if always:  # depths, widths: each gene as its value
                parts.append(values)
                continue
            act = active[:, cols]  # kernels, expand ratios: sum over active genes, and their number
            parts.append(np.stack([(values * act).sum(axis=1), act.sum(axis=1)], axis=1))
        return np.concatenate(parts, axis=1).astype(np.float64)

    def post(self, pre: np.ndarray) -> np.ndarray:
        out, at = [], 0
        for cols, _, scale, always in self.groups:
            if always:
                out.append(pre[:, at:at + len(cols)] / scale)
                at += len(cols)
                continue
            total, count = pre[:, at], pre[:, at + 1]
            out.append(np.stack([total / (scale * np.maximum(count, 1)), count], axis=1))
            at += 2
        return np.concatenate(out, axis=1)


def _scale(values) -> float:
    """The smallest power of ten (up to 10^6) that makes every value an integer."""
    for k in range(7):
        scaled = np.asarray(values, dtype=np.float64) * 10 ** k
        if np.allclose(scaled, np.rint(scaled), rtol=0, atol=1e-9):
            return float(10 ** k)
    raise InputError(f"gene values {list(values)} need more than 6 decimals")


# -- "stages": per depth gene its value and the means over the slots it runs ---------------------
class _StageSummary:
    """Per depth gene of the family's slot layout (a stage): its value; then per gene group the
    slots own, per stage, the sum of its values over the running slots (the post step divides by
    the depth: a stage's depth value is how many of its slots run)."""

    def __init__(self, space) -> None:
        family = space.family
        layout = family.slot_layout()
        if layout is None:
            raise InputError(f"{family.name} summarises compact features by stage but has no slot layout")
        self.layout, self.depths = layout, layout.depth_columns
        group_of = {c: g for g, sl in zip(family.gene_groups(), family.group_slices().values())
                    for c in range(sl.start, sl.stop)}
        names = []
        for s in layout.slots:
            names += [group_of[c].name for c in s.genes if group_of[c].name not in names]
        self.groups = []  # (per stage: slot gene columns of that group, their slots)
        for name in names:
            per_stage = []
            for d in self.depths:
                members = [(c, i) for i, s in enumerate(layout.slots) if s.depth == d
                           for c in s.genes if group_of[c].name == name]
                per_stage.append((np.asarray([c for c, _ in members], dtype=np.intp),
                                  np.asarray([i for _, i in members], dtype=np.intp)))
            self.groups.append(per_stage)

    def pre(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        used = self.layout.used(m)
        parts = [m[:, list(self.depths)]]
        for per_stage in self.groups:
            parts.append(np.stack([(m[:, cols] * used[:, slots]).sum(axis=1) for cols, slots in per_stage],
                                  axis=1))
        return np.concatenate(parts, axis=1).astype(np.float64)

    def post(self, pre: np.ndarray) -> np.ndarray:
        n = len(self.depths)
        depth = np.maximum(pre[:, :n], 1)
        return np.concatenate([pre[:, :n]] + [pre[:, n * (1 + i):n * (2 + i)] / depth
                                              for i in range(len(self.groups))], axis=1)


@functools.lru_cache(maxsize=16)
def _groups(space) -> _GroupSummary:
    return _GroupSummary(space)


@functools.lru_cache(maxsize=16)
def _stages(space) -> _StageSummary:
    return _StageSummary(space)
