"""Per-block layout of OFA-MobileNetV3 subnets, vectorised for latency models.

Every latency model here is a sum over the parts a subnet runs: the fixed stem (stem conv + first
block, at the input resolution), the active searchable blocks and the fixed head. A searchable
block's shapes depend only on its slot, its kernel/expand and the input resolution `r` (strided
blocks are always the first of a stage, which always exists), so any per-block quantity can be
tabulated once per distinct ``(r, slot, k, e)`` and summed over many archs with fancy indexing.
That is what `SlotGather` does; `analytic_gather` fills it with exact costs (MACs, bytes, layers),
`hwnas.latency.lut` with measured milliseconds.

The shapes come from `mbv3_plan`/`iter_blocks`, the same description the supernet and the exact
counter (`hwnas.supernet.stats`) use, so costs here agree with `stats_frame` to the MAC.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hwnas.errors import InputError
from hwnas.space import FLAT_COLUMNS, MAX_DEPTH, N_SLOTS, N_STAGES, Arch, SearchSpace
from hwnas.channels import expand_channels
from hwnas.families.mbconv import BlockSpec
from hwnas.families.parts import COST_NAMES, conv_cost, mbconv_cost, out_size
from hwnas.families.ofa_mbv3.plan import iter_blocks, mbv3_plan

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COST_NAMES",
    "fixed_cost",
    "ENTRY_COLUMNS",
    "SlotGather",
    "analytic_gather",
    "as_matrix",
    "used_mask",
    "slot_specs",
    "slot_sizes",
    "block_cost",
    "stem_cost",
    "head_cost",
    "entry_keys",
    "entry_module",
]

#: the per-part latency entries a profile measures (see `hwnas.latency.lut`)
ENTRY_COLUMNS: tuple[str, ...] = ("part", "stage", "j", "in_ch", "k", "e", "size")

_N_COLS = len(FLAT_COLUMNS)
_USED = np.array([[j < d for j in range(MAX_DEPTH)] for d in range(MAX_DEPTH + 1)])


def as_matrix(archs: Sequence[Arch] | np.ndarray) -> np.ndarray:
    """Flat rows as int64 [n, 46]; accepts a list of `Arch` or a `SearchSpace.to_matrix` matrix."""
    if isinstance(archs, np.ndarray):
        if archs.ndim != 2 or archs.shape[1] != _N_COLS:
            raise InputError(f"an arch matrix must be [n, {_N_COLS}] (r, ks_0..ks_19, e_0..e_19, "
                             f"d_0..d_4), got shape {list(archs.shape)}")
        m = archs.astype(np.int64, copy=False)
    else:
        archs = list(archs)
        if not all(isinstance(a, Arch) for a in archs):
            raise InputError("expected a list of Arch or an [n, 46] int matrix of flat arch rows")
        m = SearchSpace.to_matrix(archs).astype(np.int64)
    if len(m):
        d = m[:, 41:46]
        if (d < 1).any() or (d > MAX_DEPTH).any():
            raise InputError(f"stage depths must be within 1..{MAX_DEPTH}")
        if (m[:, 0] < 1).any():
            raise InputError("resolutions must be positive")
    return m


def used_mask(m: np.ndarray) -> np.ndarray:
    """bool [n, 20]: which slots each row uses."""
    return _USED[m[:, 41:46]].reshape(len(m), N_SLOTS)


_out_size = out_size


@functools.lru_cache(maxsize=None)
def slot_specs(width_mult: float) -> tuple[BlockSpec, ...]:
    """The 20 searchable blocks of the deepest subnet (slot i is ``specs[i]``)."""
    return tuple(iter_blocks(mbv3_plan(width_mult), [MAX_DEPTH] * N_STAGES))


@functools.lru_cache(maxsize=4096)
def slot_sizes(r: int) -> tuple[tuple[int, ...], int, int]:
    """(input size of each of the 20 slots, stem output size, head input size) at resolution r.

    Odd kernels with padding k//2 make sizes independent of the kernel, and a stage's later
    blocks keep its first block's output size, so sizes depend on r alone."""
    stem = _out_size(r, 3, 2)
    out, size = [], stem
    for spec in slot_specs(1.0):
        out.append(size)
        size = _out_size(size, 3, spec.stride)
    return tuple(out), stem, size


# the MBConv arithmetic is shared with the other MobileNet family (`hwnas.families.parts`)
_conv = conv_cost
_block = mbconv_cost


