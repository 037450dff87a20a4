"""OFA-ResNet50's additive cost layout (`hwnas.families.parts`).

Parts: the stem (3x3 s2 conv, the residual 3x3 conv when d_0 is the maximum, 3x3 conv, max pool;
keyed by r, d_0, w_0, w_1), the 18 bottleneck positions and the head (global pool + classifier;
keyed by r, w_5). A bottleneck's shapes depend on r, its stage's width gene, its expand gene and
whether it is its stage's first block -- which also reads the previous stage's width gene (the
stem's w_1 for stage 0), as its input width and shortcut conv. It runs while its stage's depth
(base depth + d_{s+1}) reaches it. Spatial sizes depend on r alone. Torch-free except `entry_module`.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.families.ofa_resnet50.plan import (BASE_DEPTHS, BLOCK_POS, BLOCK_STAGE, D_CHOICES, MID,
                                              N_BLOCKS, STAGE_STRIDES, STAGE_WIDTHS, STEM_MID, STEM_OUT,
                                              BlockSpec)
from hwnas.families.parts import CostLayout, Part, conv_cost

__all__ = ["ResNet50CostLayout"]

_D, _E, _W = 1, 6, 6 + N_BLOCKS  # first flat column of each gene group
_N_STAGES = len(BASE_DEPTHS)


def _out(size: int, stride: int) -> int:
    return (size - 1) // stride + 1


@functools.lru_cache(maxsize=4096)
def _sizes(r: int) -> tuple[int, int, tuple[int, ...], int]:
    """(stem conv output size, block input size after max pool, input size of each block slot,
    head input size) at r."""
    stem = _out(r, 2)
    size = _out(stem, 2)
    blocks = []
    for s, j in zip(BLOCK_STAGE, BLOCK_POS):
        blocks.append(size)
        size = _out(size, STAGE_STRIDES[s] if j == 0 else 1)
    return stem, _out(stem, 2), tuple(blocks), size


def _in_channels(stage: int, j: int, key: tuple[int, ...]) -> int:
    if j > 0:
        return STAGE_WIDTHS[stage][key[1]]
    return STEM_OUT[key[1]] if stage == 0 else STAGE_WIDTHS[stage - 1][key[1]]


class ResNet50CostLayout(CostLayout):
    n_stages = _N_STAGES
    kernels = (3,)
    entry_columns = ("part", "stage", "j", "in_ch", "mid_ch", "out_ch", "size")

    def __init__(self, family: Any, width_mult: float, n_classes: int) -> None:
        super().__init__(family, width_mult, n_classes)
        blocks = []
        for i, (s, j) in enumerate(zip(BLOCK_STAGE, BLOCK_POS)):
            w_col = _W + s + 2
            cols = (0, w_col - 1, w_col, _E + i) if j == 0 else (0, w_col, _E + i)
            blocks.append(Part("block", s, j, cols))
        self._parts = ((Part("stem", -1, 0, (0, _D, _W, _W + 1)),) + tuple(blocks)
                       + (Part("head", _N_STAGES, 0, (0, _W + 5)),))
        self._stage = np.asarray(BLOCK_STAGE)
        self._pos = np.asarray(BLOCK_POS)

    @property
    def parts(self) -> tuple[Part, ...]:
        return self._parts

    def active(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        depth = np.asarray(BASE_DEPTHS)[None, :] + m[:, _D + 1:_D + 1 + _N_STAGES]
        blocks = self._pos[None, :] < depth[:, self._stage]
        ones = np.ones((len(m), 1), dtype=bool)
        return np.concatenate([ones, blocks, ones], axis=1)

    def cost(self, p: int, key: tuple[int, ...]) -> np.ndarray:
        return _cost(self.n_classes, p, tuple(int(v) for v in key))

    def entry(self, p: int, key: tuple[int, ...]) -> tuple[Any, ...]:
        key = tuple(int(v) for v in key)
        stem, pooled, blocks, head = _sizes(key[0])
        part = self._parts[p]
        if part.kind == "stem":
            return ("stem", -1, int(key[1] == max(D_CHOICES)), 3, STEM_MID[key[2]], STEM_OUT[key[3]], key[0])
        if part.kind == "head":
            return ("head", _N_STAGES, 0, STAGE_WIDTHS[-1][key[1]], 0, 0, head)
        s, j = part.stage, part.index
        w, e = key[-2], key[-1]
        return ("block", s, min(j, 1), _in_channels(s, j, key), MID[s][w][e], STAGE_WIDTHS[s][w],
                blocks[p - 1])

    def entry_module(self, entry: Mapping[str, Any]):
        import torch.nn as nn

        from hwnas.families.ofa_resnet50.network import Bottleneck
        from hwnas.families.layers import ResidualBlock, conv_bn_act, init_weights

        part, size = str(entry["part"]), int(entry["size"])
        cin, mid, cout = int(entry["in_ch"]), int(entry["mid_ch"]), int(entry["out_ch"])
        if part == "stem":
            layers = [conv_bn_act(3, mid, 3, 2, act="relu")]
            if int(entry["j"]):
                layers.append(ResidualBlock(conv_bn_act(mid, mid, 3, act="relu"), True))
            layers += [conv_bn_act(mid, cout, 3, act="relu"), nn.MaxPool2d(3, 2, 1)]
            module = nn.Sequential(*layers)
            shape = (1, 3, size, size)
        elif part == "head":
            module = _head(cin, self.n_classes)
            shape = (1, cin, size, size)
        elif part == "block":
            stage, j = int(entry["stage"]), int(entry["j"])
            if not 0 <= stage < _N_STAGES:
                raise InputError(f"{self.family_name} has no stage {stage}")
            first = j == 0
            module = Bottleneck(BlockSpec(0, stage, cin, mid, cout, STAGE_STRIDES[stage] if first else 1, first))
            shape = (1, cin, size, size)
        else:
            raise InputError(f"unknown part {part!r}; use 'stem', 'block' or 'head'")
        init_weights(module)
        return module.eval(), shape


def _head(features: int, n_classes: int):
    import torch.nn as nn

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(features, n_classes)

        def forward(self, x):
            return self.linear(x.mean((2, 3)))

    return Head()


@functools.lru_cache(maxsize=65536)
def _cost(n_classes: int, p: int, key: tuple[int, ...]) -> np.ndarray:
    r = key[0]
    stem_size, pooled, blocks, head_size = _sizes(r)
    if p == 0:
        mid, out = STEM_MID[key[2]], STEM_OUT[key[3]]
        total = conv_cost(3, mid, 3, r, stem_size) + conv_cost(mid, out, 3, stem_size, stem_size)
        convs, act = 2, 0.0
        if key[1] == max(D_CHOICES):  # the residual 3x3 conv
            total = total + conv_cost(mid, mid, 3, stem_size, stem_size)
            convs, act = 3, 4 * 3 * mid * stem_size * stem_size
        act += 4 * (out * stem_size * stem_size + out * pooled * pooled)  # max pool
        return np.array([0.0, 0.0, 0.0, total[0], total[1] + act, total[2], convs, 0.0])
    if p == N_BLOCKS + 1:
        features = STAGE_WIDTHS[-1][key[1]]
        c = conv_cost(features, n_classes, 1, 1, 1, bias=True)
        return np.array([0.0, 0.0, 0.0, c[0], c[1] + 4 * features * head_size * head_size, c[2], 1.0, 0.0])
    i = p - 1
    s, j = BLOCK_STAGE[i], BLOCK_POS[i]
    w, e = key[-2], key[-1]
    cin, mid, cout = _in_channels(s, j, key), MID[s][w][e], STAGE_WIDTHS[s][w]
    stride = STAGE_STRIDES[s] if j == 0 else 1
    size = blocks[i]
    out = _out(size, stride)
    pw = conv_cost(cin, mid, 1, size, size) + conv_cost(mid, cout, 1, out, out)
    spatial = conv_cost(mid, mid, 3, size, out)
    convs = 3.0
    act = 4 * 3 * cout * out * out  # the residual add and its ReLU
    if j == 0:  # ResNet-D shortcut: average pool, then the 1x1 conv
        pw = pw + conv_cost(cin, cout, 1, out, out)
        act += 4 * (cin * size * size + cin * out * out)
        convs += 1
    return np.array([pw[0], spatial[0], 0.0, 0.0, pw[1] + spatial[1] + act, pw[2] + spatial[2], convs, 1.0])
