"""TinyConvNet's additive cost layout (`hwnas.families.parts`): the stem (keyed by r), the 4
searchable blocks (keyed by r, their kernel and expand genes; a block runs while its stage's depth
reaches it) and the head (pooling + classifier, keyed by r). Torch-free except `entry_module`.

Its cost vocabulary is its own (`cost_names`: 1x1 and k x k MACs, no squeeze-excite), as a
non-MBConv family's would be: the latency predictors read the names from the layout."""

from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.families.parts import REQUIRED_COSTS, CostLayout, Part, conv_cost, mbconv_cost, out_size

from .plan import ACT, ALL_BLOCKS, KS_CHOICES, N_SLOTS, N_STAGES, STAGE_WIDTHS, STEM

__all__ = ["TinyCostLayout"]

_D0 = 1 + 2 * N_SLOTS  # first depth column


class TinyCostLayout(CostLayout):
    n_stages = N_STAGES
    cost_names = ("macs_1x1", "macs_kxk") + REQUIRED_COSTS
    kernel_split = "macs_kxk"
    kernels = KS_CHOICES

    def __init__(self, family: Any, width_mult: float, n_classes: int) -> None:
        super().__init__(family, width_mult, n_classes)
        self._parts = ((Part("stem", -1, 0, (0,)),)
                       + tuple(Part("block", b.stage, b.index, (0, 1 + b.slot, 1 + N_SLOTS + b.slot))
                               for b in ALL_BLOCKS)
                       + (Part("head", N_STAGES, 0, (0,)),))

    @property
    def parts(self) -> tuple[Part, ...]:
        return self._parts

    def active(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        blocks = np.stack([m[:, _D0 + b.stage] > b.index for b in ALL_BLOCKS], axis=1)
        ones = np.ones((len(m), 1), dtype=bool)
        return np.concatenate([ones, blocks, ones], axis=1)

    def cost(self, p: int, key: tuple[int, ...]) -> np.ndarray:
        return _cost(self.n_classes, p, tuple(int(v) for v in key))

    def kernel(self, p: int, key: tuple[int, ...]) -> int:
        return int(key[1]) if self._parts[p].kind == "block" else 0

    def entry(self, p: int, key: tuple[int, ...]) -> tuple[Any, ...]:
        part, r = self._parts[p], int(key[0])
        if part.kind == "stem":
            return ("stem", -1, 0, 3, 3, 0, r)
        if part.kind == "head":
            return ("head", N_STAGES, 0, STAGE_WIDTHS[-1], 0, 0, _sizes(r)[1])
        b = ALL_BLOCKS[p - 1]
        return ("block", b.stage, b.index, b.in_channels, int(key[1]), int(key[2]), _block_input(b, r))

    def entry_module(self, entry: Mapping[str, Any]):
        from hwnas.families.layers import MBConv, ResidualBlock, conv_bn_act, expand_channels, init_weights

        part, size = str(entry["part"]), int(entry["size"])
        if part == "stem":
            module, channels = conv_bn_act(3, STEM, 3, stride=2, act=ACT), 3
        elif part == "head":
            module, channels = _head_module(self.n_classes), STAGE_WIDTHS[-1]
        elif part == "block":
            b = next((b for b in ALL_BLOCKS if (b.stage, b.index) == (int(entry["stage"]), int(entry["j"]))), None)
            if b is None:
                raise InputError(f"{self.family_name} has no block at stage {entry['stage']} position {entry['j']}")
            layer = MBConv(b.in_channels, b.out_channels, int(entry["k"]), b.stride,
                           expand_channels(b.in_channels, int(entry["e"])), ACT, False)
            module, channels = ResidualBlock(layer, b.residual), b.in_channels
        else:
            raise InputError(f"unknown part {part!r}; use 'stem', 'block' or 'head'")
        init_weights(module)
        return module.eval(), (1, channels, size, size)


def _sizes(r: int) -> tuple[int, int]:
    """(stem output size = stage 0's size, head input size) at resolution r."""
    stem = out_size(r, 3, 2)
    return stem, out_size(stem, 3, 2)


def _block_input(b, r: int) -> int:
    """A block's input size: stage 0 keeps the stem's size, stage 1's first block halves it."""
    stem_size, head_size = _sizes(r)
    return stem_size if b.stage == 0 or b.index == 0 else head_size


def _head_module(n_classes: int):
    import torch.nn as nn

    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(STAGE_WIDTHS[-1], n_classes))


@functools.lru_cache(maxsize=4096)
def _cost(n_classes: int, p: int, key: tuple[int, ...]) -> np.ndarray:
    r = key[0]
    stem_size, head_size = _sizes(r)
    if p == 0:
        conv = conv_cost(3, STEM, 3, r, stem_size)
        return np.array([0.0, 0.0, conv[0], conv[1], conv[2], 1.0, 0.0])
    if p == len(ALL_BLOCKS) + 1:  # pooling reads the last map; the classifier as a 1x1 conv
        fc = conv_cost(STAGE_WIDTHS[-1], n_classes, 1, 1, 1, bias=True)
        pool = 4 * STAGE_WIDTHS[-1] * head_size * head_size
        return np.array([0.0, 0.0, fc[0], fc[1] + pool, fc[2], 1.0, 0.0])
    b = ALL_BLOCKS[p - 1]
    pw, dw, _se, *rest = mbconv_cost(b.in_channels, b.out_channels, key[1], key[2], b.stride, _block_input(b, r),
                                     False, b.residual)  # no squeeze-excite: its MACs are 0
    return np.array([pw, dw, *rest])
