"""Exact parameter and MAC counts of OFA-MobileNetV3 subnets, computed without building a network.

Definitions (as in Once-for-All's reports): params = every parameter, BN affine included, BN running
statistics and the supernet's kernel-transform matrices excluded; MACs = multiply-accumulates of
convolutions and linear layers only (SE 1x1 convs included; BN, activations, pooling, the SE multiply
and residual adds not counted). All counts are exact integers. Spatial sizes follow conv arithmetic
with padding k//2: ``out = (in + 2*(k//2) - k) // stride + 1``.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from hwnas.errors import InputError, TableError
from hwnas.space import FLAT_COLUMNS, MAX_DEPTH, N_STAGES, Arch
from hwnas.channels import expand_channels, se_channels
from hwnas.families.ofa_mbv3.plan import MBV3Plan, iter_blocks, mbv3_plan

__all__ = ["count_params", "count_macs", "count_params_macs", "stats_frame"]

Cost = tuple[int, int]  # (params, MACs)


def _out_size(size: int, kernel_size: int, stride: int) -> int:
    return (size + 2 * (kernel_size // 2) - kernel_size) // stride + 1


def _conv(cin: int, cout: int, k: int, out_size: int, groups: int = 1, bias: bool = False,
          bn: bool = True) -> Cost:
    weights = cout * (cin // groups) * k * k
    return weights + (cout if bias else 0) + (2 * cout if bn else 0), weights * out_size * out_size


def _add(*costs: Cost) -> Cost:
    return sum(c[0] for c in costs), sum(c[1] for c in costs)


@functools.lru_cache(maxsize=65536)
def _block(cin: int, cout: int, k: int, e: int, stride: int, size: int, use_se: bool,
           expand: bool = True) -> tuple[int, int, int]:
    """(params, MACs, output size) of one MBConv block on a `size` x `size` input."""
    mid = expand_channels(cin, e) if expand else cin
    out = _out_size(size, k, stride)
    costs = [_conv(mid, mid, k, out, groups=mid), _conv(mid, cout, 1, out)]
    if expand:
        costs.append(_conv(cin, mid, 1, size))
    if use_se:
        s = se_channels(mid)
        costs += [_conv(mid, s, 1, 1, bias=True, bn=False), _conv(s, mid, 1, 1, bias=True, bn=False)]
    params, macs = _add(*costs)
    return params, macs, out


@functools.lru_cache(maxsize=4096)
def _stem(plan: MBV3Plan, r: int) -> tuple[int, int, int]:
    """Stem conv + fixed first block: (params, MACs, output size)."""
    size = _out_size(r, 3, 2)
    p1, m1 = _conv(3, plan.stem, 3, size)
    p2, m2, size = _block(plan.stem, plan.first_block, 3, 1, 1, size, False, expand=False)
    return p1 + p2, m1 + m2, size


@functools.lru_cache(maxsize=4096)
def _head(plan: MBV3Plan, size: int, n_classes: int) -> Cost:
    """Final expand conv (at `size`), feature mix (after pooling) and classifier."""
    fe, fm = plan.final_expand, plan.feature_mix
    return _add(_conv(plan.stages[-1].width, fe, 1, size), _conv(fe, fm, 1, 1, bn=False),
                (fm * n_classes + n_classes, fm * n_classes))


def count_params_macs(arch: Arch, n_classes: int = 1000) -> tuple[int, int]:
    """(params, MACs) of the subnet `arch` at its width multiplier `arch.w` and resolution `arch.r`
    (an arch of any family: other families count with `Family.arch_params_macs`)."""
    from hwnas.families.base import GeneArch

    if isinstance(arch, GeneArch):
        return arch.family.arch_params_macs(arch, n_classes)
    if not isinstance(arch, Arch):
        raise InputError(f"expected an Arch, got {type(arch).__name__}; "
                         "build one with Arch.from_ofa_dict(...)")
    _check_classes(n_classes)
    plan = mbv3_plan(arch.w)
    params, macs, size = _stem(plan, arch.r)
    for b in iter_blocks(plan, arch.d):
        p, m, size = _block(b.in_channels, b.out_channels, arch.ks[b.slot], arch.e[b.slot], b.stride, size,
                            b.use_se)
        params, macs = params + p, macs + m
    p, m = _head(plan, size, n_classes)
    return params + p, macs + m


def count_params(arch: Arch, n_classes: int = 1000) -> int:
    return count_params_macs(arch, n_classes)[0]


def count_macs(arch: Arch, n_classes: int = 1000) -> int:
    return count_params_macs(arch, n_classes)[1]


def _check_classes(n_classes: int) -> None:
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise InputError(f"n_classes must be a positive integer, got {n_classes!r}")


def _lookup(keys: np.ndarray, fn: Callable[..., tuple[int, ...]]) -> np.ndarray:
    """Evaluate `fn(*key)` once per distinct row of `keys` [n, m]; the int64 results, one row per key."""
    if len(keys) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    values = np.array([fn(*map(int, key)) for key in uniq], dtype=np.int64).reshape(len(uniq), -1)
    return values[inv.reshape(-1)]


def _matrix_counts(m: np.ndarray, width_mult: float, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised counts for flat rows `m` (int [n, 46]): slot by slot, each distinct
    (kernel, expand, input size) is costed once, then scattered to the rows that use it."""
    plan = mbv3_plan(width_mult)
    r, ks, es, d = m[:, 0], m[:, 1:21], m[:, 21:41], m[:, 41:46]
    stem = _lookup(r[:, None], lambda rr: _stem(plan, rr))
    params, macs, size = stem[:, 0].copy(), stem[:, 1].copy(), stem[:, 2].copy()
    for b in iter_blocks(plan, [MAX_DEPTH] * N_STAGES):
        used = d[:, b.stage] > b.index
        keys = np.stack([ks[used, b.slot], es[used, b.slot], size[used]], axis=1)
        cost = _lookup(keys, lambda k, e, s, b=b: _block(b.in_channels, b.out_channels, k, e, b.stride, s,
                                                          b.use_se))
        params[used] += cost[:, 0]
        macs[used] += cost[:, 1]
        size[used] = cost[:, 2]
    head = _lookup(size[:, None], lambda s: _head(plan, s, n_classes))
    return params + head[:, 0], macs + head[:, 1]


