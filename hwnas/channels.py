"""Once-for-All's channel arithmetic, shared by every family's layers, plans and cost counters.

Kept free of torch: plans and counters run without building a network (and without importing torch).
"""

from __future__ import annotations

__all__ = ["CHANNEL_DIVISIBLE", "SE_REDUCTION", "make_divisible", "expand_channels", "se_channels"]

CHANNEL_DIVISIBLE = 8
SE_REDUCTION = 4


def make_divisible(v: float, divisor: int = CHANNEL_DIVISIBLE, min_val: int | None = None) -> int:
    """Once-for-All's rounding: nearest multiple of `divisor`, at least `min_val`, and never more
    than 10% below `v`. Must stay bit-identical to OFA's, or channel counts drift from OFA's nets."""
    if min_val is None:
        min_val = divisor
    new_v = max(min_val, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return int(new_v)


def expand_channels(in_channels: int, expand_ratio: float) -> int:
    """Hidden width of an MBConv block: computed from the block's *own* input width."""
    return make_divisible(round(in_channels * expand_ratio))


def se_channels(channels: int) -> int:
    """Bottleneck width of squeeze-and-excitation on `channels`."""
    return make_divisible(channels // SE_REDUCTION)
