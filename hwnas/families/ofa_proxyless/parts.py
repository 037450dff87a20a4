"""OFA-ProxylessNAS's additive cost layout (`hwnas.families.parts`): the stem (first conv + the fixed
first block, keyed by r), the 21 searchable MBConv positions (keyed by r, their kernel and expand
genes; active while the stage's runtime depth reaches them) and the head (feature mix at the last
feature size, pooling, classifier; keyed by r). Torch-free except `entry_module`."""

from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np

from hwnas.errors import InputError
from hwnas.families.parts import CostLayout, Part, conv_cost, mbconv_cost, out_size
from hwnas.families.ofa_proxyless.plan import (ACT, N_SLOTS, N_STAGES, STAGE_DEPTHS, iter_blocks,
                                               proxyless_plan)

__all__ = ["ProxylessCostLayout"]

_D0 = 1 + 2 * N_SLOTS  # first depth column


class ProxylessCostLayout(CostLayout):
    n_stages = N_STAGES
    kernels = (3, 5, 7)

    def __init__(self, family: Any, width_mult: float, n_classes: int) -> None:
        super().__init__(family, width_mult, n_classes)
        self.plan = proxyless_plan(self.width_mult)
        self.specs = tuple(iter_blocks(self.plan, STAGE_DEPTHS))
        self._parts = ((Part("stem", -1, 0, (0,)),)
                       + tuple(Part("block", b.stage, b.index, (0, 1 + b.slot, 1 + N_SLOTS + b.slot))
                               for b in self.specs)
                       + (Part("head", N_STAGES, 0, (0,)),))
        self._stage = np.array([b.stage for b in self.specs])
        self._index = np.array([b.index for b in self.specs])

    @property
    def parts(self) -> tuple[Part, ...]:
        return self._parts

    def active(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        depth = np.minimum(m[:, _D0:_D0 + N_STAGES], np.asarray(STAGE_DEPTHS)[None, :])
        blocks = self._index[None, :] < depth[:, self._stage]
        ones = np.ones((len(m), 1), dtype=bool)
        return np.concatenate([ones, blocks, ones], axis=1)

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def sizes(r: int) -> tuple[tuple[int, ...], int, int]:
        """(input size of each searchable block, stem output size, head input size) at r."""
        stem = out_size(r, 3, 2)
        out, size = [], stem
        for b in iter_blocks(proxyless_plan(1.0), STAGE_DEPTHS):
            out.append(size)
            size = out_size(size, 3, b.stride)
        return tuple(out), stem, size

    def cost(self, p: int, key: tuple[int, ...]) -> np.ndarray:
        return _cost(self.width_mult, self.n_classes, p, tuple(int(v) for v in key))

    def kernel(self, p: int, key: tuple[int, ...]) -> int:
        return int(key[1]) if self._parts[p].kind == "block" else 0

    def entry(self, p: int, key: tuple[int, ...]) -> tuple[Any, ...]:
        part, r = self._parts[p], int(key[0])
        blocks, _, head = self.sizes(r)
        if part.kind == "stem":
            return ("stem", -1, 0, 3, 3, 0, r)
        if part.kind == "head":
            return ("head", N_STAGES, 0, self.plan.stage_widths[-1], 0, 0, head)
        b = self.specs[p - 1]
        return ("block", b.stage, min(b.index, 1), b.in_channels, int(key[1]), int(key[2]), blocks[p - 1])

    def entry_module(self, entry: Mapping[str, Any]):
        import torch.nn as nn

        from hwnas.channels import expand_channels
        from hwnas.families.layers import MBConv, ResidualBlock, init_weights

        part, size = str(entry["part"]), int(entry["size"])
        if part in ("stem", "head"):
            family = self.family
            net = family.static_subnet(family.default_space(self.width_mult).min_arch(), self.n_classes)
            if part == "stem":
                return nn.Sequential(net.first_conv, net.blocks[0]).eval(), (1, 3, size, size)
            return _Head(net).eval(), (1, self.plan.stage_widths[-1], size, size)
        if part != "block":
            raise InputError(f"unknown part {part!r}; use 'stem', 'block' or 'head'")
        stage, j = int(entry["stage"]), int(entry["j"])
        spec = next((b for b in self.specs if b.stage == stage and b.index == min(j, STAGE_DEPTHS[stage] - 1)),
                    None) if 0 <= stage < N_STAGES else None
        if spec is None:
            raise InputError(f"{self.family_name} has no block at stage {stage} position {j}")
        k, e = int(entry["k"]), int(entry["e"])
        layer = MBConv(spec.in_channels, spec.out_channels, k, spec.stride,
                       expand_channels(spec.in_channels, e), ACT, False)
        block = ResidualBlock(layer, spec.residual)
        init_weights(block)
        return block.eval(), (1, spec.in_channels, size, size)


def _head_module_class():
    import torch.nn as nn

    class Head(nn.Module):
        def __init__(self, net) -> None:
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net.forward_head(x)

    return Head


def _Head(net):
    return _head_module_class()(net)


@functools.lru_cache(maxsize=65536)
def _cost(width_mult: float, n_classes: int, p: int, key: tuple[int, ...]) -> np.ndarray:
    plan = proxyless_plan(width_mult)
    r = key[0]
    blocks, stem_size, head_size = ProxylessCostLayout.sizes(r)
    if p == 0:  # first conv + the fixed first block (3x3 depthwise, expand 1, no shortcut)
        conv = conv_cost(3, plan.stem, 3, r, stem_size)
        first = mbconv_cost(plan.stem, plan.first_block, 3, 1, 1, stem_size, False, False, expand=False)
        return np.array([0.0, 0.0, 0.0, conv[0] + first[0] + first[1], conv[1] + first[4],
                         conv[2] + first[5], 1 + first[6], 0.0])
    specs = tuple(iter_blocks(plan, STAGE_DEPTHS))
    if p == len(specs) + 1:  # feature mix (before pooling), pool, classifier
        fm = plan.feature_mix
        a = conv_cost(plan.stage_widths[-1], fm, 1, head_size, head_size)
        c = conv_cost(fm, n_classes, 1, 1, 1, bias=True)
        total = a + c
        return np.array([0.0, 0.0, 0.0, total[0], total[1] + 4 * fm * head_size * head_size, total[2],
                         2.0, 0.0])
    b = specs[p - 1]
    return mbconv_cost(b.in_channels, b.out_channels, key[1], key[2], b.stride, blocks[p - 1], False,
                       b.residual)