def block_cost(width_mult: float, slot: int, k: int, e: int, r: int) -> np.ndarray:
    """Exact costs (`COST_NAMES`) of searchable block `slot` with kernel k, expand e at resolution r."""
    spec = slot_specs(width_mult)[slot]
    size = slot_sizes(r)[0][slot]
    return _block(spec.in_channels, spec.out_channels, k, e, spec.stride, size, spec.use_se,
                  spec.index > 0)


@functools.lru_cache(maxsize=4096)
def stem_cost(width_mult: float, r: int) -> np.ndarray:
    """Stem conv + the fixed first block at resolution r (counted as 'fixed' MACs, 0 blocks)."""
    plan = mbv3_plan(width_mult)
    size = _out_size(r, 3, 2)
    conv = _conv(3, plan.stem, 3, r, size)
    first = _block(plan.stem, plan.first_block, 3, 1, 1, size, False, plan.stem == plan.first_block,
                   expand=False)
    macs = conv[0] + first[0] + first[1]
    return np.array([0.0, 0.0, 0.0, macs, conv[1] + first[4], conv[2] + first[5], 1 + first[6], 0.0])


@functools.lru_cache(maxsize=4096)
def head_cost(width_mult: float, size: int, n_classes: int) -> np.ndarray:
    """Final expand (at `size`), pool, feature mix and classifier."""
    plan = mbv3_plan(width_mult)
    fe, fm = plan.final_expand, plan.feature_mix
    a = _conv(plan.stages[-1].width, fe, 1, size, size)
    b = _conv(fe, fm, 1, 1, 1)
    c = _conv(fm, n_classes, 1, 1, 1, bias=True)
    total = a + b + c
    return np.array([0.0, 0.0, 0.0, total[0], total[1] + 4 * fe * size * size, total[2], 3.0, 0.0])


def fixed_cost(width_mult: float, n_classes: int, r: int) -> np.ndarray:
    return stem_cost(width_mult, r) + head_cost(width_mult, slot_sizes(r)[2], n_classes)


