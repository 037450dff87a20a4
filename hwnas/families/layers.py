"""Building blocks of every family's networks: static layers and Once-for-All's elastic ones.

Module and parameter names follow Once-for-All (``conv``/``bn``/``act``, ``inverted_bottleneck``,
``depth_conv``, ``point_linear``, ``se.fc.reduce``, ``7to5_matrix`` ...), so state dicts of the two
implementations line up key by key. Every elastic (``Dynamic*``) layer holds its largest weights and
computes with a slice of them; ``active_state`` returns that slice under the names of the static layer
that replaces it in an extracted subnet, so extraction is a strict ``load_state_dict``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F

from hwnas.errors import InputError

__all__ = [
    "CHANNEL_DIVISIBLE",
    "SE_REDUCTION",
    "make_divisible",
    "expand_channels",
    "se_channels",
    "build_act",
    "conv_bn_act",
    "init_weights",
    "set_bn_param",
    "SqueezeExcite",
    "MBConv",
    "ResidualBlock",
    "DynamicConv2d",
    "DynamicSeparableConv2d",
    "DynamicBatchNorm2d",
    "DynamicSE",
    "DynamicMBConv",
]

# channel arithmetic lives in the torch-free `hwnas.channels`; re-exported for the layers' users
from hwnas.channels import (  # noqa: E402
    CHANNEL_DIVISIBLE,
    SE_REDUCTION,
    expand_channels,
    make_divisible,
    se_channels,
)


def same_padding(kernel_size: int) -> int:
    return kernel_size // 2


# -- static layers -----------------------------------------------------------------------------
def build_act(name: str | None) -> nn.Module | None:
    """'relu' | 'relu6' | 'h_swish' | None. h-swish is torch's Hardswish (x * relu6(x + 3) / 6, as
    OFA's); ProxylessNAS uses relu6."""
    if name is None:
        return None
    if name == "relu":
        return nn.ReLU(inplace=True)
    if name == "relu6":
        return nn.ReLU6(inplace=True)
    if name == "h_swish":
        return nn.Hardswish()
    raise InputError(f"unknown activation {name!r}; use 'relu', 'relu6' or 'h_swish'")


def conv_bn_act(in_channels: int, out_channels: int, kernel_size: int = 1, stride: int = 1,
                groups: int = 1, act: str | None = None, use_bn: bool = True) -> nn.Sequential:
    """Conv (no bias, 'same' padding) -> optional BN -> optional activation, named like OFA's."""
    parts: list[tuple[str, nn.Module]] = [
        ("conv", nn.Conv2d(in_channels, out_channels, kernel_size, stride,
                           same_padding(kernel_size), groups=groups, bias=False))]
    if use_bn:
        parts.append(("bn", nn.BatchNorm2d(out_channels)))
    act_module = build_act(act)
    if act_module is not None:
        parts.append(("act", act_module))
    return nn.Sequential(OrderedDict(parts))


def init_weights(module: nn.Module) -> None:
    """Once-for-All's 'he_fout' init: conv N(0, sqrt(2 / (k*k*out))), BN (1, 0),
    linear U(+-1/sqrt(in)), zero biases. Kernel-transform matrices stay identity."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.modules.batchnorm._BatchNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.weight.size(1))
            nn.init.uniform_(m.weight, -bound, bound)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def set_bn_param(module: nn.Module, momentum: float | None, eps: float) -> None:
    """Set every BatchNorm's momentum (None = cumulative average, for BN recalibration) and eps."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.momentum = momentum
            m.eps = eps


def _global_pool(x: torch.Tensor) -> torch.Tensor:
    return x.mean((2, 3), keepdim=True)


