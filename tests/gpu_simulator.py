"""A synthetic GPU (eager-PyTorch-like) latency model, for tests and benchmarks only (not part of
the package).

Real GPU latencies of small CNNs are not a linear function of MACs: at batch 1 every kernel launch
costs a few microseconds whatever its size, so depth dominates; at large batch, depthwise
convolutions run far below peak and small feature maps leave the GPU under-occupied. This module
times each kernel an eager PyTorch forward would launch (convolutions, unfused BN, activations,
squeeze-excite ops, residual adds) as ``max(launch, latency + max(flops / (peak * efficiency *
occupancy), bytes / bandwidth))`` with a fixed per-(kernel, shape) "algorithm choice" jitter and
multiplicative measurement noise; GPUs of one family share most of that jitter. It is *not* a predictor and never learns from data: it gives
tests a device whose structure the predictors must discover, with known ground truth.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

import numpy as np

from hwnas.errors import InputError
from legacy_mbv3_blocks import SlotGather, as_matrix, slot_sizes, slot_specs
from hwnas.channels import expand_channels, se_channels
from hwnas.families.ofa_mbv3.plan import mbv3_plan

__all__ = ["GpuModel", "GPUS", "simulate_latency"]


@dataclass(frozen=True)
class GpuModel:
    name: str
    peak_flops: float  # FLOP/s (2 per MAC)
    bandwidth: float  # bytes/s
    launch_s: float  # host dispatch per kernel
    latency_s: float  # minimum kernel duration on the device
    occupancy_half: float  # output elements at which a kernel reaches half the peak rate
    jitter: float  # sigma of this device's own per-(kernel, shape) log-multiplier
    seed: int
    family_jitter: float = 0.0  # sigma of the multiplier shared by its family (same software stack)
    family: int = 0


# Two GPUs of one family: they share most of the kernel-choice jitter (the same library picks the
# same algorithms), which is what lets a predictor transfer between them from a few rows.
GPUS: dict[str, GpuModel] = {
    "gpu-a": GpuModel("gpu-a", 13e12, 550e9, 8e-6, 3e-6, 1.5e5, 0.03, 1, 0.15, 7),
    "gpu-b": GpuModel("gpu-b", 30e12, 900e9, 5.5e-6, 2.5e-6, 3e5, 0.03, 2, 0.15, 7),
}
_EFF = {"conv": 0.55, "dw": 0.09, "se": 0.25, "fc": 0.4, "ew": 1.0}
_DW_K = {3: 1.0, 5: 0.85, 7: 0.7}


def _normal(seed: int, key: tuple) -> float:
    return float(np.random.default_rng(zlib.crc32(repr((seed,) + key).encode())).normal())


def _jitter(gpu: GpuModel, key: tuple) -> float:
    # the family part ignores the batch (key[1]): algorithm choice follows the layer's shape
    return float(np.exp(gpu.jitter * _normal(gpu.seed, key)
                        + gpu.family_jitter * _normal(-1 - gpu.family, key[:1] + key[2:])))


def _kernel(gpu: GpuModel, batch: int, kind: str, macs: float, elems_in: float, elems_out: float,
            weights: float, key: tuple) -> float:
    flops = 2.0 * macs * batch
    nbytes = 4.0 * ((elems_in + elems_out) * batch + weights)
    occupancy = (elems_out * batch) / (elems_out * batch + gpu.occupancy_half)
    eff = _EFF[kind] * (_DW_K.get(key[1], 1.0) if kind == "dw" else 1.0)
    compute = flops / (gpu.peak_flops * eff * max(occupancy, 1e-3))
    t = gpu.latency_s + max(compute, nbytes / gpu.bandwidth)
    return max(gpu.launch_s, t * _jitter(gpu, (kind, batch) + key))


def _conv_bn_act(gpu: GpuModel, b: int, cin: int, cout: int, k: int, s_in: int, s_out: int,
                 groups: int = 1, bn: bool = True, act: bool = True) -> float:
    kind = "dw" if groups > 1 else "conv"
    t = _kernel(gpu, b, kind, cout * (cin // groups) * k * k * s_out**2, cin * s_in**2,
                cout * s_out**2, cout * (cin // groups) * k * k, (k, cin, cout, s_in))
    e = cout * s_out**2
    for op in (("bn",) if bn else ()) + (("act",) if act else ()):
        t += _kernel(gpu, b, "ew", 0, e, e, 0, (op, cout, s_out))
    return t


@functools.lru_cache(maxsize=65536)
def _block_s(gpu: GpuModel, batch: int, cin: int, cout: int, k: int, e: int, stride: int, size: int,
             use_se: bool, residual: bool, expand: bool = True) -> float:
    mid = expand_channels(cin, e) if expand else cin
    out = (size + 2 * (k // 2) - k) // stride + 1
    t = _conv_bn_act(gpu, batch, cin, mid, 1, size, size) if expand else 0.0
    t += _conv_bn_act(gpu, batch, mid, mid, k, size, out, groups=mid)
    if use_se:
        s = se_channels(mid)
        t += _kernel(gpu, batch, "ew", 0, mid * out**2, mid, 0, ("pool", mid, out))
        t += _kernel(gpu, batch, "se", mid * s, mid, s, mid * s, (1, mid, s, 1))
        t += _kernel(gpu, batch, "ew", 0, s, s, 0, ("relu", s, 1))
        t += _kernel(gpu, batch, "se", mid * s, s, mid, mid * s, (1, s, mid, 1))
        t += _kernel(gpu, batch, "ew", 0, mid, mid, 0, ("hsig", mid, 1))
        t += _kernel(gpu, batch, "ew", 0, 2 * mid * out**2, mid * out**2, 0, ("mul", mid, out))
    t += _conv_bn_act(gpu, batch, mid, cout, 1, out, out, act=False)
    if residual:
        t += _kernel(gpu, batch, "ew", 0, 2 * cout * out**2, cout * out**2, 0, ("add", cout, out))
    return t


@functools.lru_cache(maxsize=4096)
def _fixed_s(gpu: GpuModel, batch: int, width_mult: float, n_classes: int, r: int) -> float:
    plan = mbv3_plan(width_mult)
    _, stem, head = slot_sizes(r)
    t = _conv_bn_act(gpu, batch, 3, plan.stem, 3, r, stem)
    t += _block_s(gpu, batch, plan.stem, plan.first_block, 3, 1, 1, stem, False,
                  plan.stem == plan.first_block, expand=False)
    fe, fm = plan.final_expand, plan.feature_mix
    t += _conv_bn_act(gpu, batch, plan.stages[-1].width, fe, 1, head, head)
    t += _kernel(gpu, batch, "ew", 0, fe * head**2, fe, 0, ("pool", fe, head))
    t += _conv_bn_act(gpu, batch, fe, fm, 1, 1, 1, bn=False)
    t += _kernel(gpu, batch, "fc", fm * n_classes, fm, n_classes, fm * n_classes, (1, fm, n_classes, 1))
    return t


def simulate_latency(archs, gpu: str = "gpu-a", batch: int = 1, *, width_mult: float = 1.0,
                     n_classes: int = 1000, noise: float = 0.015, rng: int | np.random.Generator = 0
                     ) -> np.ndarray:
    """Synthetic latencies in ms of `archs` (list of Arch or [n, 46] matrix) on a simulated GPU,
    with multiplicative log-normal measurement noise of sigma `noise`."""
    if gpu not in GPUS:
        raise InputError(f"unknown simulated GPU {gpu!r}; use one of {', '.join(GPUS)}")
    model = GPUS[gpu]
    m = as_matrix(archs)
    specs = slot_specs(width_mult)

    def block(r: int, slot: int, k: int, e: int) -> np.ndarray:
        s = specs[slot]
        return np.array([_block_s(model, batch, s.in_channels, s.out_channels, k, e, s.stride,
                                  slot_sizes(r)[0][slot], s.use_se, s.index > 0)])

    def fixed(r: int) -> np.ndarray:
        return np.array([_fixed_s(model, batch, width_mult, n_classes, r)])

    ms = SlotGather(block, fixed, 1).total(m)[:, 0] * 1e3
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return ms * np.exp(gen.normal(0.0, noise, len(ms))) if noise > 0 else ms
