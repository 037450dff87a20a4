"""Optional runtimes: find them without importing them, import them with a helpful error.

Importing `hwnas.devices` must stay cheap and must never pull in openvino, executorch, tensorrt
or LiteRT (each takes seconds and some print to stderr). Availability is therefore answered with
`importlib.util.find_spec` on the top-level package, which locates it without running it; the real
import happens inside `compile`/`load`, and an import failure there becomes a `DeviceError`.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from hwnas.errors import DeviceError
from hwnas.extras import dist_version, install_hint

__all__ = ["missing_module", "require", "dist_version"]


def missing_module(module: str, extra: str | None = None, pip_name: str | None = None) -> str | None:
    """None when the top-level `module` can be found, else "<module> not installed: <how>"."""
    top = module.split(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[top] is None (blocked import)
        found = False
    if found:
        return None
    return f"{top} not installed: {install_hint(extra, pip_name or top)}"


def require(module: str, device: str, extra: str | None = None, pip_name: str | None = None
            ) -> ModuleType:
    """Import `module` or raise DeviceError naming the device and how to install the runtime."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        raise DeviceError(f"device '{device}' needs {top}, which cannot be imported here "
                          f"({str(err).splitlines()[0] if str(err) else type(err).__name__})",
                          hint=install_hint(extra, pip_name or top)) from None

