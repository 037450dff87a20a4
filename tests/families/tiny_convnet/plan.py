"""The layout of TinyConvNet, the test-only family: the one description its supernet, static subnet,
cost counter, cost layout and checkpoint layout are built from.

Network: first_conv (3x3 s2, BN, ReLU) -> 2 stages of up to 2 elastic MBConv blocks (ReLU, no SE;
stage 0 keeps the size, stage 1 halves it) -> global average pool -> classifier. No fixed first
block and no feature mix (unlike the MobileNets), and a stage may run one block only. Torch-free.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from hwnas.families.mbconv import BlockSpec

ACT = "relu"
STEM = 8
STAGE_WIDTHS = (8, 16)
STAGE_STRIDES = (1, 2)
MAX_DEPTH = 2
N_STAGES = len(STAGE_WIDTHS)
N_SLOTS = MAX_DEPTH * N_STAGES  # slot = MAX_DEPTH * stage + index
KS_CHOICES = (3, 5)
E_CHOICES = (2, 4)
D_CHOICES = (1, 2)


def iter_blocks(depths: Sequence[int]) -> Iterator[BlockSpec]:
    """The blocks a subnet with these stage depths runs, in order (all of them: `MAX_DEPTH` each)."""
    in_channels = STEM
    for s, (width, stride) in enumerate(zip(STAGE_WIDTHS, STAGE_STRIDES)):
        for j in range(int(depths[s])):
            yield BlockSpec(s, j, MAX_DEPTH * s + j, in_channels, width, stride if j == 0 else 1, ACT, False)
            in_channels = width


ALL_BLOCKS = tuple(iter_blocks([MAX_DEPTH] * N_STAGES))
