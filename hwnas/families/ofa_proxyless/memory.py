"""The tensors an OFA-ProxylessNAS subnet allocates and the weights it stores, in execution order
(`hwnas.families.memory`): stem + fixed first block, the searchable MBConv blocks
(`mbconv_block`: ReLU6, no SE), feature mix before pooling, classifier."""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from hwnas.families.memory import TensorTrace, activation, conv_bn, linear, mbconv_chain
from hwnas.families.ofa_proxyless.plan import ACT, N_SLOTS, STAGE_DEPTHS, iter_blocks, proxyless_plan
from hwnas.families.parts import out_size

__all__ = ["memory_trace"]


def memory_trace(row: Sequence[int], width_mult: float, n_classes: int, precision: str = "fp32") -> TensorTrace:
    """The trace of flat row `row` (r, ks_0..20, e_0..20, d_0..5) at batch 1."""
    plan = proxyless_plan(width_mult)
    r, ks, es = row[0], row[1:1 + N_SLOTS], row[1 + N_SLOTS:1 + 2 * N_SLOTS]
    d = np.minimum(np.asarray(row[1 + 2 * N_SLOTS:]), STAGE_DEPTHS)
    return mbconv_chain(r, _stem(width_mult, r, precision), iter_blocks(plan, d), ks, es,
                        lambda s: _head(width_mult, n_classes, s, precision), precision)


@functools.lru_cache(maxsize=256)
def _stem(width_mult: float, r: int, precision: str) -> TensorTrace:
    """First conv + BN + ReLU6, then the fixed first block (depthwise, ReLU6, pointwise; no shortcut)."""
    plan, s = proxyless_plan(width_mult), out_size(r, 3, 2)
    tr = TensorTrace(precision)
    x = tr.input(3 * r * r)
    x = activation(tr, conv_bn(tr, x, 3, plan.stem, 3, s), ACT, plan.stem * s * s)
    y = activation(tr, conv_bn(tr, x, plan.stem, plan.stem, 3, s, groups=plan.stem), ACT, plan.stem * s * s)
    conv_bn(tr, y, plan.stem, plan.first_block, 1, s)
    return tr


@functools.lru_cache(maxsize=256)
def _head(width_mult: float, n_classes: int, s: int, precision: str) -> TensorTrace:
    """Feature mix (1x1 conv + BN + ReLU6 on the map), global average pool, classifier."""
    plan = proxyless_plan(width_mult)
    last, fm = plan.stage_widths[-1], plan.feature_mix
    tr = TensorTrace(precision)
    x = tr.input(last * s * s)
    x = activation(tr, conv_bn(tr, x, last, fm, 1, s), ACT, fm * s * s)
    x = tr.op((x,), fm)
    linear(tr, x, fm, n_classes, flatten=False)
    return tr
