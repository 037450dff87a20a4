"""The families by name: hwnas's own (`_REGISTRY`, "module:Class", imported on first use) and those
registered at run time (`register_family`). Imports no family and not the family base: `Family`
and `GeneArch` look families up here, by name."""

from __future__ import annotations

import functools
import importlib
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from hwnas.errors import InputError

__all__ = ["DEFAULT_FAMILY", "family_names", "get_family", "register_family", "unregister_family",
           "registered_family"]

DEFAULT_FAMILY = "ofa-mbv3"

# name -> "module:Class"
_REGISTRY: dict[str, str] = {
    "ofa-mbv3": "hwnas.families.ofa_mbv3:OFAMobileNetV3Family",
    "ofa-proxyless": "hwnas.families.ofa_proxyless:OFAProxylessFamily",
    "ofa-resnet50": "hwnas.families.ofa_resnet50:OFAResNet50Family",
}
# name -> class, for families registered at run time (never one of `_REGISTRY`'s names)
_REGISTERED: dict[str, type] = {}
_LOCK = threading.Lock()


def family_names() -> tuple[str, ...]:
    return (*_REGISTRY, *_REGISTERED)


def get_family(name: str) -> Any:
    """The family registered as `name` (one clear line for an unknown name)."""
    cls = _REGISTERED.get(name)
    if cls is None:
        if name not in _REGISTRY:
            raise InputError(f"unknown family {name!r}; hwnas knows {', '.join(family_names())}")
        cls = _own_class(name)
    return _singleton(cls)


@functools.lru_cache(maxsize=None)
def _own_class(name: str) -> type:
    """One of hwnas's own families' classes, imported once (get_family sits on hot paths)."""
    module, cls_name = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls_name)


@functools.lru_cache(maxsize=None)
def _singleton(cls: type) -> Any:
    """One instance per class, kept across unregistering and registering it again: families are
    stateless, and caches across hwnas key on the instance."""
    return cls()


def register_family(cls: type) -> Any:
    """Make the `Family` subclass `cls` known under its `name` in this process (every stage finds
    it through `get_family`, as a run's or a checkpoint's ``family`` names it). A name already taken
    is one InputError (so a `registered_family` block never unregisters another's family)."""
    if not (isinstance(cls, type) and callable(getattr(cls, "gene_groups", None))
            and isinstance(getattr(cls, "name", None), str)):
        raise InputError(f"register_family takes a Family subclass with a name, got {cls!r}")
    if cls.name in _REGISTRY:
        raise InputError(f"family {cls.name!r} is one of hwnas's own; register yours under another name")
    with _LOCK:
        if cls.name in _REGISTERED:
            raise InputError(f"family {cls.name!r} is already registered; unregister it first")
        _REGISTERED[cls.name] = cls
    return _singleton(cls)


def unregister_family(name: str) -> None:
    """Forget a family `register_family` added (hwnas's own families stay)."""
    if name in _REGISTRY:
        raise InputError(f"family {name!r} is one of hwnas's own; only registered families can be removed")
    with _LOCK:
        if _REGISTERED.pop(name, None) is None:
            raise InputError(f"family {name!r} is not registered")


@contextmanager
def registered_family(cls: type) -> Iterator[Any]:
    """`register_family(cls)` for the ``with`` block, unregistered after it (a test's family)."""
    family = register_family(cls)
    try:
        yield family
    finally:
        unregister_family(cls.name)
