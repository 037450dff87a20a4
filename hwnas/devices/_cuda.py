"""CUDA helpers shared by the GPU backends: availability and event-based timing.

GPU work is asynchronous, so a host clock around a launch measures the launch, not the kernel.
`CudaEventTimer` synchronises first (nothing queued from before leaks into the sample), records
events on the stream the work runs on, and waits for the end event.
"""

from __future__ import annotations

from typing import Any, Callable

from hwnas.devices._imports import missing_module

__all__ = ["cuda_reason", "CudaEventTimer"]


def cuda_reason() -> str | None:
    """None when torch sees a CUDA device, else why not; without torch (a slim agent serving
    onnxruntime-gpu), the CUDA driver is asked."""
    if missing_module("torch"):
        return _driver_reason()
    import torch

    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return "no CUDA device (this torch build has no CUDA support)"
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


def _driver_reason() -> str | None:
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1")  # installed with the GPU's kernel driver
    except OSError:
        return "no CUDA device (no CUDA driver: libcuda.so.1 cannot be loaded)"
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return "no CUDA device (the CUDA driver finds none)"
    return None


class CudaEventTimer:
    """Times `fn()` on a CUDA stream with a reused pair of events (milliseconds)."""

    def __init__(self, stream: Any = None):
        import torch

        self.torch = torch
        self.stream = stream
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def __call__(self, fn: Callable[[], Any]) -> float:
        stream = self.stream or self.torch.cuda.current_stream()
        self.torch.cuda.synchronize()
        self.start.record(stream)
        fn()
        self.end.record(stream)
        self.end.synchronize()
        return float(self.start.elapsed_time(self.end))
