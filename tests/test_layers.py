"""hwnas's layers (docs/architecture.md, "Layers"): a package imports only packages of lower layers,
so there are no cycles between packages, and no private name (`_x`) is imported across packages.
Read from the source with `ast` (imports inside functions count too): nothing is imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

import hwnas

ROOT = Path(hwnas.__file__).resolve().parent

#: bottom first; a package may import those of lower layers (and itself)
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer) for layer in (
    {"errors", "__version__"},
    {"extras", "progress", "lazy", "distributed", "channels", "fileio", "settings", "crossval"},
    {"families"},
    {"space", "devices"},
    {"supernet"},
    {"run"},
    {"profiling"},
    {"latency"},
    {"accuracy"},
    {"baselines"},
    {"search"},
    {"export"},
    {"quickstart", "dashboard"},
    {"cli"},
))
TOP = {"__init__", "__main__"}  # the package's own entry points may import anything


def _imports() -> dict[str, list[tuple[str, str, str]]]:
    """{package: [(file, imported module, imported name)]} for every hwnas import of another package."""
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        package = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hwnas":
                if node.module == "hwnas":
                    found = [(f"hwnas.{a.name}", "") for a in node.names]
                else:
                    found = [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                found = [(a.name, "") for a in node.names if a.name.startswith("hwnas.")]
            else:
                continue
            for module, name in found:
                if module.split(".")[1] != package:
                    out[package].append((str(rel), module, name))
    return out


IMPORTS = _imports()


def _layer(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    pytest.fail(f"hwnas/{package} is in no layer: add it to LAYERS here and to docs/architecture.md")


@pytest.mark.parametrize("package", sorted(IMPORTS))
def test_a_package_imports_only_lower_layers(package):
    if package in TOP:
        return
    up = [f"{file} imports {module}" for file, module, _ in IMPORTS[package]
          if _layer(module.split(".")[1]) >= _layer(package)]
    assert not up, f"hwnas/{package} (layer {_layer(package)}) imports a package of its own or a higher layer: {up}"


def test_no_private_name_crosses_packages():
    private = [f"{file}: from {module} import {name}" for imports in IMPORTS.values()
               for file, module, name in imports
               if (name.startswith("_") and not name.startswith("__"))
               or any(part.startswith("_") and not part.startswith("__") for part in module.split("."))]
    assert not private, private