def _frame_matrix(df) -> np.ndarray:
    import pandas as pd

    missing = [c for c in FLAT_COLUMNS if c not in df.columns]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise TableError(f"the table lacks the column(s) {shown}; "
                         "it needs r, ks_0..ks_19, e_0..e_19, d_0..d_4")
    values = df[list(FLAT_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    bad = (values.isna() | (values != values.round())).to_numpy()
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise TableError(f"table row {i + 1}, column {FLAT_COLUMNS[j]}: {df[FLAT_COLUMNS[j]].iat[i]!r} "
                         "is not an integer")
    huge = (values.abs() > 2**31 - 1).to_numpy()
    if huge.any():  # the int64 cast would wrap (or raise OverflowError)
        i, j = np.argwhere(huge)[0]
        raise TableError(f"table row {i + 1}, column {FLAT_COLUMNS[j]}: {df[FLAT_COLUMNS[j]].iat[i]} "
                         "is out of range")
    return values.to_numpy(dtype=np.int64)


def _check_matrix(m: np.ndarray) -> None:
    """The shared arch check (`hwnas.space.check_matrix`, without a space: what any network
    needs), as a TableError naming the row and column."""
    from hwnas.space import _reason_to_column, check_matrix

    found = check_matrix(m)
    if found is not None:
        raise TableError(f"table row {found[0] + 1}, {_reason_to_column(found[1])}")


def stats_frame(data, width_mult: float = 1.0, n_classes: int = 1000):
    """Add exact ``params`` and ``macs`` columns to many archs at once; returns a new DataFrame.

    `data`: a DataFrame with the flat columns ``r, ks_0..ks_19, e_0..e_19, d_0..d_4`` (other columns
    are kept), an int matrix of such rows, or a sequence of `Arch` (each counted at its own `w`;
    `width_mult` applies to tables and matrices, which carry no width).
    """
    import pandas as pd

    from hwnas.space import archs_to_frame

    _check_classes(n_classes)
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
        params[rows], macs[rows] = _matrix_counts(m[rows], float(w), n_classes)
    df["params"] = params
    df["macs"] = macs
    return df

