"""What both MobileNet families (OFA-MobileNetV3, OFA-ProxylessNAS) share without torch: the block
description their plans yield, and the exact params/MACs arithmetic of their layers.

Counting convention (Once-for-All's reports): params = every parameter, BN affine included, BN
running statistics and kernel-transform matrices excluded; MACs = multiply-accumulates of
convolutions and linear layers only (SE 1x1 convs included; BN, activations, pooling, the SE
multiply and residual adds not counted). Spatial sizes follow conv arithmetic with padding k//2
(`hwnas.families.parts.out_size`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hwnas.families.parts import Conv, mbconv_convs, out_size

__all__ = ["BlockSpec", "Cost", "conv_params_macs", "add_costs", "mbconv_params_macs", "stem_params_macs",
           "per_distinct_key", "add_block_costs"]

Cost = tuple[int, int]  # (params, MACs)


@dataclass(frozen=True)
class BlockSpec:
    """One searchable MBConv block: its stage, index in the stage, gene slot, widths, stride,
    activation and whether it has squeeze-and-excitation."""

    stage: int
    index: int
    slot: int
    in_channels: int
    out_channels: int
    stride: int
    act: str
    use_se: bool

    @property
    def residual(self) -> bool:
        """An identity shortcut: same width in and out, stride 1."""
        return self.stride == 1 and self.in_channels == self.out_channels


def conv_params_macs(cin: int, cout: int, k: int, out: int, groups: int = 1, bias: bool = False,
                     bn: bool = True) -> Cost:
    """(params, MACs) of a k x k convolution producing an `out` x `out` map (BN affine counted)."""
    conv = Conv("", cin, cout, k, out, out, groups, bias, bn)
    return conv.params, conv.macs


def add_costs(*costs: Cost) -> Cost:
    return sum(c[0] for c in costs), sum(c[1] for c in costs)


@functools.lru_cache(maxsize=65536)
def mbconv_params_macs(cin: int, cout: int, k: int, e: int, stride: int, size: int, use_se: bool,
                       expand: bool = True) -> tuple[int, int, int]:
    """(params, MACs, output size) of one MBConv block on a `size` x `size` input (its convolutions
    as `hwnas.families.parts.mbconv_convs` describes them for the cost layout too)."""
    convs, out = mbconv_convs(cin, cout, k, e, stride, size, use_se, expand)
    return sum(c.params for c in convs), sum(c.macs for c in convs), out


@functools.lru_cache(maxsize=4096)
def stem_params_macs(plan: Any, r: int) -> tuple[int, int, int]:
    """Stem conv (3x3, stride 2) + the fixed first block (3x3 depthwise, no expand, no SE) of a
    plan with ``stem`` and ``first_block`` widths: (params, MACs, output size)."""
    size = out_size(r, 3, 2)
    p1, m1 = conv_params_macs(3, plan.stem, 3, size)
    p2, m2, size = mbconv_params_macs(plan.stem, plan.first_block, 3, 1, 1, size, False, expand=False)
    return p1 + p2, m1 + m2, size


def per_distinct_key(keys: np.ndarray, fn: Callable[..., tuple[int, ...]]) -> np.ndarray:
    """`fn(*key)` evaluated once per distinct row of `keys` [n, m]; int64 results, one row per key
    (how the vectorised counters cost each distinct block shape once)."""
    if len(keys) == 0:
        return np.zeros((0, 3), dtype=np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    values = np.array([fn(*map(int, key)) for key in uniq], dtype=np.int64).reshape(len(uniq), -1)
    return values[inv.reshape(-1)]


def add_block_costs(blocks: Any, ks: np.ndarray, es: np.ndarray, depth: np.ndarray, size: np.ndarray,
                    params: np.ndarray, macs: np.ndarray) -> None:
    """Add, in place, every running MBConv block's params and MACs to `params`/`macs` (int64 [n])
    and advance each row's spatial `size` (int64 [n], the input size of the first block on entry,
    the last block's output size on return). `blocks`: `BlockSpec`s of every searchable position,
    in network order; `ks`/`es`: int [n, slots] kernel and expand values by `BlockSpec.slot`;
    `depth`: int [n, stages] blocks each stage runs. Each distinct block shape is costed once."""
    for b in blocks:
        used = depth[:, b.stage] > b.index
        keys = np.stack([ks[used, b.slot], es[used, b.slot], size[used]], axis=1)
        cost = per_distinct_key(keys, lambda k, e, s, b=b: mbconv_params_macs(
            b.in_channels, b.out_channels, k, e, b.stride, s, b.use_se))
        params[used] += cost[:, 0]
        macs[used] += cost[:, 1]
        size[used] = cost[:, 2]
