"""The OFA-ResNet50 supernet (Once-for-All's ``OFAResNets``) and the static subnets it extracts.

Module names mirror Once-for-All's (``input_stem.i``, ``blocks.i.conv1..3``, ``downsample``,
``classifier.linear``), so the supernet's state dict is Once-for-All's key for key and a static
subnet's is that of Once-for-All's ``get_active_subnet()``. Both networks are built from
`plan.subnet_spec`; the supernet stores the largest weights and computes with their leading slices
(first output channels, first input channels), as Once-for-All does.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from hwnas.errors import InputError
from hwnas.families.base import GeneArch, check_head_args
from hwnas.families.ofa_resnet50.plan import BlockSpec, SubnetSpec, subnet_tensors, supernet_spec
from hwnas.families.layers import (
    DynamicBatchNorm2d,
    DynamicConv2d,
    ResidualBlock,
    conv_bn_act,
    init_weights,
    set_bn_param,
)

__all__ = ["Bottleneck", "DynamicBottleneck", "DynamicLinear", "ResNet50Subnet", "OFAResNet50"]

# Once-for-All's bn_param default for OFAResNets (what the published net was built with)
BN_MOMENTUM, BN_EPS = 0.1, 1e-5


def _shortcut(stride: int, conv_bn: nn.Sequential) -> nn.Sequential:
    """ResNet-D shortcut: ceil-mode average pool (identity at stride 1), then the 1x1 conv + BN."""
    pool = nn.AvgPool2d(stride, stride, 0, ceil_mode=True)
    return nn.Sequential(OrderedDict([("avg_pool", pool), *conv_bn.named_children()]))


def _dynamic_conv_bn(cin: int, cout: int, k: int, stride: int = 1, act: bool = True) -> nn.Sequential:
    parts: list[tuple[str, nn.Module]] = [("conv", DynamicConv2d(cin, cout, k, stride)),
                                          ("bn", DynamicBatchNorm2d(cout))]
    if act:
        parts.append(("act", nn.ReLU(inplace=True)))
    return nn.Sequential(OrderedDict(parts))


class _BottleneckBase(nn.Module):
    """1x1 -> 3x3 (stride) -> 1x1, plus the shortcut, then ReLU (static and elastic alike)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.downsample(x)
        return self.final_act(self.conv3(self.conv2(self.conv1(x))) + shortcut)


class Bottleneck(_BottleneckBase):
    """Once-for-All's static ``ResNetBottleneckBlock`` (avgpool_conv shortcut) for one `BlockSpec`."""

    def __init__(self, b: BlockSpec):
        super().__init__()
        self.conv1 = conv_bn_act(b.in_channels, b.mid_channels, 1, act="relu")
        self.conv2 = conv_bn_act(b.mid_channels, b.mid_channels, 3, b.stride, act="relu")
        self.conv3 = conv_bn_act(b.mid_channels, b.out_channels, 1)
        self.downsample = (_shortcut(b.stride, conv_bn_act(b.in_channels, b.out_channels, 1))
                           if b.conv_shortcut else nn.Identity())
        self.final_act = nn.ReLU(inplace=True)


class DynamicBottleneck(_BottleneckBase):
    """Elastic bottleneck: `active_mid` and `active_out` channels of the stored largest block."""

    def __init__(self, b: BlockSpec):
        super().__init__()
        self.conv1 = _dynamic_conv_bn(b.in_channels, b.mid_channels, 1)
        self.conv2 = _dynamic_conv_bn(b.mid_channels, b.mid_channels, 3, b.stride)
        self.conv3 = _dynamic_conv_bn(b.mid_channels, b.out_channels, 1, act=False)
        self.conv_shortcut = b.conv_shortcut
        self.downsample = (_shortcut(b.stride, _dynamic_conv_bn(b.in_channels, b.out_channels, 1, act=False))
                           if b.conv_shortcut else nn.Identity())
        self.final_act = nn.ReLU(inplace=True)
        self.active_mid, self.active_out = b.mid_channels, b.out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.conv1.conv.active_out_channels = self.conv2.conv.active_out_channels = self.active_mid
        self.conv3.conv.active_out_channels = self.active_out
        if self.conv_shortcut:
            self.downsample.conv.active_out_channels = self.active_out
        return super().forward(x)


