"""The layout of Once-for-All's ``OFAProxylessNASNets``: the one description the supernet, the static
subnet, the analytic counter and the checkpoint layout are all built from.

Network: first_conv (3x3 s2, BN, ReLU6) -> first block (fixed MBConv: 3x3 depthwise, expand 1, never
a shortcut) -> 6 stages of elastic MBConv blocks (ReLU6, no SE; the last stage is one block) ->
feature_mix_layer (1x1 conv, BN, ReLU6, *before* pooling) -> global average pool -> classifier.

Importing this module needs no torch; the channel arithmetic (`hwnas.channels`) is imported
when a plan is first computed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator, Sequence

from hwnas.families.mbconv import BlockSpec

__all__ = ["BASE_WIDTHS", "STAGE_STRIDES", "STAGE_DEPTHS", "MAX_DEPTH", "N_STAGES", "N_SLOTS",
           "BN_MOMENTUM", "BN_EPS", "ACT", "ProxylessPlan", "BlockSpec", "proxyless_plan", "slot", "iter_blocks",
           "ofa_layout"]

ACT = "relu6"  # ProxylessNAS uses ReLU6 everywhere, and no squeeze-and-excitation
# OFA's "ProxylessNAS stage width": stem, first block, 6 stages, feature mix.
BASE_WIDTHS = (32, 16, 24, 40, 80, 96, 192, 320, 1280)
STAGE_STRIDES = (2, 2, 2, 1, 2, 1)
#: blocks each stage holds in the supernet (OFA: max(depth_list) for 5 stages, then 1)
STAGE_DEPTHS = (4, 4, 4, 4, 4, 1)
MAX_DEPTH = 4
N_STAGES = len(STAGE_DEPTHS)
N_SLOTS = MAX_DEPTH * (N_STAGES - 1) + STAGE_DEPTHS[-1]  # 21: slot 4*s + j
#: OFA's default bn_param for OFAProxylessNASNets (momentum, eps)
BN_MOMENTUM, BN_EPS = 0.1, 1e-3


@dataclass(frozen=True)
class ProxylessPlan:
    """Channel widths of every fixed part and stage at one width multiplier. `stem` and
    `first_block` carry the names `hwnas.families.mbconv.stem_params_macs` costs them by."""

    width_mult: float
    stem: int
    first_block: int
    stage_widths: tuple[int, ...]
    feature_mix: int


@functools.lru_cache(maxsize=None)
def proxyless_plan(width_mult: float) -> ProxylessPlan:
    from hwnas.channels import make_divisible

    w = [make_divisible(b * width_mult) for b in BASE_WIDTHS]
    return ProxylessPlan(float(width_mult), w[0], w[1], tuple(w[2:-1]), w[-1])


def slot(stage: int, index: int) -> int:
    return MAX_DEPTH * stage + index


def iter_blocks(plan: ProxylessPlan, depths: Sequence[int]) -> Iterator[BlockSpec]:
    """The searchable blocks in order: the first ``min(depths[s], STAGE_DEPTHS[s])`` of each stage
    (OFA's ``runtime_depth``; the last stage is one block whatever its depth gene says)."""
    in_channels = plan.first_block
    for s, (width, stride) in enumerate(zip(plan.stage_widths, STAGE_STRIDES)):
        for j in range(min(int(depths[s]), STAGE_DEPTHS[s])):
            yield BlockSpec(s, j, slot(s, j), in_channels, width, stride if j == 0 else 1, ACT, False)
            in_channels = width


def ofa_layout(width_mult: float, n_classes: int, kernel_sizes: Sequence[int],
               expand_ratios: Sequence[int]) -> dict[str, tuple[int, ...]]:
    """Every key of OFA's ``OFAProxylessNASNets.state_dict()`` and its shape, in OFA's order."""
    from hwnas.channels import expand_channels

    plan = proxyless_plan(width_mult)
    out: dict[str, tuple[int, ...]] = {}

    def bn(prefix: str, c: int) -> None:
        for name in ("weight", "bias", "running_mean", "running_var"):
            out[f"{prefix}.{name}"] = (c,)
        out[f"{prefix}.num_batches_tracked"] = ()

    out["first_conv.conv.weight"] = (plan.stem, 3, 3, 3)
    bn("first_conv.bn", plan.stem)
    out["blocks.0.conv.depth_conv.conv.weight"] = (plan.stem, 1, 3, 3)
    bn("blocks.0.conv.depth_conv.bn", plan.stem)
    out["blocks.0.conv.point_linear.conv.weight"] = (plan.first_block, plan.stem, 1, 1)
    bn("blocks.0.conv.point_linear.bn", plan.first_block)
    ks = sorted(set(kernel_sizes))
    for i, b in enumerate(iter_blocks(plan, STAGE_DEPTHS), start=1):
        p = f"blocks.{i}.conv"
        mid = expand_channels(b.in_channels, max(expand_ratios))
        out[f"{p}.inverted_bottleneck.conv.conv.weight"] = (mid, b.in_channels, 1, 1)
        bn(f"{p}.inverted_bottleneck.bn.bn", mid)
        for small, large in zip(ks, ks[1:]):
            out[f"{p}.depth_conv.conv.{large}to{small}_matrix"] = (small * small, small * small)
        out[f"{p}.depth_conv.conv.conv.weight"] = (mid, 1, ks[-1], ks[-1])
        bn(f"{p}.depth_conv.bn.bn", mid)
        out[f"{p}.point_linear.conv.conv.weight"] = (b.out_channels, mid, 1, 1)
        bn(f"{p}.point_linear.bn.bn", b.out_channels)
    out["feature_mix_layer.conv.weight"] = (plan.feature_mix, plan.stage_widths[-1], 1, 1)
    bn("feature_mix_layer.bn", plan.feature_mix)
    out["classifier.linear.weight"] = (n_classes, plan.feature_mix)
    out["classifier.linear.bias"] = (n_classes,)
    return out
