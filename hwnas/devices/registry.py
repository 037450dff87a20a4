"""Backends and devices by name: the built-in devices, user devices from YAML, lookups.

A devices YAML adds devices (under ``devices:``, a list or a mapping ``name: {backend: ...}``);
built-in names cannot be redefined, and every entry is validated when the file is read: any
problem is one `DeviceError` line naming the file and the device. A device's variant in another
precision is the device named ``<name>-<precision>`` with that precision (`precision_variant`).

The file's format, with examples: docs/devices.md, 'Devices: adding your own'.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.devices.backends import (backend_class, backend_names, make_backend, register_backend,
                                    register_remote_backend)
from hwnas.errors import DeviceError

if TYPE_CHECKING:
    from hwnas.devices.base import Backend
    from hwnas.devices.device import Device

__all__ = [
    "backend_names",
    "backend_class",
    "register_backend",
    "register_remote_backend",
    "make_backend",
    "builtin_devices",
    "load_devices",
    "get_device",
    "get_backend",
    "list_devices",
    "precision_variant",
]

_BUILTIN: list[dict[str, Any]] = [
    dict(name="cpu-torch", backend="torch", provider="cpu",
         description="PyTorch eager on the CPU (torch.set_num_threads, verified)"),
    dict(name="cpu-ort", backend="onnxruntime", provider="CPUExecutionProvider",
         description="ONNX Runtime CPU EP, sequential, inter-op 1"),
    dict(name="cpu-openvino", backend="openvino", provider="CPU",
         description="OpenVINO CPU plugin, f32 inference precision forced"),
    dict(name="mobile-xnnpack", backend="executorch",
         description="ExecuTorch .pte lowered to XNNPACK (the phone CPU path)"),
    dict(name="edge-portable", backend="executorch", provider="portable",
         description="ExecuTorch .pte on portable kernels, no delegate: one planned activation arena "
                     "(the microcontroller-class path; memory as a board would reserve it)"),
    dict(name="mobile-litert", backend="litert",
         description="LiteRT (TFLite) via litert-torch, XNNPACK delegate"),
    dict(name="cuda-torch", backend="torch", provider="cuda",
         description="PyTorch eager on CUDA, CUDA-event timing"),
    dict(name="cuda-ort", backend="onnxruntime", provider="CUDAExecutionProvider",
         description="ONNX Runtime CUDA EP with I/O binding"),
    dict(name="trt", backend="tensorrt", description="TensorRT engine built from ONNX"),
    # INT8 variants: post-training quantization at compile time (hwnas.devices.quantize)
    dict(name="cpu-ort-int8", backend="onnxruntime", provider="CPUExecutionProvider",
         precision="int8", description="ONNX Runtime CPU EP, static QDQ int8 (per-channel weights; option "
                                       "per_channel: false for per-tensor)"),
    dict(name="cpu-openvino-int8", backend="openvino", provider="CPU", precision="int8",
         options={"quantizer": "onnx-qdq"}, description="OpenVINO CPU plugin running a QDQ int8 model (quantizer option: "
                     "onnx-qdq, or nncf when installed)"),
    dict(name="mobile-xnnpack-int8", backend="executorch", precision="int8",
         description="ExecuTorch PT2E int8 (XNNPACK quantizer, per-channel) lowered to XNNPACK"),
    dict(name="trt-int8", backend="tensorrt", precision="int8",
         description="TensorRT engine from an explicit Q/DQ int8 ONNX"),
    # bf16: what OpenVINO runs an fp32 model in by default on a CPU with AVX512-BF16 or AMX (usable
    # only where its CPU plugin lists BF16)
    dict(name="cpu-openvino-bf16", backend="openvino", provider="CPU", precision="bf16",
         description="OpenVINO CPU plugin, bf16 inference precision (its default on AVX512-BF16/AMX CPUs)"),
]


def _make_device(obj: Any, source: str) -> Device:
    """Validate one device entry; pydantic's multi-line report becomes one DeviceError line."""
    from pydantic import ValidationError

    from hwnas.devices.device import Device

    name = obj.get("name", "?") if isinstance(obj, dict) else "?"
    if not isinstance(obj, dict):
        raise DeviceError(f"{source}: each device must be a mapping with name and backend, "
                          f"got {obj!r}")
    try:
        return Device(**obj)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "device"
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = f"unknown field; allowed: {', '.join(Device.model_fields)}"
        elif first["type"] == "string_pattern_mismatch":
            msg = "use letters, digits, '.', '_' and '-' only, starting with a letter or digit"
        raise DeviceError(f"{source}: device '{name}': {where}: {msg}") from None


