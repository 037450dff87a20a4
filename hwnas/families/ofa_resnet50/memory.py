"""The tensors an OFA-ResNet50 subnet allocates and the weights it stores, in execution order
(`hwnas.families.memory`): the input stem (with its optional residual conv), max pooling (whose
int64 indices the program allocates too), the bottlenecks (shortcut first: average pool, 1x1 conv,
BN), global average pool, classifier."""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

from hwnas.families.genes import GeneArch
from hwnas.families.memory import TensorTrace, activation, conv_bn, linear
from hwnas.families.ofa_resnet50.plan import BlockSpec, SubnetSpec
from hwnas.families.parts import out_size

__all__ = ["memory_trace", "row_spec"]


def memory_trace(spec: SubnetSpec, r: int, n_classes: int, precision: str = "fp32") -> TensorTrace:
    """The trace of the subnet `spec` (`OFAResNet50Family.arch_spec`) at resolution `r`, batch 1."""
    tr = TensorTrace(precision)
    tr.input(3 * r * r)
    tr.append(_stem(spec.stem_mid, spec.stem_block, spec.stem_out, r, precision))
    s = out_size(out_size(r, 3, 2), 3, 2)
    for b in spec.blocks:
        tr.append(_bottleneck(b, s, precision))
        s = out_size(s, 3, b.stride)
    tr.append(_head(spec.features, n_classes, s, precision))
    return tr


def _conv_bn_relu(tr: TensorTrace, x: int, cin: int, cout: int, k: int, size_out: int) -> int:
    return activation(tr, conv_bn(tr, x, cin, cout, k, size_out), "relu", cout * size_out * size_out)


@functools.lru_cache(maxsize=256)
def _stem(mid: int, residual: bool, out: int, r: int, precision: str) -> TensorTrace:
    s = out_size(r, 3, 2)
    tr = TensorTrace(precision)
    x = tr.input(3 * r * r)
    x = _conv_bn_relu(tr, x, 3, mid, 3, s)
    if residual:
        x = tr.op((_conv_bn_relu(tr, x, mid, mid, 3, s), x), mid * s * s)
    x = _conv_bn_relu(tr, x, mid, out, 3, s)
    p = out_size(s, 3, 2)
    tr.op((x,), out * p * p, extra=(8 * out * p * p,))  # max pooling: values and int64 indices
    return tr


@functools.lru_cache(maxsize=4096)
def _bottleneck(b: BlockSpec, s: int, precision: str) -> TensorTrace:
    so = out_size(s, 3, b.stride)
    tr = TensorTrace(precision)
    x = tr.input(b.in_channels * s * s)
    shortcut = x
    if b.conv_shortcut:
        pooled = math.ceil(s / b.stride)
        shortcut = tr.op((x,), b.in_channels * pooled * pooled)
        shortcut = conv_bn(tr, shortcut, b.in_channels, b.out_channels, 1, pooled)
    y = _conv_bn_relu(tr, x, b.in_channels, b.mid_channels, 1, s)
    y = _conv_bn_relu(tr, y, b.mid_channels, b.mid_channels, 3, so)
    y = conv_bn(tr, y, b.mid_channels, b.out_channels, 1, so)
    y = tr.op((y, shortcut), b.out_channels * so * so)
    activation(tr, y, "relu", b.out_channels * so * so)
    return tr


@functools.lru_cache(maxsize=256)
def _head(features: int, n_classes: int, s: int, precision: str) -> TensorTrace:
    tr = TensorTrace(precision)
    x = tr.input(features * s * s)
    linear(tr, tr.op((x,), features), features, n_classes, flatten=False)
    return tr


def row_spec(family: Any, row: Sequence[int], width_mult: float) -> tuple[SubnetSpec, int]:
    """(the layers, the resolution) of flat row `row` (r, d_0..4, e_0..17, w_0..5)."""
    arch = GeneArch.from_codes(family, row, width_mult)
    return family.arch_spec(arch), arch.r
