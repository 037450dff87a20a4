"""The layout of Once-for-All's OFA-ResNet50 (``OFAResNets``, published as ``ofa_resnet50``).

One description, without torch: the supernet, the static subnet, the analytic counter and the
checkpoint layout are all derived from `subnet_spec`, which keeps the four in agreement with each
other and with Once-for-All's own network.

The network (Once-for-All's ResNet50-D variant, all convs 'same'-padded, no bias, BN + ReLU)::

    input_stem.0   3x3 conv, stride 2          3 -> stem_mid      (w_0)
    input_stem.1   3x3 conv + identity         stem_mid -> stem_mid, dropped unless d_0 == 2
    input_stem.2   3x3 conv                    stem_mid -> stem_out   (w_1)
    max_pooling    3x3, stride 2, padding 1
    blocks.0..17   bottlenecks in 4 stages of 4, 4, 6, 4 slots; stage s runs its first
                   2, 2, 4, 2 (+ d_{s+1}) blocks at width w_{s+2}; block i has expand ratio e_i:
                   1x1 in->mid, 3x3 mid->mid (stride), 1x1 mid->out, + shortcut, ReLU.
                   mid = make_divisible(round(out * e)); a stage's first block has the shortcut
                   avg-pool(stride, ceil) -> 1x1 conv -> BN, the others the identity.
    global average pool -> classifier.linear   out_of_last_stage -> n_classes (bias)

Gene codes equal the values in Once-for-All's arch dict for ``d`` and ``w`` (``w`` holds indices
into the width multipliers); ``e`` is stored as the index into `E_CHOICES`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

from hwnas.channels import make_divisible

__all__ = ["D_CHOICES", "E_CHOICES", "W_CHOICES", "BASE_DEPTHS", "MAX_DEPTHS", "STAGE_STRIDES",
           "N_BLOCKS", "BLOCK_STAGE", "BLOCK_POS", "STEM_MID", "STEM_OUT", "STAGE_WIDTHS", "MID",
           "make_divisible", "BlockSpec", "SubnetSpec", "subnet_spec", "supernet_spec", "subnet_tensors",
           "ofa_layout"]

D_CHOICES = (0, 1, 2)
E_CHOICES = (0.2, 0.25, 0.35)
W_CHOICES = (0.65, 0.8, 1.0)

STEM_BASE_WIDTH = 64
STAGE_BASE_WIDTHS = (256, 512, 1024, 2048)
BASE_DEPTHS = (2, 2, 4, 2)
STAGE_STRIDES = (1, 2, 2, 2)
MAX_DEPTHS = tuple(b + max(D_CHOICES) for b in BASE_DEPTHS)
N_BLOCKS = sum(MAX_DEPTHS)
#: stage of each supernet block, and its position inside the stage
BLOCK_STAGE = tuple(s for s, n in enumerate(MAX_DEPTHS) for _ in range(n))
BLOCK_POS = tuple(j for n in MAX_DEPTHS for j in range(n))


#: channel widths per width code (index into W_CHOICES)
STEM_OUT = tuple(make_divisible(STEM_BASE_WIDTH * w) for w in W_CHOICES)
STEM_MID = tuple(make_divisible(c // 2) for c in STEM_OUT)
STAGE_WIDTHS = tuple(tuple(make_divisible(b * w) for w in W_CHOICES) for b in STAGE_BASE_WIDTHS)
#: MID[stage][w code][e code]: a bottleneck's hidden width follows its *output* width
MID = tuple(tuple(tuple(make_divisible(round(out * e)) for e in E_CHOICES) for out in widths)
            for widths in STAGE_WIDTHS)


@dataclass(frozen=True)
class BlockSpec:
    """One bottleneck: its slot in the supernet's ``blocks`` (= its e gene), stage and widths."""

    index: int
    stage: int
    in_channels: int
    mid_channels: int
    out_channels: int
    stride: int
    conv_shortcut: bool  # a stage's first block: avg-pool + 1x1 conv + BN instead of the identity


