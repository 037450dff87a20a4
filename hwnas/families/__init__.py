"""Search-space families: one `Family` per folder, registered here by name.

Adding a family = a folder ``hwnas/families/<name>/`` whose ``__init__.py`` defines a `Family`
subclass, plus one line in `_REGISTRY`. Families are imported lazily (only the one asked for).
"""

from __future__ import annotations

import functools
import importlib

from hwnas.errors import InputError
from hwnas.families.base import Family, GeneArch, GeneGroup

__all__ = ["Family", "GeneArch", "GeneGroup", "DEFAULT_FAMILY", "family_names", "get_family"]

DEFAULT_FAMILY = "ofa-mbv3"

# name -> "module:Class"
_REGISTRY: dict[str, str] = {
    "ofa-mbv3": "hwnas.families.ofa_mbv3:OFAMobileNetV3Family",
    "ofa-proxyless": "hwnas.families.ofa_proxyless:OFAProxylessFamily",
    "ofa-resnet50": "hwnas.families.ofa_resnet50:OFAResNet50Family",
}


def family_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


@functools.lru_cache(maxsize=None)
def get_family(name: str) -> Family:
    """The family registered as `name` (one clear line for an unknown name)."""
    if name not in _REGISTRY:
        raise InputError(f"unknown family {name!r}; hwnas knows {', '.join(_REGISTRY)}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()
