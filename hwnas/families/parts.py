"""The additive cost layout of a family's networks: what the lookup-table and analytic latency
predictors sum (`Family.cost_layout`).

A subnet runs a fixed list of *parts*: the stem, each searchable block position that its depth
genes keep, and the head. A part's shapes (and so its costs and its latency when timed alone)
depend only on a few flat-row columns -- the resolution ``r`` and some genes -- called its *key*.
So any per-part quantity can be tabulated once per distinct key and summed over many rows with
fancy indexing (`hwnas.latency.layout.PartGather`). A `CostLayout` says, for one family at one
width and class count:

- `parts`: each part's kind (stem / block / head), stage, position and key columns;
- `active(m)`: which parts each row runs;
- `cost(p, key)`: its exact costs, named by `cost_names` (the family's vocabulary: MACs split by
  operator type, `macs_*`, then `REQUIRED_COSTS`; MBConv families use `COST_NAMES`);
- `kernel(p, key)`: the spatial kernel of its block (the analytic model splits MACs by it);
- `entry(p, key)` / `entry_module(entry)`: the lookup-table entry that times the part alone
  (`entry_columns`, 7 values: part name, then six integers, the last one the input size) and the
  module + input shape that measures it (torch imported there only).

The block-level MACs summed over a row's active parts equal `Family.count_params_macs` exactly.
This module is torch-free.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

__all__ = ["COST_NAMES", "REQUIRED_COSTS", "Part", "CostLayout", "block_mac_names", "cached_layout",
           "check_cost_names", "Conv", "conv_cost", "mbconv_convs", "mbconv_cost", "out_size"]

#: what every family's costs include (the analytic features' common ground): MACs of the parts that
#: are not blocks, activation and weight bytes (fp32: a constant factor for other precisions), the
#: operator count (kernel launches) and the block count
REQUIRED_COSTS: tuple[str, ...] = ("macs_fixed", "act_bytes", "weight_bytes", "convs", "blocks")
#: MBConv families' per-part costs: the blocks' MACs by operator (1x1, depthwise, squeeze-excite) first
COST_NAMES: tuple[str, ...] = ("macs_pw", "macs_dw", "macs_se") + REQUIRED_COSTS


def block_mac_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The blocks' MAC counts among a layout's `cost_names` (`macs_<op>`; not `macs_fixed`)."""
    return tuple(n for n in names if n.startswith("macs_") and n != "macs_fixed")


def check_cost_names(names: tuple[str, ...], kernel_split: str | None) -> str | None:
    """What is wrong with a layout's cost vocabulary, or None: the block MACs (`block_mac_names`)
    come first, then `REQUIRED_COSTS` in order; `kernel_split` is one of the block MACs."""
    macs = list(block_mac_names(names))
    if not macs or tuple(names) != tuple(macs) + REQUIRED_COSTS:
        return (f"cost_names {tuple(names)} must be the blocks' MAC counts (macs_<operator>, at least one) "
                f"followed by {', '.join(REQUIRED_COSTS)}")
    if kernel_split is not None and kernel_split not in macs:
        return f"kernel_split {kernel_split!r} is not one of the blocks' MAC counts ({', '.join(macs)})"
    return None


