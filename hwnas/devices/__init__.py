"""Devices: where subnets are compiled and timed.

A `Device` names a backend plus the options that change latency (threads, batch, precision,
provider). Its `Backend` compiles an `nn.Module` to an `Artifact` (ONNX, OpenVINO IR, .pte,
.tflite, TensorRT engine) and loads it into a `Runner`; `measure` / `measure_many` time runners
with one protocol for all backends (see `hwnas.devices.protocol`).

    from hwnas.devices import get_backend, measure
    backend = get_backend("cpu-ort")
    runner = backend.load(backend.compile(model, torch.randn(1, 3, 224, 224), "work/m1"))
    stats = measure(runner)

Importing this package never imports an optional runtime (openvino, executorch, tensorrt,
LiteRT); a device whose runtime is missing says so in `available()`.
"""

from __future__ import annotations

from hwnas.devices.base import Artifact, Backend, Runner
from hwnas.devices.device import Device
from hwnas.devices.onnx_export import export_onnx
from hwnas.devices.protocol import measure, measure_many
from hwnas.devices.registry import (
    backend_class,
    backend_names,
    builtin_devices,
    get_backend,
    get_device,
    list_devices,
    load_devices,
    register_backend,
    register_remote_backend,
)
from hwnas.devices.stats import LatencyStats

__all__ = [
    "Artifact",
    "Backend",
    "Device",
    "LatencyStats",
    "Runner",
    "backend_class",
    "backend_names",
    "builtin_devices",
    "export_onnx",
    "get_backend",
    "get_device",
    "list_devices",
    "load_devices",
    "measure",
    "measure_many",
    "register_backend",
    "register_remote_backend",
]
