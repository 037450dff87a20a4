"""The OFA-MobileNetV3 supernet and the static subnets it extracts.

`plan.mbv3_plan` and `plan.iter_blocks` are the single description of the network's layout: the
supernet, the static subnet and the analytic counter (`costs`) are all built from them, which is
what keeps the three in agreement with each other and with Once-for-All's own network.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import Any, Mapping

import torch
import torch.nn as nn

from hwnas.errors import InputError
from hwnas.families.base import check_head_args
from hwnas.families.elastic import ElasticMBConvChain, MBConvChain
from hwnas.families.layers import (
    DynamicMBConv,
    MBConv,
    ResidualBlock,
    conv_bn_act,
    expand_channels,
    init_weights,
    set_bn_param,
)
from hwnas.families.ofa_mbv3.arch import PAD_E, PAD_KS, Arch
from hwnas.families.ofa_mbv3.plan import MAX_DEPTH, N_STAGES, MBV3Plan, iter_blocks, mbv3_plan
from hwnas.families.ofa_mbv3.space import SearchSpace

__all__ = ["MobileNetV3Subnet", "OFAMobileNetV3"]

class _MBV3Network(MBConvChain):
    """Layers and forward shared by the supernet and the static subnet (OFA's module names)."""

    def _build_fixed(self, plan: MBV3Plan, n_classes: int, dropout: float) -> ResidualBlock:
        """Create stem, head and classifier; return the fixed first block (no expand, no SE)."""
        check_head_args(n_classes, dropout)
        self.plan, self.n_classes, self.dropout = plan, n_classes, dropout
        self.first_conv = conv_bn_act(3, plan.stem, 3, stride=2, act="h_swish")
        self.final_expand_layer = conv_bn_act(plan.stages[-1].width, plan.final_expand, 1, act="h_swish")
        self.feature_mix_layer = conv_bn_act(plan.final_expand, plan.feature_mix, 1, act="h_swish",
                                             use_bn=False)
        self.classifier = nn.Sequential(OrderedDict([
            ("dropout", nn.Dropout(dropout)),
            ("linear", nn.Linear(plan.feature_mix, n_classes)),
        ]))
        first = MBConv(plan.stem, plan.first_block, 3, 1, plan.stem, "relu", False, expand=False)
        return ResidualBlock(first, residual=plan.stem == plan.first_block)

    def forward_head(self, x: torch.Tensor) -> torch.Tensor:
        """Final expand -> global average pool -> feature mix -> classifier."""
        x = self.final_expand_layer(x)
        x = self.feature_mix_layer(x.mean((2, 3), keepdim=True))
        return self.classifier(torch.flatten(x, 1))


class MobileNetV3Subnet(_MBV3Network):
    """One OFA-MobileNetV3 subnet as a plain static network (nn.Conv2d / BatchNorm2d / Linear).

    Built from the arch alone (random init) it serves latency profiling; `OFAMobileNetV3.get_subnet`
    fills it with the supernet's weights. `arch.r` is only recorded: any input size works.
    """

    def __init__(self, arch: Arch, n_classes: int = 1000, dropout: float = 0.1,
                 bn_momentum: float | None = 0.1, bn_eps: float = 1e-5):
        super().__init__()
        if not isinstance(arch, Arch):
            raise InputError(f"expected an Arch, got {type(arch).__name__}; build one with "
                             "Arch.from_ofa_dict(...) or SearchSpace().sample()")
        self.arch = arch
        blocks = [self._build_fixed(mbv3_plan(arch.w), n_classes, dropout)]
        for b in iter_blocks(self.plan, arch.d):
            k, e = arch.ks[b.slot], arch.e[b.slot]
            layer = MBConv(b.in_channels, b.out_channels, k, b.stride, expand_channels(b.in_channels, e),
                           b.act, b.use_se)
            blocks.append(ResidualBlock(layer, b.residual))
        self.blocks = nn.ModuleList(blocks)
        init_weights(self)
        set_bn_param(self, bn_momentum, bn_eps)

class OFAMobileNetV3(ElasticMBConvChain, _MBV3Network):
    """Once-for-All's elastic MobileNetV3: elastic kernel (7->5->3 via kernel transformation),
    expand ratio, depth and input resolution, at the space's width multiplier.

    The module tree and state-dict keys mirror OFA's ``OFAMobileNetV3`` (first_conv, blocks.i.conv,
    final_expand_layer, feature_mix_layer, classifier.linear), `max(space.d_choices)` blocks per stage.
    """

    FIXED_LAYERS = ("first_conv", "final_expand_layer", "feature_mix_layer", "classifier")

    def __init__(self, space: SearchSpace | None = None, n_classes: int = 1000, dropout: float = 0.1,
                 bn_momentum: float | None = 0.1, bn_eps: float = 1e-5):
        super().__init__()
        self.space = SearchSpace() if space is None else space
        if not isinstance(self.space, SearchSpace):
            raise InputError(f"space must be a SearchSpace, got {type(self.space).__name__}")
        self.bn_momentum, self.bn_eps = bn_momentum, bn_eps
        blocks = [self._build_fixed(mbv3_plan(self.space.width_mult), n_classes, dropout)]
        n = max(self.space.d_choices)
        self.block_group_info: list[list[int]] = []
        for b in iter_blocks(self.plan, [n] * N_STAGES):
            if b.index == 0:
                self.block_group_info.append(list(range(len(blocks), len(blocks) + n)))
            layer = DynamicMBConv(b.in_channels, b.out_channels, self.space.ks_choices,
                                  self.space.e_choices, b.stride, b.act, b.use_se)
            blocks.append(ResidualBlock(layer, b.residual))
        self.blocks = nn.ModuleList(blocks)
        self.runtime_depth = [n] * N_STAGES
        self._active_r = max(self.space.r_choices)
        init_weights(self)
        set_bn_param(self, bn_momentum, bn_eps)

    @property
    def family(self):
        """This network's `hwnas.families.Family` (ofa-mbv3), as every family's supernet has."""
        from hwnas.families import get_family

        return get_family("ofa-mbv3")

    @property
    def width_mult(self) -> float:
        return self.space.width_mult

    # -- active subnet ------------------------------------------------------------------------
    def _check_arch(self, arch: Arch | Mapping[str, Any]) -> Arch:
        if isinstance(arch, Mapping):  # Once-for-All's arch dict plus "r"
            arch = Arch.from_ofa_dict(arch, w=self.space.width_mult)
        if not isinstance(arch, Arch):
            raise InputError(f"expected an Arch, got {type(arch).__name__}; build one with "
                             "Arch.from_ofa_dict(...) or supernet.space.sample()")
        # The resolution is only the input size; every other gene must be in the supernet's space.
        reason = self.space.check(replace(arch, r=self.space.r_choices[0]))
        if reason:
            raise InputError(f"arch {arch.id} does not fit this supernet: {reason}; "
                             "pick archs from supernet.space (e.g. supernet.space.sample())")
        return arch

    def set_active_subnet(self, arch: Arch) -> None:
        """Make `forward` run `arch` (its `r` is only remembered for `active_arch`)."""
        arch = self._check_arch(arch)
        for s in range(N_STAGES):
            self.runtime_depth[s] = arch.d[s]
            for j in range(arch.d[s]):
                layer = self.elastic_block(s, j)
                layer.active_kernel_size = arch.ks[MAX_DEPTH * s + j]
                layer.active_expand_ratio = arch.e[MAX_DEPTH * s + j]
        self._active_r = arch.r

    def set_max_net(self) -> None:
        self.set_active_subnet(self.space.max_arch(self._active_r))

    def set_min_net(self) -> None:
        self.set_active_subnet(self.space.min_arch(self._active_r))

    def active_arch(self, r: int | None = None) -> Arch:
        """The active subnet as an `Arch`, at resolution `r` (default: the last one set)."""
        ks, e = [PAD_KS] * (MAX_DEPTH * N_STAGES), [PAD_E] * (MAX_DEPTH * N_STAGES)
        for s in range(N_STAGES):
            for j in range(self.runtime_depth[s]):
                layer, slot = self.elastic_block(s, j), MAX_DEPTH * s + j
                ks[slot], e[slot] = layer.active_kernel_size, layer.active_expand_ratio
        return Arch(tuple(ks), tuple(e), tuple(self.runtime_depth), self._active_r if r is None else r,
                    self.space.width_mult)

    # -- extraction -----------------------------------------------------------------------------
    def subnet_state_dict(self, arch: Arch) -> dict[str, torch.Tensor]:
        """State dict of `MobileNetV3Subnet(arch)` holding this supernet's weights for `arch`
        (transformed kernels, sliced BN statistics). Detached copies; the active subnet is untouched."""
        arch = self._check_arch(arch)
        return self._subnet_state(iter_blocks(self.plan, arch.d), arch.ks, arch.e)

    def get_subnet(self, arch: Arch) -> MobileNetV3Subnet:
        """A standalone static copy of the subnet `arch`, in this supernet's mode, device and dtype."""
        arch = self._check_arch(arch)
        sub = MobileNetV3Subnet(arch, self.n_classes, self.dropout, self.bn_momentum, self.bn_eps)
        return self._filled(sub, self.subnet_state_dict(arch))
