"""TinyConvNet's elastic supernet and its static subnet, built from `hwnas.families.layers`
(elastic kernel 5 -> 3 by kernel transformation, expand ratio, depth of each stage)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterator, Mapping

import torch
import torch.nn as nn

from hwnas.families.base import Family, GeneArch, check_head_args
from hwnas.families.layers import (DynamicMBConv, MBConv, ResidualBlock, conv_bn_act, expand_channels,
                                   init_weights)

from .plan import ACT, ALL_BLOCKS, E_CHOICES, KS_CHOICES, MAX_DEPTH, N_STAGES, STAGE_WIDTHS, STEM, iter_blocks

__all__ = ["TinyConvSubnet", "TinyConvSupernet"]

#: the layers a static subnet copies from the supernet as they are
FIXED_LAYERS = ("first_conv", "classifier")


class TinyNetwork(nn.Module):
    """Stem, the blocks `active_blocks` yields, pooling and classifier: static and elastic alike."""

    def build_ends(self, n_classes: int, dropout: float) -> None:
        check_head_args(n_classes, dropout)
        self.n_classes, self.dropout = n_classes, dropout
        self.first_conv = conv_bn_act(3, STEM, 3, stride=2, act=ACT)
        self.classifier = nn.Sequential(OrderedDict([
            ("dropout", nn.Dropout(dropout)), ("linear", nn.Linear(STAGE_WIDTHS[-1], n_classes))]))

    def active_blocks(self) -> Iterator[nn.Module]:
        return iter(self.blocks)

    def forward_head(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(x.mean((2, 3)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first_conv(x)
        for block in self.active_blocks():
            x = block(x)
        return self.forward_head(x)


class TinyConvSubnet(TinyNetwork):
    """One subnet as a plain static network (random weights until a supernet fills it)."""

    def __init__(self, arch: GeneArch, n_classes: int = 1000, dropout: float = 0.0) -> None:
        super().__init__()
        self.arch = arch
        self.build_ends(n_classes, dropout)
        ks, e = arch.group("ks"), arch.group("e")
        self.blocks = nn.ModuleList(
            ResidualBlock(MBConv(b.in_channels, b.out_channels, ks[b.slot], b.stride,
                                 expand_channels(b.in_channels, e[b.slot]), ACT, False), b.residual)
            for b in iter_blocks(arch.group("d")))
        init_weights(self)


class TinyConvSupernet(TinyNetwork):
    """The elastic supernet: every block at its largest; `set_active_subnet` picks a subnet."""

    def __init__(self, family: Family, n_classes: int = 1000, dropout: float = 0.0) -> None:
        super().__init__()
        self.family = family
        self.build_ends(n_classes, dropout)
        self.blocks = nn.ModuleList(
            ResidualBlock(DynamicMBConv(b.in_channels, b.out_channels, KS_CHOICES, E_CHOICES, b.stride, ACT,
                                        False), b.residual)
            for b in ALL_BLOCKS)
        self.runtime_depth = [MAX_DEPTH] * N_STAGES
        init_weights(self)

    def active_blocks(self) -> Iterator[nn.Module]:
        return (self.blocks[b.slot] for b in ALL_BLOCKS if b.index < self.runtime_depth[b.stage])

    def set_active_subnet(self, arch: GeneArch | Mapping[str, Any]) -> None:
        arch = self.family.resolve_arch(arch)
        ks, e = arch.group("ks"), arch.group("e")
        self.runtime_depth = arch.group("d")
        for b in ALL_BLOCKS:
            layer = self.blocks[b.slot].conv
            layer.active_kernel_size, layer.active_expand_ratio = ks[b.slot], e[b.slot]

    def subnet_state_dict(self, arch: GeneArch | Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The state dict of `TinyConvSubnet(arch)` holding this supernet's weights (detached copies)."""
        arch = self.family.resolve_arch(arch)
        ks, e = arch.group("ks"), arch.group("e")
        state = {f"{name}.{key}": t.detach().clone() for name in FIXED_LAYERS
                 for key, t in self.get_submodule(name).state_dict().items()}
        for i, b in enumerate(iter_blocks(arch.group("d"))):
            layer = self.blocks[b.slot].conv
            state.update({f"blocks.{i}.conv.{key}": t
                          for key, t in layer.active_state(b.in_channels, ks[b.slot], e[b.slot]).items()})
        return state

    def get_subnet(self, arch: GeneArch | Mapping[str, Any]) -> TinyConvSubnet:
        """A standalone static copy of the subnet, in this supernet's mode, device and dtype."""
        arch = self.family.resolve_arch(arch)
        subnet = TinyConvSubnet(arch, self.n_classes, self.dropout)
        subnet.load_state_dict(self.subnet_state_dict(arch), strict=True)
        p = next(self.parameters())
        return subnet.to(device=p.device, dtype=p.dtype).train(self.training)

    def sort_channels(self, expand_stage: int = 0) -> None:
        """Hidden channels by importance (training calls this before the expand phase)."""
        for block in self.blocks:
            block.conv.sort_channels(expand_stage)
