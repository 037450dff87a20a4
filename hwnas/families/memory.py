"""A subnet's memory without building it: the activation arena a memory-planned program reserves
(RAM) and the bytes of its weights (flash), per precision.

A family describes the tensors its network allocates, in execution order (`TensorTrace`: one
output tensor per operator, lifetimes from allocation to last use, as ExecuTorch's out-variant
programs run), and the constants it stores. `plan_arena` then places those tensors the way
ExecuTorch's default memory planner does (`exir.memory_planning.greedy`: largest first, into
shared buffers, overlapping offsets allowed, 16-byte alignment), so the fp32 arena equals the
memory plan of the network exported with portable kernels, byte for byte (checked against
ExecuTorch in tests/families/test_memory.py and experiments/bench_memory.py).

bf16 and int8 scale every tensor to the precision's element size: what a runtime with native
kernels of that precision plans. Int8 weights carry per-channel quantisation parameters (fp32
scale, int64 zero point, fp32 bias with BN folded in). Sizes are bytes; `kb` means 1024 bytes.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from hwnas.errors import InputError

__all__ = ["ALIGNMENT", "MEMORY_PRECISIONS", "KB", "TensorTrace", "plan_arena", "memory_bytes", "family_memory",
           "check_memory_model", "check_precision", "conv_bn", "activation", "squeeze_excite", "linear",
           "mbconv_block", "mbconv_chain"]

ALIGNMENT = 16  # ExecuTorch's default tensor alignment in the planned arena
KB = 1024
#: element size of activations and weights; int8 adds per-channel quantisation parameters
MEMORY_PRECISIONS: dict[str, int] = {"fp32": 4, "bf16": 2, "int8": 1}
_INT8_PER_CHANNEL = 4 + 8 + 4  # fp32 scale, int64 zero point, fp32 bias (BN folded)


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def check_precision(precision: str, what: str = "precision") -> str:
    if precision not in MEMORY_PRECISIONS:
        raise InputError(f"{what} must be one of {', '.join(MEMORY_PRECISIONS)}, got {precision!r}")
    return precision


class TensorTrace:
    """The tensors a program allocates, in execution order, and the constants it stores.

    Each operator allocates its output (node ``t``), runs (node ``t + 1``) and ends the lifetime of
    its inputs there; a tensor lives from its allocation to its last use, the graph input from
    node 0, the graph output one node past its producer (the output node)."""

    def __init__(self, precision: str = "fp32") -> None:
        check_precision(precision)
        self.precision, self.itemsize = precision, MEMORY_PRECISIONS[precision]
        self.size: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.constant_bytes = 0
        self.node = 0

    def _tensor(self, nbytes: int) -> int:
        self.size.append(_aligned(nbytes))
        self.start.append(self.node)
        self.end.append(self.node)
        return len(self.size) - 1

    def input(self, numel: int) -> int:
        t = self._tensor(numel * self.itemsize)
        self.node += 1
        return t

    def op(self, inputs: Sequence[int], numel: int, nbytes: int | None = None, extra: Sequence[int] = ()) -> int:
        """One operator reading `inputs` and writing a new tensor of `numel` elements; `extra`: the
        bytes of further outputs nothing reads (max pooling's indices), alive until the next node."""
        t = self._tensor(numel * self.itemsize if nbytes is None else nbytes)
        self.node += 1
        more = []
        for b in extra:
            more.append(self._tensor(b))
            self.node += 1
        for i in inputs:
            if self.end[i] < self.node:
                self.end[i] = self.node
        self.end[t] = self.node
        for i in more:
            self.end[i] = self.node + 1
        self.node += 1 + (1 if extra else 0)
        return t

    def scalar(self) -> int:
        """A 0-d constant copied into the arena (ExecuTorch's dim-order copy of `x + 3`'s 3)."""
        return self.op((), 1, nbytes=4)

    def view(self) -> None:
        """A view node: no tensor, one node (its base lives on to the view's users)."""
        self.node += 1

    def output(self, t: int) -> None:
        self.end[t] = self.node

    def weights(self, numel: int, out_channels: int = 0, bn: bool = False, bias: bool = False) -> None:
        """A stored weight tensor with its bias and BN statistics (fp32/bf16: BN's four vectors;
        int8: BN folded, per-channel quantisation parameters)."""
        if self.precision == "int8":
            self.constant_bytes += numel + _INT8_PER_CHANNEL * out_channels
        else:
            self.constant_bytes += self.itemsize * (numel + out_channels * ((4 if bn else 0) + (1 if bias else 0)))

    def append(self, part: "TensorTrace") -> int:
        """Run `part` next: a trace of one part of the network whose tensor 0 stands for this
        trace's last tensor (its input). Returns the index of the part's output here."""
        base, last = len(self.size) - 1, len(self.size) - 1
        shift = self.node - 1
        self.size.extend(part.size[1:])
        self.start.extend(v + shift for v in part.start[1:])
        self.end.extend(v + shift for v in part.end[1:])
        if part.end[0] + shift > self.end[last]:
            self.end[last] = part.end[0] + shift
        self.node += part.node - 1
        self.constant_bytes += part.constant_bytes
        return base + len(part.size) - 1

    def arena(self) -> int:
        return plan_arena(self.size, self.start, self.end)


def plan_arena(size: Sequence[int], start: Sequence[int], end: Sequence[int]) -> int:
    """Bytes of the arena ExecuTorch's greedy planner reserves for tensors of `size` bytes alive
    over nodes [start, end]: largest first (equal sizes latest first, as ExecuTorch's reversed
    sort of its tensor set orders them); each goes into the first buffer
    none of whose tensors it overlaps in time (at offset 0), else into the first buffer with room
    above the tensors it overlaps, else into a new buffer of its size; the arena is the sum of the
    buffers. A buffer keeps, per node, the top of the tensors alive there."""
    n_nodes = (max(end) + 2) if len(end) else 1
    buffers: list[tuple[int, list[int]]] = []
    for i in sorted(range(len(size)), key=lambda i: (size[i], i), reverse=True):
        nbytes, s, e = size[i], start[i], end[i] + 1
        if nbytes == 0:
            continue
        placed = False
        for _, top in buffers:
            if not any(top[s:e]):
                top[s:e] = [nbytes] * (e - s)
                placed = True
                break
        if not placed:
            for cap, top in buffers:
                offset = max(top[s:e])
                if offset + nbytes <= cap:
                    top[s:e] = [offset + nbytes] * (e - s)
                    placed = True
                    break
        if not placed:
            top = [0] * n_nodes
            top[s:e] = [nbytes] * (e - s)
            buffers.append((nbytes, top))
    return sum(cap for cap, _ in buffers)


# -- the operators MBConv families run, as ExecuTorch's edge dialect decomposes them ------------
def conv_bn(tr: TensorTrace, x: int, cin: int, cout: int, k: int, size_out: int, groups: int = 1,
            bn: bool = True, bias: bool = False) -> int:
    """A convolution (and its BN: one more tensor of the same shape, statistics stored)."""
    numel = cout * size_out * size_out
    y = tr.op((x,), numel)
    tr.weights(cout * (cin // groups) * k * k, cout, bn=bn, bias=bias)
    return tr.op((y,), numel) if bn else y


def activation(tr: TensorTrace, x: int, kind: str, numel: int) -> int:
    """relu / relu6: one operator; h_swish ``x * relu6(x + 3) / 6`` and h_sigmoid ``relu6(x + 3) /
    6``: an add, two clamps, (a multiply,) a divide, each scalar copied in first. In bf16 the
    decomposition runs in fp32 between two dtype copies (as ExecuTorch's edge dialect lowers it)."""
    if kind in ("relu", "relu6"):
        return tr.op((x,), numel)
    if kind not in ("h_swish", "h_sigmoid"):
        raise InputError(f"no memory model for activation {kind!r}")
    wide = 4 * numel if tr.precision == "bf16" else None
    src = tr.op((x,), numel, nbytes=wide) if wide else x
    three = tr.scalar()
    y = tr.op((tr.op((tr.op((src, three), numel, wide),), numel, wide),), numel, wide)
    if kind == "h_swish":
        y = tr.op((src, y), numel, wide)
    six = tr.scalar()
    y = tr.op((y, six), numel, wide)
    return tr.op((y,), numel) if wide else y


def squeeze_excite(tr: TensorTrace, x: int, channels: int, squeezed: int, size: int) -> int:
    """Mean over space, reduce conv + relu, expand conv + h_sigmoid, scale."""
    s = tr.op((x,), channels)
    s = activation(tr, conv_bn(tr, s, channels, squeezed, 1, 1, bn=False, bias=True), "relu", squeezed)
    s = activation(tr, conv_bn(tr, s, squeezed, channels, 1, 1, bn=False, bias=True), "h_sigmoid", channels)
    return tr.op((x, s), channels * size * size)


def linear(tr: TensorTrace, x: int, cin: int, cout: int, flatten: bool = True) -> int:
    """Flatten (a view), then a linear layer: its transposed weight is copied into the arena
    (portable kernels' permute + addmm), and its output is the graph's."""
    if flatten:
        tr.view()
    transposed = tr.op((), cout * cin, nbytes=cout * cin * tr.itemsize)
    tr.weights(cout * cin, cout, bias=True)
    out = tr.op((x, transposed), cout)
    tr.node += 1
    tr.output(out)
    return out


@functools.lru_cache(maxsize=65536)
def mbconv_block(b: Any, k: int, e: int, s: int, precision: str) -> TensorTrace:
    """One MBConv block (`hwnas.families.mbconv.BlockSpec` `b`, kernel `k`, expand ratio `e`) on an
    `s` x `s` input, as a part to `TensorTrace.append`: expand, depthwise, SE, project, residual."""
    from hwnas.channels import expand_channels, se_channels
    from hwnas.families.parts import out_size

    tr = TensorTrace(precision)
    x = tr.input(b.in_channels * s * s)
    mid, so = expand_channels(b.in_channels, e), out_size(s, k, b.stride)
    y = activation(tr, conv_bn(tr, x, b.in_channels, mid, 1, s), b.act, mid * s * s)
    y = activation(tr, conv_bn(tr, y, mid, mid, k, so, groups=mid), b.act, mid * so * so)
    if b.use_se:
        y = squeeze_excite(tr, y, mid, se_channels(mid), so)
    y = conv_bn(tr, y, mid, b.out_channels, 1, so)
    if b.residual:
        tr.op((x, y), b.out_channels * so * so)
    return tr


def mbconv_chain(r: int, stem: TensorTrace, blocks: Any, ks: Sequence[int], es: Sequence[int],
                 head: Callable[[int], TensorTrace], precision: str) -> TensorTrace:
    """An MBConv network's trace: the `r` x `r` input, its `stem` part (stride 2), each of `blocks`
    (`BlockSpec`s, kernel and expand ratio from `ks` / `es` by slot), then `head(final size)`."""
    from hwnas.families.parts import out_size

    tr = TensorTrace(precision)
    tr.input(3 * r * r)
    tr.append(stem)
    s = out_size(r, 3, 2)
    for b in blocks:
        tr.append(mbconv_block(b, ks[b.slot], es[b.slot], s, precision))
        s = out_size(s, ks[b.slot], b.stride)
    tr.append(head(s))
    return tr


def check_memory_model(family: Any) -> None:
    """One line when `family` cannot say its subnets' memory."""
    if not family.has_memory_model:
        raise InputError(f"{family.title} has no memory model, so its subnets have no ram_kb / flash_kb; "
                         "a family adds one by defining memory_trace (docs/architecture.md)")


def memory_bytes(trace_of: Callable[[Sequence[int], str], TensorTrace], m: np.ndarray,
                 precision: str = "fp32", cache: dict[bytes, tuple[int, int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(arena bytes, weight bytes), int64 [n] each, of rows `m` whose traces `trace_of(row,
    precision)` builds; each distinct row is planned once (`cache`, by row bytes, may be shared)."""
    m = np.ascontiguousarray(np.asarray(m, dtype=np.int64))
    cache = {} if cache is None else cache
    ram = np.empty(len(m), dtype=np.int64)
    flash = np.empty(len(m), dtype=np.int64)
    for i, row in enumerate(m):
        key = row.tobytes()
        hit = cache.get(key)
        if hit is None:
            tr = trace_of([int(v) for v in row], precision)
            hit = cache[key] = (tr.arena(), tr.constant_bytes)
        ram[i], flash[i] = hit
    return ram, flash


def family_memory(family: Any, m: np.ndarray, width_mult: float, n_classes: int,
                  precision: str = "fp32", cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`memory_bytes` of a family's rows (`Family.memory_trace`)."""
    check_memory_model(family)
    return memory_bytes(lambda row, p: family.memory_trace(row, width_mult, n_classes, p), m, precision, cache)