@dataclass
class SlotGather:
    """Sum a per-(r, slot, k, e) quantity over the active blocks of many archs, vectorised.

    `block_fn(r, slot, k, e) -> float[F]` and `fixed_fn(r) -> float[F]` are called once per
    distinct key present in the rows; the results are gathered for all rows with one fancy index.
    """

    block_fn: Callable[[int, int, int, int], np.ndarray]
    fixed_fn: Callable[[int], np.ndarray]
    n_features: int

    def per_slot(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(per-slot values [n, 20, F] (zero for unused slots), fixed part [n, F])."""
        n = len(m)
        used = used_mask(m)
        ks, es = m[:, 1:21], m[:, 21:41]
        r_u, r_idx = np.unique(m[:, 0], return_inverse=True)
        k_u = np.unique(ks[used]) if used.any() else np.array([3])
        e_u = np.unique(es[used]) if used.any() else np.array([3])
        ki = np.searchsorted(k_u, np.where(used, ks, k_u[0]))
        ei = np.searchsorted(e_u, np.where(used, es, e_u[0]))
        nk, ne = len(k_u), len(e_u)
        # one flat table, plus a final zero row that unused slots point at; each resolution's
        # [20, nk, ne, F] block is built once per (r, k set, e set) and kept (a search asks for
        # the same few hundred blocks every generation)
        kk, ek = tuple(k_u.tolist()), tuple(e_u.tolist())
        parts = [self._r_block(int(r), kk, ek) for r in r_u]
        table = np.concatenate([p.reshape(-1, self.n_features) for p in parts]
                               + [np.zeros((1, self.n_features))])
        fixed = np.stack([self._fixed_row(int(r)) for r in r_u]) if n else np.zeros((0, self.n_features))
        flat = ((r_idx.reshape(-1, 1) * N_SLOTS + np.arange(N_SLOTS)) * nk + ki) * ne + ei
        flat = np.where(used, flat, len(table) - 1)
        return table[flat], fixed[r_idx.reshape(-1)]

    def _r_block(self, r: int, k_u: tuple[int, ...], e_u: tuple[int, ...]) -> np.ndarray:
        """`block_fn` over every (slot, k, e) of resolution r: [20, nk, ne, F], memoised."""
        memo = self.__dict__.setdefault("_blocks", {})
        key = (r, k_u, e_u)
        got = memo.get(key)
        if got is None:
            if len(memo) > 4096:  # bound the memory of odd callers
                memo.clear()
            got = np.zeros((N_SLOTS, len(k_u), len(e_u), self.n_features))
            for slot in range(N_SLOTS):
                for b, k in enumerate(k_u):
                    for c, e in enumerate(e_u):
                        got[slot, b, c] = self.block_fn(r, slot, k, e)
            got.flags.writeable = False
            memo[key] = got
        return got

    def _fixed_row(self, r: int) -> np.ndarray:
        memo = self.__dict__.setdefault("_fixed", {})
        got = memo.get(r)
        if got is None:
            got = np.asarray(self.fixed_fn(r), dtype=np.float64).reshape(self.n_features)
            memo[r] = got
        return got

    def total(self, m: np.ndarray, chunk: int = 20000) -> np.ndarray:
        """[n, F]: fixed part + the sum over active blocks."""
        out = np.empty((len(m), self.n_features))
        for lo in range(0, len(m), chunk):
            vals, fixed = self.per_slot(m[lo:lo + chunk])
            out[lo:lo + chunk] = vals.sum(axis=1) + fixed
        return out


@functools.lru_cache(maxsize=32)
def analytic_gather(width_mult: float, n_classes: int) -> SlotGather:
    """Exact `COST_NAMES` costs per block and for the fixed parts (one shared instance per
    (width_mult, n_classes), so its per-resolution blocks are computed once per process)."""
    return SlotGather(lambda r, s, k, e: block_cost(width_mult, s, k, e, r),
                      lambda r: fixed_cost(width_mult, n_classes, r), len(COST_NAMES))


# -- per-part latency entries ------------------------------------------------------------------
def entry_keys(archs: Sequence[Arch] | np.ndarray, width_mult: float = 1.0) -> "pd.DataFrame":
    """The distinct parts (`ENTRY_COLUMNS`) that make up `archs`: what a per-block profile measures.

    part "stem": stem conv + first block, `size` = input resolution; "block": searchable block of
    `stage` at position `j` with kernel `k`, expand `e`, input width `in_ch` and input feature size
    `size`; "head": final expand + pool + feature mix + classifier, `size` = its input size.
    Blocks at positions j >= 1 of a stage have identical shapes, so only j in {0, 1} is listed.
    """
    import pandas as pd

    m = as_matrix(archs)
    specs = slot_specs(width_mult)
    rows: set[tuple] = set()
    used = used_mask(m)
    for r in np.unique(m[:, 0]):
        sizes, _, head = slot_sizes(int(r))
        rows.add(("stem", -1, 0, 3, 3, 0, int(r)))
        rows.add(("head", N_STAGES, 0, specs[-1].out_channels, 0, 0, head))
        sel = m[:, 0] == r
        for slot, spec in enumerate(specs):
            u = used[sel, slot]
            if not u.any():
                continue
            pairs = np.unique(np.stack([m[sel, 1 + slot][u], m[sel, 21 + slot][u]], axis=1), axis=0)
            for k, e in pairs:
                rows.add(("block", spec.stage, min(spec.index, 1), spec.in_channels, int(k), int(e),
                          sizes[slot]))
    order = {"stem": 0, "block": 1, "head": 2}
    df = pd.DataFrame(sorted(rows, key=lambda t: (order[t[0]],) + t[1:]), columns=list(ENTRY_COLUMNS))
    return df


def entry_module(entry, width_mult: float = 1.0, n_classes: int = 1000):
    """(nn.Module, input shape [1, C, size, size]) that runs one part of `entry_keys` in isolation.

    Built from the same layer classes as `MobileNetV3Subnet`, so a part times what it costs inside
    a subnet (minus the runtime's per-call overhead, which the lookup table's constant absorbs).
    """
    import torch.nn as nn

    from hwnas.supernet.layers import MBConv, ResidualBlock, init_weights
    from hwnas.supernet.ofa_mbv3 import MobileNetV3Subnet

    part = str(entry["part"])
    size = int(entry["size"])
    plan = mbv3_plan(width_mult)
    if part in ("stem", "head"):
        net = MobileNetV3Subnet(SearchSpace(width_mult=width_mult).min_arch(), n_classes=n_classes).eval()
        if part == "stem":
            return nn.Sequential(net.first_conv, net.blocks[0]), (1, 3, size, size)

        class _Head(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.net = net

            def forward(self, x):
                return self.net.forward_head(x)

        return _Head(), (1, plan.stages[-1].width, size, size)
    if part != "block":
        raise InputError(f"unknown part {part!r}; use 'stem', 'block' or 'head'")
    stage, j = int(entry["stage"]), int(entry["j"])
    spec = slot_specs(width_mult)[MAX_DEPTH * stage + min(j, MAX_DEPTH - 1)]
    k, e = int(entry["k"]), int(entry["e"])
    layer = MBConv(spec.in_channels, spec.out_channels, k, spec.stride,
                   expand_channels(spec.in_channels, e), spec.act, spec.use_se)
    block = ResidualBlock(layer, spec.stride == 1 and spec.in_channels == spec.out_channels)
    init_weights(block)
    return block.eval(), (1, spec.in_channels, size, size)


# -- any family: the family's cost layout, gathered ---------------------------------------------
MBV3 = "ofa-mbv3"


def family_layout(family: str, width_mult: float, n_classes: int):
    """The `hwnas.families.parts.CostLayout` of `family` (a registry name) at this width/classes."""
    from hwnas.families import get_family

    return get_family(family).cost_layout(width_mult, n_classes)


_KEY_BITS = 12  # gene codes are small; r < 4096


class PartGather:
    """Sum a per-(part, key) quantity over the active parts of many rows of any family, vectorised.

    `part_fn(p, key) -> float[F]` is called once per distinct key of part `p` present in the rows
    (memoised); every row then reads its value with one fancy index per part. The generic twin of
    `SlotGather` (which OFA-MobileNetV3's predictors keep using: same numbers, faster)."""

    def __init__(self, layout, part_fn: Callable[[int, tuple[int, ...]], np.ndarray], n_features: int) -> None:
        self.layout, self.part_fn, self.n_features = layout, part_fn, int(n_features)
        self._memo: list[dict[int, np.ndarray]] = [{} for _ in layout.parts]

    def per_part(self, m: np.ndarray) -> np.ndarray:
        """[n, parts, F]: each part's value per row (zero where the row does not run the part)."""
        n, parts = len(m), self.layout.parts
        out = np.zeros((n, len(parts), self.n_features))
        if n == 0:
            return out
        active = self.layout.active(m)
        for p, part in enumerate(parts):
            rows = active[:, p]
            every = bool(rows.all())
            if not every and not rows.any():
                continue
            keys = m[:, part.columns] if every else m[rows][:, part.columns]
            code = keys[:, 0].astype(np.int64)
            for c in range(1, keys.shape[1]):
                code = (code << _KEY_BITS) | keys[:, c]
            uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
            memo = self._memo[p]
            values = np.empty((len(uniq), self.n_features))
            for i, (u, at) in enumerate(zip(uniq.tolist(), first.tolist())):
                got = memo.get(u)
                if got is None:
                    if len(memo) > 65536:  # bound the memory of odd callers
                        memo.clear()
                    got = np.asarray(self.part_fn(p, tuple(int(v) for v in keys[at])),
                                     dtype=np.float64).reshape(self.n_features)
                    memo[u] = got
                values[i] = got
            if every:
                out[:, p] = values[inv.reshape(-1)]
            else:
                out[rows, p] = values[inv.reshape(-1)]
        return out

    def total(self, m: np.ndarray, chunk: int = 20000) -> np.ndarray:
        """[n, F]: the sum over each row's active parts."""
        out = np.empty((len(m), self.n_features))
        for lo in range(0, len(m), chunk):
            out[lo:lo + chunk] = self.per_part(m[lo:lo + chunk]).sum(axis=1)
        return out


@functools.lru_cache(maxsize=32)
def family_cost_gather(family: str, width_mult: float, n_classes: int) -> PartGather:
    """Exact `COST_NAMES` costs per part of `family`, then the block's depthwise/spatial MACs
    again in the column of its kernel (`layout.kernels`): [len(COST_NAMES) + len(kernels)]."""
    layout = family_layout(family, width_mult, n_classes)
    kernels = tuple(layout.kernels)
    dw = COST_NAMES.index("macs_dw")

    def fn(p: int, key: tuple[int, ...]) -> np.ndarray:
        cost = layout.cost(p, key)
        extra = np.zeros(len(kernels))
        k = layout.kernel(p, key)
        if k in kernels:
            extra[kernels.index(k)] = cost[dw]
        return np.concatenate([cost, extra])

    return PartGather(layout, fn, len(COST_NAMES) + len(kernels))


def family_entry_keys(family: str, m: np.ndarray, width_mult: float, n_classes: int) -> "pd.DataFrame":
    """The distinct lookup-table entries (`layout.entry_columns`) the rows `m` of `family` run."""
    import pandas as pd

    layout = family_layout(family, width_mult, n_classes)
    active = layout.active(m)
    rows: set[tuple] = set()
    for p, part in enumerate(layout.parts):
        keys = np.unique(m[active[:, p]][:, part.columns], axis=0)
        rows.update(layout.entry(p, tuple(int(v) for v in key)) for key in keys)
    order = {"stem": 0, "block": 1, "head": 2}
    return pd.DataFrame(sorted(rows, key=lambda t: (order[t[0]],) + tuple(t[1:])),
                        columns=list(layout.entry_columns))
