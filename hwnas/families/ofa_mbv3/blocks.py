"""OFA-MobileNetV3's per-block layout: the shapes and exact costs its `cost_layout`
(`hwnas.families.ofa_mbv3.parts`) is built on, and the module that times one lookup-table entry.

The shapes come from `mbv3_plan`/`iter_blocks`, the same description the supernet and the exact
counter use, so these costs agree with `stats_frame` to the MAC. A searchable block's shapes depend
only on its slot, its kernel/expand and ``r`` (strided blocks are always the first of a stage,
which always exists). Torch-free except `entry_module`.
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.channels import expand_channels
from hwnas.errors import InputError
from hwnas.families.mbconv import BlockSpec
from hwnas.families.ofa_mbv3.plan import MAX_DEPTH, N_STAGES, iter_blocks, mbv3_plan
from hwnas.families.parts import conv_cost, mbconv_cost, out_size

__all__ = ["slot_specs", "slot_sizes", "block_cost", "stem_cost", "head_cost", "fixed_cost",
           "entry_module"]


@functools.lru_cache(maxsize=None)
def slot_specs(width_mult: float) -> tuple[BlockSpec, ...]:
    """The 20 searchable blocks of the deepest subnet (slot i is ``specs[i]``)."""
    return tuple(iter_blocks(mbv3_plan(width_mult), [MAX_DEPTH] * N_STAGES))


@functools.lru_cache(maxsize=4096)
def slot_sizes(r: int) -> tuple[tuple[int, ...], int, int]:
    """(input size of each of the 20 slots, stem output size, head input size) at resolution r.

    Odd kernels with padding k//2 make sizes independent of the kernel, and a stage's later
    blocks keep its first block's output size, so sizes depend on r alone."""
    stem = out_size(r, 3, 2)
    out, size = [], stem
    for spec in slot_specs(1.0):
        out.append(size)
        size = out_size(size, 3, spec.stride)
    return tuple(out), stem, size


def block_cost(width_mult: float, slot: int, k: int, e: int, r: int) -> np.ndarray:
    """Exact costs (`COST_NAMES`) of searchable block `slot` with kernel k, expand e at resolution r."""
    spec = slot_specs(width_mult)[slot]
    size = slot_sizes(r)[0][slot]
    return mbconv_cost(spec.in_channels, spec.out_channels, k, e, spec.stride, size, spec.use_se,
                       spec.index > 0)


@functools.lru_cache(maxsize=4096)
def stem_cost(width_mult: float, r: int) -> np.ndarray:
    """Stem conv + the fixed first block at resolution r (counted as 'fixed' MACs, 0 blocks)."""
    plan = mbv3_plan(width_mult)
    size = out_size(r, 3, 2)
    conv = conv_cost(3, plan.stem, 3, r, size)
    first = mbconv_cost(plan.stem, plan.first_block, 3, 1, 1, size, False, plan.stem == plan.first_block,
                        expand=False)
    macs = conv[0] + first[0] + first[1]
    return np.array([0.0, 0.0, 0.0, macs, conv[1] + first[4], conv[2] + first[5], 1 + first[6], 0.0])


@functools.lru_cache(maxsize=4096)
def head_cost(width_mult: float, size: int, n_classes: int) -> np.ndarray:
    """Final expand (at `size`), pool, feature mix and classifier."""
    plan = mbv3_plan(width_mult)
    fe, fm = plan.final_expand, plan.feature_mix
    a = conv_cost(plan.stages[-1].width, fe, 1, size, size)
    b = conv_cost(fe, fm, 1, 1, 1)
    c = conv_cost(fm, n_classes, 1, 1, 1, bias=True)
    total = a + b + c
    return np.array([0.0, 0.0, 0.0, total[0], total[1] + 4 * fe * size * size, total[2], 3.0, 0.0])


def fixed_cost(width_mult: float, n_classes: int, r: int) -> np.ndarray:
    return stem_cost(width_mult, r) + head_cost(width_mult, slot_sizes(r)[2], n_classes)


def entry_module(entry, width_mult: float = 1.0, n_classes: int = 1000):
    """(nn.Module, input shape [1, C, size, size]) that runs one part of `entry_keys` in isolation.

    Built from the same layer classes as `MobileNetV3Subnet`, so a part times what it costs inside
    a subnet (minus the runtime's per-call overhead, which the lookup table's constant absorbs).
    """
    import torch.nn as nn

    from hwnas.families.layers import MBConv, ResidualBlock, init_weights
    from hwnas.families.ofa_mbv3.network import MobileNetV3Subnet
    from hwnas.families.ofa_mbv3.space import SearchSpace

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


