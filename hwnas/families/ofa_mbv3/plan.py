"""The layout of Once-for-All's ``OFAMobileNetV3`` at a width multiplier: the one description the
supernet, the static subnet (`network`), the analytic counter (`costs`), the latency layouts and
the checkpoint layout (`ofa_layout`) are built from. Torch-free, so costs and predictors load
without torch."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from hwnas.channels import expand_channels, make_divisible, se_channels
from hwnas.families.mbconv import BlockSpec

__all__ = ["N_STAGES", "MAX_DEPTH", "N_SLOTS", "RUNS", "slots_used", "KS_CHOICES", "E_CHOICES", "D_CHOICES", "BASE_WIDTHS",
           "STAGE_STRIDES", "STAGE_ACTS", "STAGE_SE", "StageSpec", "MBV3Plan", "mbv3_plan", "iter_blocks",
           "ofa_layout"]

#: 5 searchable stages of up to 4 blocks: 20 gene slots, slot ``4*s + j`` (stage s, block j)
N_STAGES = 5
MAX_DEPTH = 4
N_SLOTS = N_STAGES * MAX_DEPTH
_RUNS = np.arange(MAX_DEPTH + 1)[:, None] > np.arange(MAX_DEPTH)  # [depth, j]: slot j runs at that depth
RUNS = tuple(tuple(bool(v) for v in row) for row in _RUNS)  # the same, for one arch without numpy


def slots_used(d: Any) -> np.ndarray:
    """bool [n, 20] of depth rows `d` (int [n, 5]): slot ``4*s + j`` runs while ``j < d[s]`` (the one
    statement of which slots a subnet runs; depths outside 0..4 are clipped)."""
    d = np.clip(np.asarray(d, dtype=np.int64), 0, MAX_DEPTH)
    return _RUNS[d].reshape(len(d), N_SLOTS)
#: Once-for-All's choices (the published ``ofa_mbv3_d234_e346_k357`` supernets)
KS_CHOICES = (3, 5, 7)
E_CHOICES = (3, 4, 6)
D_CHOICES = (2, 3, 4)

# Once-for-All's MobileNetV3 constants: stem, first block, 5 stages, final expand, feature mix.
BASE_WIDTHS = (16, 16, 24, 40, 80, 112, 160, 960, 1280)
STAGE_STRIDES = (2, 2, 2, 1, 2)
STAGE_ACTS = ("relu", "relu", "h_swish", "h_swish", "h_swish")
STAGE_SE = (False, True, False, True, True)


@dataclass(frozen=True)
class StageSpec:
    width: int
    stride: int
    act: str
    use_se: bool


@dataclass(frozen=True)
class MBV3Plan:
    """Channel widths of every fixed part and stage at one width multiplier."""

    width_mult: float
    stem: int
    first_block: int
    stages: tuple[StageSpec, ...]
    final_expand: int
    feature_mix: int


@functools.lru_cache(maxsize=None)
def mbv3_plan(width_mult: float = 1.0) -> MBV3Plan:
    widths = [make_divisible(b * width_mult) for b in BASE_WIDTHS]
    stages = tuple(StageSpec(*spec) for spec in zip(widths[2:7], STAGE_STRIDES, STAGE_ACTS, STAGE_SE))
    return MBV3Plan(float(width_mult), widths[0], widths[1], stages, widths[7], widths[8])


def iter_blocks(plan: MBV3Plan, depths: Sequence[int]) -> Iterator[BlockSpec]:
    """The searchable blocks in order, the first `depths[s]` of each stage."""
    in_channels = plan.first_block
    for s, stage in enumerate(plan.stages):
        for j in range(depths[s]):
            yield BlockSpec(s, j, MAX_DEPTH * s + j, in_channels, stage.width,
                            stage.stride if j == 0 else 1, stage.act, stage.use_se)
            in_channels = stage.width


_BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def _bn(prefix: str, c: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    for name in _BN:
        yield f"{prefix}.{name}", () if name == "num_batches_tracked" else (c,)


def ofa_layout(width_mult: float = 1.0, n_classes: int = 1000) -> dict[str, tuple[int, ...]]:
    """Every key of Once-for-All's ``OFAMobileNetV3(width_mult, ks_list=[3,5,7],
    expand_ratio_list=[3,4,6], depth_list=[2,3,4])`` state dict and its shape, from the plan.

    At W=1.0 (``BN`` = ``weight, bias, running_mean, running_var, num_batches_tracked``)::

        first_conv.conv.weight                               [16, 3, 3, 3]   stem, stride 2
        first_conv.bn.BN                                     [16]
        blocks.0.conv.depth_conv.conv.weight                 [16, 1, 3, 3]   fixed first block: no
        blocks.0.conv.depth_conv.bn.BN                                        expand conv, no SE, plain
        blocks.0.conv.point_linear.conv.weight               [16, 16, 1, 1]  (not Dynamic*) layers
        blocks.0.conv.point_linear.bn.BN
        blocks.N.conv.inverted_bottleneck.conv.conv.weight   [mid, in, 1, 1] N = 1..20: stage (N-1)//4,
        blocks.N.conv.inverted_bottleneck.bn.bn.BN           [mid]           block (N-1)%4; mid is the
        blocks.N.conv.depth_conv.conv.conv.weight            [mid, 1, 7, 7]  e=6 width of the block's
        blocks.N.conv.depth_conv.conv.7to5_matrix            [25, 25]        largest input
        blocks.N.conv.depth_conv.conv.5to3_matrix            [9, 9]          (kernel transformation)
        blocks.N.conv.depth_conv.bn.bn.BN                    [mid]
        blocks.N.conv.depth_conv.se.fc.reduce.{weight,bias}  [mid/4, mid, 1, 1], [mid/4]   stages 2, 4, 5
        blocks.N.conv.depth_conv.se.fc.expand.{weight,bias}  [mid, mid/4, 1, 1], [mid]     only
        blocks.N.conv.point_linear.conv.conv.weight          [out, mid, 1, 1]
        blocks.N.conv.point_linear.bn.bn.BN                  [out]
        (blocks.N.shortcut is an IdentityLayer or None: no tensors)
        final_expand_layer.conv.weight                       [960, 160, 1, 1]
        final_expand_layer.bn.BN                             [960]
        feature_mix_layer.conv.weight                        [1280, 960, 1, 1]  no BN
        classifier.linear.{weight,bias}                      [1000, 1280], [1000]

    475 tensors at either width. `network` computes the same subnets as Once-for-All's: same kernel
    transformation (centre crop of the next larger kernel through the ``KtoK'`` matrix, chained
    7 -> 5 -> 3), same BN/SE slicing (first channels; SE bottleneck ``make_divisible(mid // 4, 8)``
    of the active hidden width)."""
    plan = mbv3_plan(width_mult)
    out: dict[str, tuple[int, ...]] = {"first_conv.conv.weight": (plan.stem, 3, 3, 3)}
    out.update(_bn("first_conv.bn", plan.stem))
    out["blocks.0.conv.depth_conv.conv.weight"] = (plan.stem, 1, 3, 3)
    out.update(_bn("blocks.0.conv.depth_conv.bn", plan.stem))
    out["blocks.0.conv.point_linear.conv.weight"] = (plan.first_block, plan.stem, 1, 1)
    out.update(_bn("blocks.0.conv.point_linear.bn", plan.first_block))
    for n, b in enumerate(iter_blocks(plan, [max(D_CHOICES)] * N_STAGES), start=1):
        p, mid = f"blocks.{n}.conv", expand_channels(b.in_channels, max(E_CHOICES))
        out[f"{p}.inverted_bottleneck.conv.conv.weight"] = (mid, b.in_channels, 1, 1)
        out.update(_bn(f"{p}.inverted_bottleneck.bn.bn", mid))
        out[f"{p}.depth_conv.conv.conv.weight"] = (mid, 1, max(KS_CHOICES), max(KS_CHOICES))
        for large, small in zip(KS_CHOICES[:0:-1], KS_CHOICES[-2::-1]):
            out[f"{p}.depth_conv.conv.{large}to{small}_matrix"] = (small * small, small * small)
        out.update(_bn(f"{p}.depth_conv.bn.bn", mid))
        if b.use_se:
            se = se_channels(mid)
            out[f"{p}.depth_conv.se.fc.reduce.weight"] = (se, mid, 1, 1)
            out[f"{p}.depth_conv.se.fc.reduce.bias"] = (se,)
            out[f"{p}.depth_conv.se.fc.expand.weight"] = (mid, se, 1, 1)
            out[f"{p}.depth_conv.se.fc.expand.bias"] = (mid,)
        out[f"{p}.point_linear.conv.conv.weight"] = (b.out_channels, mid, 1, 1)
        out.update(_bn(f"{p}.point_linear.bn.bn", b.out_channels))
    out["final_expand_layer.conv.weight"] = (plan.final_expand, plan.stages[-1].width, 1, 1)
    out.update(_bn("final_expand_layer.bn", plan.final_expand))
    out["feature_mix_layer.conv.weight"] = (plan.feature_mix, plan.final_expand, 1, 1)
    out["classifier.linear.weight"] = (n_classes, plan.feature_mix)
    out["classifier.linear.bias"] = (n_classes,)
    return out
