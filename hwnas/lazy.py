"""Packages whose names load on first use (PEP 562), so importing one module of them stays cheap
(the CLI's startup, `hwnas search` without torch)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, Sequence

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, Sequence[str]]
                 ) -> tuple[list[str], Callable[[str], Any]]:
    """(``__all__``, ``__getattr__``) of `package` from {module: names it defines}."""
    where = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return list(where), __getattr__
