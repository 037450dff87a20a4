"""Which pip extra brings which third-party module.

pyproject.toml keeps the core small (the `hwnas` command, devices, runs, the agent's wire format)
and puts the rest in extras, so hwnas installs beside a user's own torch and an agent on a device
stays slim. A command whose extra is missing then says which one in one line
(`missing_extra`) instead of failing with an ImportError. tests/test_packaging.py checks `MODULES`
against pyproject.toml and against every import in hwnas.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

__all__ = ["MODULES", "install_hint", "missing_extra", "need", "dist_version"]

#: top-level module -> (the distribution that installs it, the extra that declares it; None: core)
MODULES: dict[str, tuple[str, str | None]] = {
    "numpy": ("numpy", None),
    "pydantic": ("pydantic", None),
    "pydantic_core": ("pydantic-core", None),
    "yaml": ("pyyaml", None),
    "typer": ("typer", None),
    "rich": ("rich", None),
    "pandas": ("pandas", "search"),
    "pyarrow": ("pyarrow", "search"),  # pandas loads it for Parquet
    "scipy": ("scipy", "search"),
    "moocore": ("moocore", "search"),
    "optuna": ("optuna", "search"),
    "sqlalchemy": ("sqlalchemy", "search"),
    "matplotlib": ("matplotlib", "search"),
    "threadpoolctl": ("threadpoolctl", "search"),
    "torch": ("torch", "train"),
    "torchvision": ("torchvision", "train"),
    "safetensors": ("safetensors", "train"),
    "PIL": ("pillow", "train"),
    "timm": ("timm", "timm"),
    "streamlit": ("streamlit", "dashboard"),
    "altair": ("altair", "dashboard"),
    "onnx": ("onnx", "onnx"),
    "google": ("protobuf", "onnx"),  # google.protobuf
    "onnxruntime": ("onnxruntime", "ort"),  # or onnxruntime-gpu ('ort-gpu'): the same module
    "openvino": ("openvino", "openvino"),
    "nncf": ("nncf", "nncf"),
    "executorch": ("executorch", "executorch"),
    "torchao": ("torchao", "executorch"),
    "litert_torch": ("litert-torch", "litert"),
    "ai_edge_litert": ("ai-edge-litert", "litert"),
    "tensorrt": ("tensorrt", "tensorrt"),
    "modelopt": ("nvidia-modelopt", "tensorrt-int8"),
    "psycopg": ("psycopg", "postgres"),  # SQLAlchemy loads it for postgresql:// storages
    "playwright": ("playwright", "dev"),
}


def install_hint(extra: str | None, pip_name: str | None = None) -> str:
    return f"pip install 'hwnas[{extra}]'" if extra else f"pip install {pip_name}"


def missing_extra(err: ImportError) -> str | None:
    """The extra that installs the module `err` failed to find; None when the module is not one
    an extra brings (a broken install, or a bug)."""
    if not isinstance(err, ModuleNotFoundError) or not err.name:
        return None
    return MODULES.get(err.name.split(".")[0], ("", None))[1]


def need(module: str) -> None:
    """ModuleNotFoundError (which the CLI turns into the extra's name) when `module` cannot be
    found; nothing is imported: for modules only a child process imports."""
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def dist_version(dist: str) -> str | None:
    """Installed version of a distribution, read from its metadata (no import)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