@dataclass(frozen=True)
class SubnetSpec:
    stem_mid: int
    stem_block: bool  # the stem's residual 3x3 conv runs (d_0 == max depth)
    stem_out: int
    blocks: tuple[BlockSpec, ...]

    @property
    def features(self) -> int:
        """Width of the pooled features the classifier reads."""
        return self.blocks[-1].out_channels


@functools.lru_cache(maxsize=4096)
def _spec(d: tuple[int, ...], e: tuple[int, ...], w: tuple[int, ...]) -> SubnetSpec:
    blocks, cin = [], STEM_OUT[w[1]]
    for i, (s, j) in enumerate(zip(BLOCK_STAGE, BLOCK_POS)):
        if j >= BASE_DEPTHS[s] + d[s + 1]:
            continue
        out = STAGE_WIDTHS[s][w[s + 2]]
        blocks.append(BlockSpec(i, s, cin, MID[s][w[s + 2]][e[i]], out,
                                STAGE_STRIDES[s] if j == 0 else 1, j == 0))
        cin = out
    return SubnetSpec(STEM_MID[w[0]], d[0] == max(D_CHOICES), STEM_OUT[w[1]], tuple(blocks))


def subnet_spec(d: Sequence[int], e: Sequence[int], w: Sequence[int]) -> SubnetSpec:
    """The subnet of valid gene codes: d (5), e (18, indices into E_CHOICES), w (6)."""
    return _spec(tuple(map(int, d)), tuple(map(int, e)), tuple(map(int, w)))


def supernet_spec() -> SubnetSpec:
    """Every block at its largest widths: the shapes the supernet stores (Once-for-All's max
    hidden width is that of the largest output width and expand ratio, as here)."""
    top = len(D_CHOICES) - 1
    return subnet_spec([max(D_CHOICES)] * 5, [len(E_CHOICES) - 1] * N_BLOCKS, [top] * 6)


_BN_KEYS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def subnet_tensors(spec: SubnetSpec, n_classes: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """(static key, supernet key, shape) of every tensor of the static subnet `spec`, in
    state-dict order. Once-for-All's elastic layers hold the plain one under its own name
    (``conv.conv``, ``bn.bn``, ``linear.linear``); the static subnet numbers its stem layers and
    blocks from 0 without gaps, like Once-for-All's ``get_active_subnet()``."""
    out: list[tuple[str, str, tuple[int, ...]]] = []

    def conv_bn(static: str, elastic: str, cin: int, cout: int, k: int) -> None:
        out.append((f"{static}.conv.weight", f"{elastic}.conv.conv.weight", (cout, cin, k, k)))
        out.extend((f"{static}.bn.{key}", f"{elastic}.bn.bn.{key}", () if key == "num_batches_tracked"
                    else (cout,)) for key in _BN_KEYS)

    conv_bn("input_stem.0", "input_stem.0", 3, spec.stem_mid, 3)
    if spec.stem_block:
        conv_bn("input_stem.1.conv", "input_stem.1.conv", spec.stem_mid, spec.stem_mid, 3)
    conv_bn(f"input_stem.{1 + spec.stem_block}", "input_stem.2", spec.stem_mid, spec.stem_out, 3)
    for i, b in enumerate(spec.blocks):
        static, elastic = f"blocks.{i}", f"blocks.{b.index}"
        conv_bn(f"{static}.conv1", f"{elastic}.conv1", b.in_channels, b.mid_channels, 1)
        conv_bn(f"{static}.conv2", f"{elastic}.conv2", b.mid_channels, b.mid_channels, 3)
        conv_bn(f"{static}.conv3", f"{elastic}.conv3", b.mid_channels, b.out_channels, 1)
        if b.conv_shortcut:
            conv_bn(f"{static}.downsample", f"{elastic}.downsample", b.in_channels, b.out_channels, 1)
    out.append(("classifier.linear.weight", "classifier.linear.linear.weight", (n_classes, spec.features)))
    out.append(("classifier.linear.bias", "classifier.linear.linear.bias", (n_classes,)))
    return out


def ofa_layout(n_classes: int = 1000) -> dict[str, tuple[int, ...]]:
    """Every key of Once-for-All's ``OFAResNets`` state dict and its shape, in state-dict order."""
    return {key: shape for _, key, shape in subnet_tensors(supernet_spec(), n_classes)}
