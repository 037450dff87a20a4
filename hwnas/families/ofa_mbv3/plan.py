"""The layout of Once-for-All's ``OFAMobileNetV3`` at a width multiplier: the one description the
supernet, the static subnet (`hwnas.supernet.ofa_mbv3`), the analytic counter and the latency
layouts are built from. Torch-free, so costs and predictors load without torch."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator, Sequence

from hwnas.channels import make_divisible
from hwnas.families.mbconv import BlockSpec
from hwnas.space import MAX_DEPTH

__all__ = ["BASE_WIDTHS", "STAGE_STRIDES", "STAGE_ACTS", "STAGE_SE", "StageSpec", "MBV3Plan",
           "mbv3_plan", "iter_blocks"]

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