@lru_cache(maxsize=1)
def _builtin() -> dict[str, Device]:
    return {d["name"]: _make_device(d, "built-in devices") for d in _BUILTIN}


def builtin_devices() -> dict[str, Device]:
    return dict(_builtin())


def load_devices(path: str | Path) -> dict[str, Device]:
    """Read user devices from a YAML file, validating each (DeviceError on any problem)."""
    from hwnas.fileio import parse_yaml

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DeviceError(f"devices file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DeviceError(f"devices file {path} cannot be read: {err}") from None
    data = parse_yaml(text, f"devices file {path}", DeviceError)
    if data is None:
        return {}
    entries = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(data, dict) or entries is None or set(data) != {"devices"}:
        raise DeviceError(f"devices file {path} must hold one key 'devices' with a list of "
                          "devices (each with name and backend)")
    if isinstance(entries, dict):
        entries = [{"name": k, **(v or {})} if isinstance(v, (dict, type(None))) else v
                   for k, v in entries.items()]
    if not isinstance(entries, list):
        raise DeviceError(f"devices file {path}: 'devices' must be a list of devices")
    out: dict[str, Device] = {}
    builtin = _builtin()
    for entry in entries:
        device = _make_device(entry, f"devices file {path}")
        if device.name in builtin:
            raise DeviceError(f"devices file {path}: '{device.name}' is a built-in device; "
                              "give yours another name")
        if device.name in out:
            raise DeviceError(f"devices file {path}: device '{device.name}' is defined twice")
        out[device.name] = device
    return out


def _all_devices(devices_file: str | Path | None) -> dict[str, Device]:
    devices = builtin_devices()
    if devices_file is not None:
        devices.update(load_devices(devices_file))
    return devices


def get_device(name: str | Device, devices_file: str | Path | None = None) -> Device:
    """A device by name: built-in, or from `devices_file`. Device objects pass through."""
    from hwnas.devices.device import Device

    if isinstance(name, Device):
        return name
    devices = _all_devices(devices_file)
    try:
        return devices[name]
    except KeyError:
        raise DeviceError(f"unknown device '{name}'; known: {', '.join(devices)}; "
                          "add one in a devices YAML (--devices FILE)") from None


def precision_variant(name: str, precision: str, devices_file: str | Path | None = None) -> str:
    """The device that runs `name`'s subnets in `precision`: `name` itself when that is its
    precision, else its variant ``<name>-<precision>`` (a device of that precision). DeviceError
    (one line naming the devices that have one) when there is none."""
    devices = _all_devices(devices_file)
    if get_device(name, devices_file).precision == precision:
        return name
    variant = devices.get(f"{name}-{precision}")
    if variant is not None and variant.precision == precision:
        return variant.name
    having = [d for d in devices if devices[d].precision != precision
              and getattr(devices.get(f"{d}-{precision}"), "precision", None) == precision]
    raise DeviceError(f"device '{name}' has no {precision} variant (no {precision} device named "
                      f"'{name}-{precision}'); devices with one: {', '.join(having) or 'none'} (or add "
                      f"'{name}-{precision}' with precision: {precision} to a devices YAML)")


def get_backend(name: str | Device, devices_file: str | Path | None = None) -> Backend:
    """The backend for a device name (or Device)."""
    return make_backend(get_device(name, devices_file))


def list_devices(devices_file: str | Path | None = None, check_remote: bool = False) -> list[dict[str, Any]]:
    """One row per device for `hwnas devices list`: name, backend, options, source, and
    `available` (None when usable here, else the reason). Never imports optional runtimes, and
    contacts a remote device's agent (sending its token) only with `check_remote`: a devices file
    can come from anyone, and listing it must not send anything anywhere."""
    user = load_devices(devices_file) if devices_file is not None else {}
    rows = []
    for source, devices in (("built-in", _builtin()), (str(devices_file), user)):
        for device in devices.values():
            if device.is_remote and not check_remote:
                where = f"{device.host}:{device.port}" if device.port else str(device.host)
                available = f"not checked: served by the agent at {where} (--check asks it)"
            else:
                available = make_backend(device).available()
            rows.append({"name": device.name, "backend": device.backend,
                         "options": device.summary(), "description": device.description,
                         "source": source, "available": available})
    return rows
