"""The OFA-ProxylessNAS supernet and the static subnets it extracts.

Module names mirror Once-for-All's ``OFAProxylessNASNets`` (first_conv, blocks.i.conv.*,
feature_mix_layer, classifier.linear), so OFA's state dict loads strictly, key by key. The blocks are
hwnas's MobileNet blocks (`MBConv`, `DynamicMBConv`) without SE and with ReLU6.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping

import torch
import torch.nn as nn

from hwnas.families.base import GeneArch, check_head_args
from hwnas.families.ofa_proxyless.plan import (
    ACT,
    BN_EPS,
    BN_MOMENTUM,
    N_STAGES,
    STAGE_DEPTHS,
    ProxylessPlan,
    iter_blocks,
    proxyless_plan,
    slot,
)
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

__all__ = ["ProxylessNASSubnet", "OFAProxylessNASNets"]



def _family():
    from hwnas.families import get_family

    return get_family("ofa-proxyless")


class _ProxylessNetwork(MBConvChain):
    """Fixed layers and forward shared by the supernet and the static subnet."""

    def _build_fixed(self, plan: ProxylessPlan, n_classes: int, dropout: float) -> ResidualBlock:
        """Create stem, feature mix and classifier; return the fixed first block (3x3, expand 1,
        never a shortcut in OFA's ProxylessNAS, whatever the widths)."""
        check_head_args(n_classes, dropout)
        self.plan, self.width_mult, self.n_classes, self.dropout = plan, plan.width_mult, n_classes, dropout
        self.first_conv = conv_bn_act(3, plan.stem, 3, stride=2, act=ACT)
        self.feature_mix_layer = conv_bn_act(plan.stage_widths[-1], plan.feature_mix, 1, act=ACT)
        self.classifier = nn.Sequential(OrderedDict([
            ("dropout", nn.Dropout(dropout)),
            ("linear", nn.Linear(plan.feature_mix, n_classes)),
        ]))
        first = MBConv(plan.stem, plan.first_block, 3, 1, plan.stem, ACT, False, expand=False)
        return ResidualBlock(first, residual=False)

    def _finish(self, bn_momentum: float | None, bn_eps: float) -> None:
        init_weights(self)
        set_bn_param(self, bn_momentum, bn_eps)
        self.bn_momentum, self.bn_eps = bn_momentum, bn_eps

    def forward_head(self, x: torch.Tensor) -> torch.Tensor:
        """Feature mix (before pooling, unlike MobileNetV3) -> global average pool -> classifier."""
        return self.classifier(self.feature_mix_layer(x).mean((2, 3)))


class ProxylessNASSubnet(_ProxylessNetwork):
    """One OFA-ProxylessNAS subnet as a plain static network (Conv2d / BatchNorm2d / Linear), keyed
    like OFA's static ``ProxylessNASNets``. Built from the arch alone it has random weights
    (profiling); `OFAProxylessNASNets.get_subnet` fills it. `arch.r` is only recorded."""

    def __init__(self, arch: GeneArch | Mapping[str, Any], n_classes: int = 1000, dropout: float = 0.0,
                 bn_momentum: float | None = BN_MOMENTUM, bn_eps: float = BN_EPS):
        super().__init__()
        self.arch = arch = _as_arch(arch, arch.w if isinstance(arch, GeneArch) else None)
        ks, e = arch.group("ks"), arch.group("e")
        blocks = [self._build_fixed(proxyless_plan(arch.w), n_classes, dropout)]
        for b in iter_blocks(self.plan, arch.group("d")):
            layer = MBConv(b.in_channels, b.out_channels, ks[b.slot], b.stride,
                           expand_channels(b.in_channels, e[b.slot]), b.act, b.use_se)
            blocks.append(ResidualBlock(layer, b.residual))
        self.blocks = nn.ModuleList(blocks)
        self._finish(bn_momentum, bn_eps)

class OFAProxylessNASNets(ElasticMBConvChain, _ProxylessNetwork):
    """Once-for-All's elastic ProxylessNAS: elastic kernel (7->5->3 by kernel transformation),
    expand ratio and depth of 21 blocks in 6 stages (the last one fixed at one block), any input
    resolution. ``arch`` arguments are `GeneArch` of the ofa-proxyless family or OFA's arch dict
    plus ``"r"`` (``{"ks": [21], "e": [21], "d": [6], "r": [r]}``)."""

    FIXED_LAYERS = ("first_conv", "feature_mix_layer", "classifier")

    def __init__(self, n_classes: int = 1000, width_mult: float | None = None, dropout: float = 0.0,
                 bn_momentum: float | None = BN_MOMENTUM, bn_eps: float = BN_EPS):
        super().__init__()
        self.family = _family()
        ks_group, e_group, d_group = self.family.gene_groups()
        self.ks_choices, self.e_choices, self.d_choices = ks_group.choices, e_group.choices, d_group.choices
        blocks = [self._build_fixed(proxyless_plan(self.family.check_width(width_mult)), n_classes, dropout)]
        self.block_group_info: list[list[int]] = []
        for b in iter_blocks(self.plan, STAGE_DEPTHS):
            if b.index == 0:
                self.block_group_info.append(list(range(len(blocks), len(blocks) + STAGE_DEPTHS[b.stage])))
            layer = DynamicMBConv(b.in_channels, b.out_channels, self.ks_choices, self.e_choices, b.stride,
                                  b.act, b.use_se)
            blocks.append(ResidualBlock(layer, b.residual))
        self.blocks = nn.ModuleList(blocks)
        self.runtime_depth = list(STAGE_DEPTHS)
        self._active_r = 224
        self._finish(bn_momentum, bn_eps)

    # -- active subnet ------------------------------------------------------------------------
    def _arch(self, arch: GeneArch | Mapping[str, Any]) -> GeneArch:
        return _as_arch(arch, self.width_mult)

    def set_active_subnet(self, arch: GeneArch | Mapping[str, Any]) -> None:
        """Make `forward` run `arch` (its `r` is only remembered for `active_arch`)."""
        arch = self._arch(arch)
        ks, e, d = arch.group("ks"), arch.group("e"), arch.group("d")
        for s, group in enumerate(self.block_group_info):
            self.runtime_depth[s] = min(len(group), d[s])
            for j, idx in enumerate(group[:self.runtime_depth[s]]):
                layer = self.blocks[idx].conv
                layer.active_kernel_size, layer.active_expand_ratio = ks[slot(s, j)], e[slot(s, j)]
        self._active_r = arch.r

    def _uniform(self, pick) -> dict[str, list[int]]:
        n_slots = len(self.blocks) - 1
        return {"ks": [pick(self.ks_choices)] * n_slots, "e": [pick(self.e_choices)] * n_slots,
                "d": [pick(self.d_choices)] * N_STAGES, "r": [self._active_r]}

    def set_max_net(self) -> None:
        self.set_active_subnet(self._uniform(max))

    def set_min_net(self) -> None:
        self.set_active_subnet(self._uniform(min))

    def active_arch(self, r: int | None = None) -> GeneArch:
        """The active subnet, at resolution `r` (default: the last one set)."""
        arch = self._uniform(min)
        arch["d"] = list(self.runtime_depth)
        for s, group in enumerate(self.block_group_info):
            for j, idx in enumerate(group[:self.runtime_depth[s]]):
                layer = self.blocks[idx].conv
                arch["ks"][slot(s, j)], arch["e"][slot(s, j)] = layer.active_kernel_size, layer.active_expand_ratio
        arch["r"] = [self._active_r if r is None else r]
        return self._arch(arch)

    # -- extraction -----------------------------------------------------------------------------
    def subnet_state_dict(self, arch: GeneArch | Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """State dict of `ProxylessNASSubnet(arch)` holding this supernet's weights for `arch`
        (transformed kernels, sliced BN statistics). Detached copies; the active subnet is untouched."""
        arch = self._arch(arch)
        return self._subnet_state(iter_blocks(self.plan, arch.group("d")), arch.group("ks"), arch.group("e"))

    def get_subnet(self, arch: GeneArch | Mapping[str, Any]) -> ProxylessNASSubnet:
        """A standalone static copy of the subnet `arch`, in this supernet's mode, device and dtype."""
        arch = self._arch(arch)
        sub = ProxylessNASSubnet(arch, self.n_classes, self.dropout, self.bn_momentum, self.bn_eps)
        return self._filled(sub, self.subnet_state_dict(arch))


def _as_arch(arch: GeneArch | Mapping[str, Any], width_mult: float | None) -> GeneArch:
    """A checked `GeneArch` of this family at `width_mult` (None: the arch's own / the default)."""
    if width_mult is None and isinstance(arch, GeneArch):
        width_mult = arch.w
    return _family().resolve_arch(arch, width_mult)
