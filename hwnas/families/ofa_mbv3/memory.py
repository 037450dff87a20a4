"""The tensors an OFA-MobileNetV3 subnet allocates and the weights it stores, in execution order
(`hwnas.families.memory`): stem, fixed first block, the searchable MBConv blocks
(`mbconv_block`, `mbconv_chain`), head; each part's trace is built once per shape and appended."""

from __future__ import annotations

import functools
from typing import Sequence

from hwnas.families.memory import TensorTrace, activation, conv_bn, linear, mbconv_chain
from hwnas.families.ofa_mbv3.plan import N_SLOTS, iter_blocks, mbv3_plan
from hwnas.families.parts import out_size

__all__ = ["memory_trace"]


def memory_trace(row: Sequence[int], width_mult: float, n_classes: int, precision: str = "fp32") -> TensorTrace:
    """The trace of flat row `row` (r, ks_0..19, e_0..19, d_0..4) at batch 1."""
    plan = mbv3_plan(width_mult)
    r, ks, es, d = row[0], row[1:1 + N_SLOTS], row[1 + N_SLOTS:1 + 2 * N_SLOTS], row[1 + 2 * N_SLOTS:]
    return mbconv_chain(r, _stem(width_mult, r, precision), iter_blocks(plan, d), ks, es,
                        lambda s: _head(width_mult, n_classes, s, precision), precision)


@functools.lru_cache(maxsize=256)
def _stem(width_mult: float, r: int, precision: str) -> TensorTrace:
    """Stem conv + BN + h_swish, then the fixed first block (depthwise, relu, pointwise, residual)."""
    plan, s = mbv3_plan(width_mult), out_size(r, 3, 2)
    tr = TensorTrace(precision)
    x = tr.input(3 * r * r)
    x = activation(tr, conv_bn(tr, x, 3, plan.stem, 3, s), "h_swish", plan.stem * s * s)
    y = activation(tr, conv_bn(tr, x, plan.stem, plan.stem, 3, s, groups=plan.stem), "relu", plan.stem * s * s)
    tr.op((x, conv_bn(tr, y, plan.stem, plan.first_block, 1, s)), plan.first_block * s * s)
    return tr


@functools.lru_cache(maxsize=256)
def _head(width_mult: float, n_classes: int, s: int, precision: str) -> TensorTrace:
    """Final expand + h_swish, global average pool, feature mix + h_swish, classifier."""
    plan = mbv3_plan(width_mult)
    tr = TensorTrace(precision)
    x = tr.input(plan.stages[-1].width * s * s)
    x = activation(tr, conv_bn(tr, x, plan.stages[-1].width, plan.final_expand, 1, s), "h_swish",
                   plan.final_expand * s * s)
    x = tr.op((x,), plan.final_expand)
    x = activation(tr, conv_bn(tr, x, plan.final_expand, plan.feature_mix, 1, 1, bn=False), "h_swish",
                   plan.feature_mix)
    linear(tr, x, plan.feature_mix, n_classes)
    return tr