def out_size(size: int, k: int, stride: int) -> int:
    """Output size of a conv with padding k//2."""
    return (size + 2 * (k // 2) - k) // stride + 1


def conv_cost(cin: int, cout: int, k: int, size_in: int, size_out: int, groups: int = 1,
              bias: bool = False) -> np.ndarray:
    """[macs, act_bytes, weight_bytes] of one convolution (BN folded: no extra traffic)."""
    return Conv("", cin, cout, k, size_in, size_out, groups, bias).cost()


@dataclass(frozen=True)
class Conv:
    """One convolution of a block, the single description both of its cost models read: `cost()`
    (`conv_cost`: MACs and bytes, for latency) and `params` / `macs` (Once-for-All's counting:
    BN affine counted, for `count_params_macs`). `role`: "pw" (1x1), "dw" (depthwise) or "se"."""

    role: str
    cin: int
    cout: int
    k: int
    size_in: int
    size_out: int
    groups: int = 1
    bias: bool = False
    bn: bool = True

    @property
    def weights(self) -> int:
        return self.cout * (self.cin // self.groups) * self.k * self.k

    @property
    def macs(self) -> int:
        return self.weights * self.size_out * self.size_out

    @property
    def params(self) -> int:
        return self.weights + (self.cout if self.bias else 0) + (2 * self.cout if self.bn else 0)

    def cost(self) -> np.ndarray:
        """[macs, act_bytes, weight_bytes] (`conv_cost`; BN folded: no extra traffic)."""
        return np.array([self.macs, 4 * (self.cin * self.size_in ** 2 + self.cout * self.size_out ** 2),
                         4 * (self.weights + (self.cout if self.bias else 0))], dtype=np.float64)


def mbconv_convs(cin: int, cout: int, k: int, e: int, stride: int, size: int, use_se: bool,
                 expand: bool = True) -> tuple[tuple[Conv, ...], int]:
    """(convolutions, output size) of one MBConv block on a `size` x `size` input: 1x1 expand (unless
    `expand` is False), k x k depthwise, optional squeeze-and-excitation, 1x1 project."""
    from hwnas.channels import expand_channels, se_channels

    mid = expand_channels(cin, e) if expand else cin
    out = out_size(size, k, stride)
    convs = [Conv("pw", cin, mid, 1, size, size)] if expand else []
    convs.append(Conv("dw", mid, mid, k, size, out, groups=mid))
    if use_se:
        s = se_channels(mid)
        convs += [Conv("se", mid, s, 1, 1, 1, bias=True, bn=False), Conv("se", s, mid, 1, 1, 1, bias=True, bn=False)]
    convs.append(Conv("pw", mid, cout, 1, out, out))
    return tuple(convs), out


@functools.lru_cache(maxsize=65536)
def mbconv_cost(cin: int, cout: int, k: int, e: int, stride: int, size: int, use_se: bool,
                residual: bool, expand: bool = True) -> np.ndarray:
    """`COST_NAMES` of one MBConv block (`mbconv_convs`), plus the activation traffic of its SE
    scaling and residual add."""
    convs, out = mbconv_convs(cin, cout, k, e, stride, size, use_se, expand)
    role = {r: sum((c.cost() for c in convs if c.role == r), np.zeros(3)) for r in ("pw", "dw", "se")}
    extra_act = 0.0
    if use_se:
        mid = convs[1 if expand else 0].cout
        extra_act += 4 * 3 * mid * out * out  # pool reads, the scale multiply reads and writes
    if residual:
        extra_act += 4 * 3 * cout * out * out
    total = role["pw"] + role["dw"] + role["se"]
    return np.array([role["pw"][0], role["dw"][0], role["se"][0], 0.0, total[1] + extra_act, total[2],
                     len(convs), 1.0])


@dataclass(frozen=True)
class Part:
    """One part of the network: `kind` "stem" | "block" | "head", its `stage` (-1 for the stem,
    the number of stages for the head), its position `index` in the stage, and the flat-row
    `columns` its shapes depend on (column 0, ``r``, first)."""

    kind: str
    stage: int
    index: int
    columns: tuple[int, ...]


class CostLayout(ABC):
    """A family's parts at one width multiplier and class count (see the module docstring)."""

    #: searchable stages (the analytic "stage" features have one set per stage)
    n_stages: int = 0
    #: the names of `cost`'s values (`check_cost_names`): a family's own vocabulary, e.g. a
    #: transformer's ("macs_attn", "macs_mlp") + REQUIRED_COSTS
    cost_names: tuple[str, ...] = COST_NAMES
    #: the block MACs the analytic "full" features split by the block's spatial kernel (`kernel`),
    #: one column per size in `kernels`; None: no split (e.g. a family without spatial kernels)
    kernel_split: str | None = "macs_dw"
    #: spatial kernel sizes of the blocks' main convolutions (the analytic "full" features)
    kernels: tuple[int, ...] = (3,)
    #: the lookup-table entry columns: "part", five integers, "size" (the part's input size)
    entry_columns: tuple[str, ...] = ("part", "stage", "j", "in_ch", "k", "e", "size")

    def __init__(self, family: Any, width_mult: float, n_classes: int) -> None:
        self.family = family  # the `hwnas.families.base.Family` whose `cost_layout` built it
        self.width_mult, self.n_classes = float(width_mult), int(n_classes)

    @property
    def family_name(self) -> str:
        return self.family.name

    @property
    @abstractmethod
    def parts(self) -> tuple[Part, ...]:
        """Every part a subnet may run, in network order."""

    @abstractmethod
    def active(self, m: np.ndarray) -> np.ndarray:
        """bool [n, len(parts)]: the parts each canonical flat row runs."""

    @abstractmethod
    def cost(self, p: int, key: tuple[int, ...]) -> np.ndarray:
        """float64 [len(cost_names)]: exact costs of part `p` with key values `key`."""

    def kernel(self, p: int, key: tuple[int, ...]) -> int:
        """The spatial kernel of a block part (0 for the stem and head)."""
        return 3 if self.parts[p].kind == "block" else 0

    @abstractmethod
    def entry(self, p: int, key: tuple[int, ...]) -> tuple[Any, ...]:
        """The lookup-table entry (values of `entry_columns`) that times part `p` alone. Parts
        with equal entries have equal shapes."""

    @abstractmethod
    def entry_module(self, entry: Mapping[str, Any]) -> tuple[Any, tuple[int, ...]]:
        """(nn.Module, input shape [1, C, size, size]) that runs one entry in isolation."""

    # -- helpers --------------------------------------------------------------------------
    def type_key(self, entry: tuple[Any, ...]) -> tuple[int, ...]:
        """An entry without its size: the part type a lookup table fits one cost to."""
        return (("stem", "block", "head").index(entry[0]),) + tuple(int(v) for v in entry[1:-1])

    def entry_size(self, entry: tuple[Any, ...]) -> int:
        return int(entry[-1])


@functools.lru_cache(maxsize=64)
def cached_layout(cls: type[CostLayout], family: Any, width_mult: float, n_classes: int) -> CostLayout:
    """One shared layout per (class, family, width, classes): its per-key costs are memoised."""
    problem = check_cost_names(cls.cost_names, cls.kernel_split)
    if problem:
        raise TypeError(f"{cls.__name__}: {problem}")
    return cls(family, width_mult, n_classes)