class SqueezeExcite(nn.Module):
    """Global pool -> 1x1 conv (bias) -> ReLU -> 1x1 conv (bias) -> h-sigmoid -> scale the input."""

    def __init__(self, channels: int):
        super().__init__()
        self.channels = channels
        mid = se_channels(channels)
        self.fc = nn.Sequential(OrderedDict([
            ("reduce", nn.Conv2d(channels, mid, 1, bias=True)),
            ("relu", nn.ReLU(inplace=True)),
            ("expand", nn.Conv2d(mid, channels, 1, bias=True)),
            ("h_sigmoid", nn.Hardsigmoid()),
        ]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.fc(_global_pool(x))


class _MBConvBase(nn.Module):
    """Forward of an inverted-residual block; static and elastic blocks differ only in layers
    (`inverted_bottleneck` may be None, then `depth_conv`, `point_linear`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inverted_bottleneck is not None:
            x = self.inverted_bottleneck(x)
        return self.point_linear(self.depth_conv(x))


class MBConv(_MBConvBase):
    """MobileNetV3 block: [1x1 expand + BN + act] -> kxk depthwise + BN + act [-> SE]
    -> 1x1 linear + BN. `expand=False` (OFA's fixed first block) drops the expand conv."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int,
                 mid_channels: int, act: str, use_se: bool, expand: bool = True):
        super().__init__()
        if not expand and mid_channels != in_channels:
            raise ValueError("a block without expand conv needs mid_channels == in_channels")
        self.inverted_bottleneck = conv_bn_act(in_channels, mid_channels, 1, act=act) if expand else None
        self.depth_conv = conv_bn_act(mid_channels, mid_channels, kernel_size, stride,
                                      groups=mid_channels, act=act)
        if use_se:
            self.depth_conv.add_module("se", SqueezeExcite(mid_channels))
        self.point_linear = conv_bn_act(mid_channels, out_channels, 1)


class ResidualBlock(nn.Module):
    """A block plus an optional identity shortcut (OFA's ResidualBlock; the layer sits in `.conv`)."""

    def __init__(self, conv: nn.Module, residual: bool):
        super().__init__()
        self.conv = conv
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y + x if self.residual else y


# -- elastic layers ----------------------------------------------------------------------------
class DynamicConv2d(nn.Module):
    """Dense conv whose active filters are the first `active_out_channels` x first input channels."""

    def __init__(self, max_in_channels: int, max_out_channels: int, kernel_size: int = 1,
                 stride: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(max_in_channels, max_out_channels, kernel_size, stride,
                              same_padding(kernel_size), bias=False)
        self.active_out_channels = max_out_channels

    def active_weight(self, out_channels: int, in_channels: int) -> torch.Tensor:
        return self.conv.weight[:out_channels, :in_channels]

    def forward(self, x: torch.Tensor, out_channels: int | None = None) -> torch.Tensor:
        w = self.active_weight(out_channels or self.active_out_channels, x.size(1))
        return F.conv2d(x, w, None, self.conv.stride, self.conv.padding)


class DynamicSeparableConv2d(nn.Module):
    """Depthwise conv with elastic kernel size (Once-for-All's kernel transformation).

    The largest kernel is stored. A smaller kernel is the centre crop of the next larger *active*
    kernel passed through a learned ``ks^2 x ks^2`` matrix (identity at init), shared by all channels
    of the layer: 7 -> 5 -> 3 chains crop+transform twice.
    """

    def __init__(self, max_channels: int, kernel_sizes: Iterable[int], stride: int = 1):
        super().__init__()
        self.kernel_sizes = sorted(set(int(k) for k in kernel_sizes))
        k_max = self.kernel_sizes[-1]
        self.conv = nn.Conv2d(max_channels, max_channels, k_max, stride, same_padding(k_max),
                              groups=max_channels, bias=False)
        for small, large in zip(self.kernel_sizes, self.kernel_sizes[1:]):
            self.register_parameter(self._matrix_name(large, small), nn.Parameter(torch.eye(small * small)))
        self.active_kernel_size = k_max

    @staticmethod
    def _matrix_name(large: int, small: int) -> str:
        return f"{large}to{small}_matrix"

    def active_weight(self, channels: int, kernel_size: int) -> torch.Tensor:
        if kernel_size not in self.kernel_sizes:
            raise InputError(f"kernel size {kernel_size} is not one of this layer's {self.kernel_sizes}; "
                             "pick a kernel size from the supernet's search space")
        w = self.conv.weight[:channels]
        for large, small in zip(self.kernel_sizes[::-1], self.kernel_sizes[-2::-1]):
            if large <= kernel_size:
                break
            start = (large - small) // 2
            crop = w[:, :, start:start + small, start:start + small].reshape(-1, small * small)
            w = F.linear(crop, getattr(self, self._matrix_name(large, small))).view(channels, 1, small, small)
        return w

    def forward(self, x: torch.Tensor, kernel_size: int | None = None) -> torch.Tensor:
        k = kernel_size or self.active_kernel_size
        c = x.size(1)
        return F.conv2d(x, self.active_weight(c, k), None, self.conv.stride, same_padding(k), 1, c)


class DynamicBatchNorm2d(nn.Module):
    """BatchNorm over the first C channels of the stored statistics and affine parameters.

    Slices are views, so training-mode forwards update the first C running statistics in place.
    """

    def __init__(self, max_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(max_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn, c = self.bn, x.size(1)
        if c == bn.num_features:
            return bn(x)
        factor = 0.0
        if bn.training and bn.track_running_stats:
            bn.num_batches_tracked.add_(1)
            factor = 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
        return F.batch_norm(x, bn.running_mean[:c], bn.running_var[:c], bn.weight[:c], bn.bias[:c],
                            bn.training or not bn.track_running_stats, factor, bn.eps)

    def active_state(self, channels: int) -> dict[str, torch.Tensor]:
        bn = self.bn
        return {"weight": bn.weight[:channels], "bias": bn.bias[:channels],
                "running_mean": bn.running_mean[:channels], "running_var": bn.running_var[:channels],
                "num_batches_tracked": bn.num_batches_tracked}

    def permute_(self, idx: torch.Tensor) -> None:
        for t in (self.bn.weight, self.bn.bias, self.bn.running_mean, self.bn.running_var):
            _permute_(t, idx, 0)


class DynamicSE(SqueezeExcite):
    """SE on the first C channels; its bottleneck is `se_channels(C)`, the first ones of the stored."""

    def active_state(self, channels: int) -> dict[str, torch.Tensor]:
        mid = se_channels(channels)
        fc = self.fc
        return {"fc.reduce.weight": fc.reduce.weight[:mid, :channels],
                "fc.reduce.bias": fc.reduce.bias[:mid],
                "fc.expand.weight": fc.expand.weight[:channels, :mid],
                "fc.expand.bias": fc.expand.bias[:channels]}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.active_state(x.size(1))
        y = self.fc.relu(F.conv2d(_global_pool(x), p["fc.reduce.weight"], p["fc.reduce.bias"]))
        y = self.fc.h_sigmoid(F.conv2d(y, p["fc.expand.weight"], p["fc.expand.bias"]))
        return x * y


def _permute_(t: torch.Tensor, idx: torch.Tensor, dim: int) -> None:
    """Reorder `t` along `dim` in place (keeps Parameter identity, so optimizers stay attached)."""
    with torch.no_grad():
        t.copy_(t.index_select(dim, idx))


class DynamicMBConv(_MBConvBase):
    """Elastic MBConv: `active_kernel_size` and `active_expand_ratio` pick the subnet's block.

    The hidden width is ``expand_channels(C_in, e)`` of the actual input width, taken as the first
    channels of the stored hidden layer (the most important ones after `sort_channels`).
    """

    def __init__(self, max_in_channels: int, out_channels: int, kernel_sizes: Iterable[int],
                 expand_ratios: Iterable[int], stride: int, act: str, use_se: bool):
        super().__init__()
        self.kernel_sizes = sorted(set(kernel_sizes))
        self.expand_ratios = sorted(set(expand_ratios))
        self.out_channels = out_channels
        self.use_se = use_se
        max_mid = expand_channels(max_in_channels, self.expand_ratios[-1])
        self.inverted_bottleneck = nn.Sequential(OrderedDict([
            ("conv", DynamicConv2d(max_in_channels, max_mid)),
            ("bn", DynamicBatchNorm2d(max_mid)),
            ("act", build_act(act)),
        ]))
        self.depth_conv = nn.Sequential(OrderedDict([
            ("conv", DynamicSeparableConv2d(max_mid, self.kernel_sizes, stride)),
            ("bn", DynamicBatchNorm2d(max_mid)),
            ("act", build_act(act)),
        ]))
        if use_se:
            self.depth_conv.add_module("se", DynamicSE(max_mid))
        self.point_linear = nn.Sequential(OrderedDict([
            ("conv", DynamicConv2d(max_mid, out_channels)),
            ("bn", DynamicBatchNorm2d(out_channels)),
        ]))
        self.active_kernel_size = self.kernel_sizes[-1]
        self.active_expand_ratio = self.expand_ratios[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mid = expand_channels(x.size(1), self.active_expand_ratio)
        self.inverted_bottleneck.conv.active_out_channels = mid
        self.depth_conv.conv.active_kernel_size = self.active_kernel_size
        return super().forward(x)

    def active_state(self, in_channels: int, kernel_size: int, expand_ratio: int) -> dict[str, torch.Tensor]:
        """Weights of the static `MBConv` equal to this block at (C_in, k, e), keyed by its names.
        Detached copies, safe to save or modify."""
        mid = expand_channels(in_channels, expand_ratio)
        ib, dw, pl = self.inverted_bottleneck, self.depth_conv, self.point_linear
        state = {"inverted_bottleneck.conv.weight": ib.conv.active_weight(mid, in_channels),
                 "depth_conv.conv.weight": dw.conv.active_weight(mid, kernel_size),
                 "point_linear.conv.weight": pl.conv.active_weight(self.out_channels, mid)}
        for prefix, bn, c in (("inverted_bottleneck.bn.", ib.bn, mid), ("depth_conv.bn.", dw.bn, mid),
                              ("point_linear.bn.", pl.bn, self.out_channels)):
            state.update({prefix + k: v for k, v in bn.active_state(c).items()})
        if self.use_se:
            state.update({"depth_conv.se." + k: v for k, v in dw.se.active_state(mid).items()})
        return {k: v.detach().clone() for k, v in state.items()}

    @torch.no_grad()
    def sort_channels(self, expand_stage: int = 0) -> None:
        """Once-for-All's ``re_organize_middle_weights``: order hidden channels by the L1 norm of
        their point-linear weights, most important first, so every expand ratio keeps the best ones.
        The whole hidden path is permuted consistently: the block's function does not change.

        `expand_stage` > 0 (progressive shrinking of the expand ratio, phase n) first pushes the
        channels beyond each already-trained width below those within it, so that those widths
        keep their channels and only reorder inside them.
        """
        pl_w = self.point_linear.conv.conv.weight
        importance = pl_w.abs().sum(dim=(0, 2, 3))
        if expand_stage > 0:
            max_in = self.inverted_bottleneck.conv.conv.in_channels
            widths = [expand_channels(max_in, e) for e in sorted(self.expand_ratios, reverse=True)]
            right, base = len(importance), -len(widths) * 1e5
            for left in widths[:expand_stage + 1]:
                importance[left:right] += base
                base += 1e5
                right = left
        idx = torch.argsort(importance, descending=True)
        _permute_(pl_w, idx, 1)
        self.depth_conv.bn.permute_(idx)
        _permute_(self.depth_conv.conv.conv.weight, idx, 0)
        if self.use_se:
            fc = self.depth_conv.se.fc
            _permute_(fc.expand.weight, idx, 0)
            _permute_(fc.expand.bias, idx, 0)
            _permute_(fc.reduce.weight, idx, 1)
            se_idx = torch.argsort(fc.expand.weight.abs().sum(dim=(0, 2, 3)), descending=True)
            _permute_(fc.expand.weight, se_idx, 1)
            _permute_(fc.reduce.weight, se_idx, 0)
            _permute_(fc.reduce.bias, se_idx, 0)
        self.inverted_bottleneck.bn.permute_(idx)
        _permute_(self.inverted_bottleneck.conv.conv.weight, idx, 0)
