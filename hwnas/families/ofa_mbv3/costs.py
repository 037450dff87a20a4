"""Exact params and MACs of OFA-MobileNetV3 subnets, from their rows alone (no network is built).

The convention and the per-layer arithmetic are the MobileNet families' (`hwnas.families.mbconv`);
what is MobileNetV3's is the layout (`plan.iter_blocks`: SE in some stages) and the head (final
expand at full resolution, pooling, then a feature mix without BN). All counts are exact integers.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from hwnas.errors import InputError, TableError, shown
from hwnas.families.base import GeneArch, check_n_classes
from hwnas.families.mbconv import (
    Cost,
    add_block_costs,
    add_costs,
    conv_params_macs,
    mbconv_params_macs,
    per_distinct_key,
    stem_params_macs,
)
from hwnas.families.ofa_mbv3.arch import FLAT_COLUMNS, Arch
from hwnas.families.ofa_mbv3.plan import MAX_DEPTH, N_STAGES, MBV3Plan, iter_blocks, mbv3_plan
from hwnas.families.ofa_mbv3.space import check_matrix
from hwnas.families.ofa_mbv3.tables import archs_to_frame, reason_to_column

__all__ = ["count_params_macs", "arch_params_macs", "count_params", "count_macs", "stats_frame"]


@functools.lru_cache(maxsize=4096)
def _head(plan: MBV3Plan, size: int, n_classes: int) -> Cost:
    """Final expand conv (at `size`), feature mix (after pooling) and classifier."""
    fe, fm = plan.final_expand, plan.feature_mix
    return add_costs(conv_params_macs(plan.stages[-1].width, fe, 1, size),
                     conv_params_macs(fe, fm, 1, 1, bn=False), (fm * n_classes + n_classes, fm * n_classes))


def arch_params_macs(arch: Arch, n_classes: int = 1000) -> tuple[int, int]:
    """(params, MACs) of the subnet `arch` at its width multiplier `arch.w` and resolution `arch.r`
    (an arch of any family: other families count with `Family.arch_params_macs`)."""
    if not isinstance(arch, Arch):  # (an `Arch` is a `GeneArch` too: this family counts it below)
        if isinstance(arch, GeneArch):
            return arch.family.arch_params_macs(arch, n_classes)
        raise InputError(f"expected an Arch, got {type(arch).__name__}; "
                         "build one with Arch.from_ofa_dict(...)")
    check_n_classes(n_classes)
    plan = mbv3_plan(arch.w)
    params, macs, size = stem_params_macs(plan, arch.r)
    for b in iter_blocks(plan, arch.d):
        p, m, size = mbconv_params_macs(b.in_channels, b.out_channels, arch.ks[b.slot], arch.e[b.slot],
                                        b.stride, size, b.use_se)
        params, macs = params + p, macs + m
    p, m = _head(plan, size, n_classes)
    return params + p, macs + m


def count_params(arch: Arch, n_classes: int = 1000) -> int:
    return arch_params_macs(arch, n_classes)[0]


def count_macs(arch: Arch, n_classes: int = 1000) -> int:
    return arch_params_macs(arch, n_classes)[1]


def count_params_macs(m: np.ndarray, width_mult: float, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(params, MACs), int64 [n] each, of flat rows `m` (int [n, 46]): slot by slot, each distinct
    (kernel, expand, input size) is costed once, then scattered to the rows that use it."""
    plan = mbv3_plan(width_mult)
    r, ks, es, d = m[:, 0], m[:, 1:21], m[:, 21:41], m[:, 41:46]
    stem = per_distinct_key(r[:, None], lambda rr: stem_params_macs(plan, rr))
    params, macs, size = stem[:, 0].copy(), stem[:, 1].copy(), stem[:, 2].copy()
    add_block_costs(iter_blocks(plan, [MAX_DEPTH] * N_STAGES), ks, es, d, size, params, macs)
    head = per_distinct_key(size[:, None], lambda s: _head(plan, s, n_classes))
    return params + head[:, 0], macs + head[:, 1]


def _frame_matrix(df) -> np.ndarray:
    import pandas as pd

    missing = [c for c in FLAT_COLUMNS if c not in df.columns]
    if missing:
        names = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise TableError(f"the table lacks the column(s) {names}; "
                         "it needs r, ks_0..ks_19, e_0..e_19, d_0..d_4")
    values = df[list(FLAT_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    bad = (values.isna() | (values != values.round())).to_numpy()
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise TableError(f"table row {i + 1}, column {FLAT_COLUMNS[j]}: {shown(df[FLAT_COLUMNS[j]].iat[i])} "
                         "is not an integer")
    huge = (values.abs() > 2**31 - 1).to_numpy()
    if huge.any():  # the int64 cast would wrap (or raise OverflowError)
        i, j = np.argwhere(huge)[0]
        raise TableError(f"table row {i + 1}, column {FLAT_COLUMNS[j]}: {df[FLAT_COLUMNS[j]].iat[i]} "
                         "is out of range")
    return values.to_numpy(dtype=np.int64)


def _check_matrix(m: np.ndarray) -> None:
    """The shared arch check (`check_matrix`, without a space: what any network needs), as a
    TableError naming the row and column."""
    found = check_matrix(m)
    if found is not None:
        raise TableError(f"table row {found[0] + 1}, {reason_to_column(found[1])}")


def stats_frame(data, width_mult: float = 1.0, n_classes: int = 1000):
    """Add exact ``params`` and ``macs`` columns to many archs at once; returns a new DataFrame.

    `data`: a DataFrame with the flat columns ``r, ks_0..ks_19, e_0..e_19, d_0..d_4`` (other columns
    are kept), an int matrix of such rows, or a sequence of `Arch` (each counted at its own `w`;
    `width_mult` applies to tables and matrices, which carry no width).
    """
    import pandas as pd

    check_n_classes(n_classes)
    if not float(width_mult) > 0:
        raise InputError(f"width_mult must be positive, got {width_mult!r}")
    if isinstance(data, pd.DataFrame):
        df, groups = data.copy(), None
        m = _frame_matrix(data)
    elif isinstance(data, np.ndarray):
        if data.ndim != 2 or data.shape[1] != len(FLAT_COLUMNS):
            raise InputError(f"an arch matrix must be [n, {len(FLAT_COLUMNS)}], got shape {list(data.shape)}")
        m, groups = data.astype(np.int64), None
        df = pd.DataFrame(m, columns=list(FLAT_COLUMNS))
    elif isinstance(data, Sequence) and all(isinstance(a, Arch) for a in data):
        archs: Sequence[Arch] = data
        df = archs_to_frame(archs)
        m = df[list(FLAT_COLUMNS)].to_numpy(dtype=np.int64)
        groups = np.array([a.w for a in archs], dtype=float)
    else:
        raise InputError("stats_frame needs a DataFrame of flat arch rows, an [n, 46] int matrix or a list "
                         f"of Arch, got {type(data).__name__}")
    _check_matrix(m)
    params = np.zeros(len(m), dtype=np.int64)
    macs = np.zeros(len(m), dtype=np.int64)
    for w in ([width_mult] if groups is None else np.unique(groups)):
        rows = slice(None) if groups is None else groups == w
        params[rows], macs[rows] = count_params_macs(m[rows], float(w), n_classes)
    df["params"] = params
    df["macs"] = macs
    return df