class DynamicLinear(nn.Module):
    """Linear layer reading the first `in` features of the stored largest one."""

    def __init__(self, max_in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(max_in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.linear.weight[:, :x.size(1)], self.linear.bias)


class _ResNetBase(nn.Module):
    """Forward shared by the supernet and the static subnet: stem, max pool, blocks, pool, linear."""

    def _stem_layers(self) -> Iterator[nn.Module]:
        return iter(self.input_stem)

    def _active_blocks(self) -> Iterator[nn.Module]:
        return iter(self.blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self._stem_layers():
            x = layer(x)
        x = self.max_pooling(x)
        for block in self._active_blocks():
            x = block(x)
        return self.classifier(x.mean((2, 3)))

    def _build_head(self, linear: nn.Module, n_classes: int, dropout: float) -> None:
        self.max_pooling = nn.MaxPool2d(3, 2, 1)
        self.classifier = nn.Sequential(OrderedDict([("dropout", nn.Dropout(dropout)), ("linear", linear)]))
        self.n_classes, self.dropout = n_classes, dropout


class ResNet50Subnet(_ResNetBase):
    """One OFA-ResNet50 subnet as a plain static network (Conv2d / BatchNorm2d / Linear), keyed like
    Once-for-All's ``get_active_subnet()``. Built from the arch alone it has random weights (for
    latency profiling); `OFAResNet50.get_subnet` fills it with the supernet's. Any input size works.
    """

    def __init__(self, arch: GeneArch, n_classes: int = 1000, dropout: float = 0.0,
                 bn_momentum: float | None = BN_MOMENTUM, bn_eps: float = BN_EPS):
        super().__init__()
        from hwnas.families import get_family

        check_head_args(n_classes, dropout)
        family = get_family("ofa-resnet50")
        self.arch = family.resolve_arch(arch)
        self.spec = spec = family.arch_spec(self.arch)
        stem = [conv_bn_act(3, spec.stem_mid, 3, 2, act="relu")]
        if spec.stem_block:
            stem.append(ResidualBlock(conv_bn_act(spec.stem_mid, spec.stem_mid, 3, act="relu"), True))
        stem.append(conv_bn_act(spec.stem_mid, spec.stem_out, 3, act="relu"))
        self.input_stem = nn.ModuleList(stem)
        self.blocks = nn.ModuleList(Bottleneck(b) for b in spec.blocks)
        self._build_head(nn.Linear(spec.features, n_classes), n_classes, dropout)
        init_weights(self)
        set_bn_param(self, bn_momentum, bn_eps)


class OFAResNet50(_ResNetBase):
    """Once-for-All's elastic ResNet50: elastic depth (per stage, and the stem's residual conv),
    expand ratio per block, width multiplier per stage and for the stem, and input resolution.

    ``set_active_subnet(arch)`` makes `forward` run one subnet; ``get_subnet(arch)`` extracts it.
    `arch`: a `GeneArch` of the ofa-resnet50 family, or Once-for-All's arch dict plus ``"r"``.
    """

    def __init__(self, n_classes: int = 1000, dropout: float = 0.0,
                 bn_momentum: float | None = BN_MOMENTUM, bn_eps: float = BN_EPS, family: Any = None):
        super().__init__()
        from hwnas.families import get_family

        check_head_args(n_classes, dropout)
        self.family = get_family("ofa-resnet50") if family is None else family
        self.width_mult = self.family.default_width
        self.bn_momentum, self.bn_eps = bn_momentum, bn_eps
        top = supernet_spec()
        self.input_stem = nn.ModuleList([
            _dynamic_conv_bn(3, top.stem_mid, 3, 2),
            ResidualBlock(_dynamic_conv_bn(top.stem_mid, top.stem_mid, 3), True),
            _dynamic_conv_bn(top.stem_mid, top.stem_out, 3),
        ])
        self.blocks = nn.ModuleList(DynamicBottleneck(b) for b in top.blocks)
        self._build_head(DynamicLinear(top.features, n_classes), n_classes, dropout)
        init_weights(self)
        set_bn_param(self, bn_momentum, bn_eps)
        self.active_spec: SubnetSpec = top
        self.active_r = 224

    # -- active subnet ------------------------------------------------------------------------
    def set_active_subnet(self, arch: GeneArch | dict) -> GeneArch:
        """Make `forward` run `arch` (its `r` is only remembered); returns it as a `GeneArch`."""
        arch = self.family.resolve_arch(arch, self.width_mult)
        spec = self.family.arch_spec(arch)
        stem0, stem1, stem2 = self.input_stem
        stem0.conv.active_out_channels = stem1.conv.conv.active_out_channels = spec.stem_mid
        stem2.conv.active_out_channels = spec.stem_out
        for b in spec.blocks:
            self.blocks[b.index].active_mid = b.mid_channels
            self.blocks[b.index].active_out = b.out_channels
        self.active_spec, self.active_r = spec, arch.r
        return arch

    def _stem_layers(self) -> Iterator[nn.Module]:
        stem0, stem1, stem2 = self.input_stem
        return iter((stem0, stem1, stem2) if self.active_spec.stem_block else (stem0, stem2))

    def _active_blocks(self) -> Iterator[nn.Module]:
        return (self.blocks[b.index] for b in self.active_spec.blocks)

    # -- extraction -----------------------------------------------------------------------------
    def subnet_state_dict(self, arch: GeneArch | dict) -> dict[str, torch.Tensor]:
        """State dict of `ResNet50Subnet(arch)` holding this supernet's weights for `arch`.
        Detached copies; the active subnet is untouched."""
        arch = self.family.resolve_arch(arch, self.width_mult)
        stored = self.state_dict()
        return {key: stored[source][tuple(slice(0, n) for n in shape)].clone()
                for key, source, shape in subnet_tensors(self.family.arch_spec(arch), self.n_classes)}

    def get_subnet(self, arch: GeneArch | dict) -> ResNet50Subnet:
        """A standalone static copy of the subnet `arch`, in this supernet's mode, device and dtype."""
        arch = self.family.resolve_arch(arch, self.width_mult)
        sub = ResNet50Subnet(arch, self.n_classes, self.dropout, self.bn_momentum, self.bn_eps)
        sub.load_state_dict(self.subnet_state_dict(arch), strict=True)
        p = next(self.parameters())
        return sub.to(device=p.device, dtype=p.dtype).train(self.training)

