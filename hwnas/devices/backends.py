"""Backend classes by name: what a device's ``backend`` may say, and the backend that runs it.

Kept apart from the device registry (`hwnas.devices.registry`) so that a `Device` can check its
backend without importing the registry, and without importing any runtime: backends are named
"module:Class" and imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from hwnas.errors import DeviceError

__all__ = ["backend_names", "backend_class", "register_backend", "register_remote_backend", "make_backend"]

# Backend classes by name, as "module:Class" so that importing the registry stays cheap. The
# backend modules themselves never import their runtime at module level.
_BACKENDS: dict[str, str] = {
    "torch": "hwnas.devices.torch_backend:TorchBackend",
    "onnxruntime": "hwnas.devices.onnxruntime_backend:OnnxRuntimeBackend",
    "openvino": "hwnas.devices.openvino_backend:OpenVinoBackend",
    "executorch": "hwnas.devices.executorch_backend:ExecuTorchBackend",
    "litert": "hwnas.devices.litert_backend:LiteRtBackend",
    "tensorrt": "hwnas.devices.tensorrt_backend:TensorRtBackend",
}

# Extension point for the remote agent client: a factory (or "module:attr") that returns a Backend
# which sends ONNX bytes + a token to the agent on `device.host`. With None, remote devices report
# themselves unavailable (Backend.available) instead of pretending to work.
_REMOTE_FACTORY: Callable[[Any], Any] | str | None = "hwnas.devices.agent.client:RemoteBackend"


def backend_names() -> list[str]:
    return list(_BACKENDS)


def backend_class(name: str) -> type:
    """The `hwnas.devices.base.Backend` subclass named `name`."""
    try:
        spec = _BACKENDS[name]
    except KeyError:
        raise DeviceError(f"unknown backend '{name}'; known: {', '.join(_BACKENDS)}") from None
    if isinstance(spec, str):
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)
    return spec


def register_backend(name: str, cls: type | str) -> None:
    """Add a backend (a class or "module:Class"); devices may then name it."""
    _BACKENDS[name] = cls  # type: ignore[assignment]


def register_remote_backend(factory: Callable[[Any], Any] | None) -> None:
    """Plug in the remote agent client (see `_REMOTE_FACTORY`)."""
    global _REMOTE_FACTORY
    _REMOTE_FACTORY = factory


def make_backend(device: Any) -> Any:
    """The backend (a `hwnas.devices.base.Backend`) that runs `device` (a `Device`): remote when it names a host."""
    if device.host is not None and _REMOTE_FACTORY is not None:
        factory = _REMOTE_FACTORY
        if isinstance(factory, str):
            module, _, attr = factory.partition(":")
            factory = getattr(importlib.import_module(module), attr)
        return factory(device)
    return backend_class(device.backend)(device)
