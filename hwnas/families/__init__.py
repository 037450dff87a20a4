"""Search-space families: one `Family` per folder, registered here by name.

Adding a family = a folder ``hwnas/families/<name>/`` whose ``__init__.py`` defines a `Family`
subclass, plus one line in `_REGISTRY` (`hwnas.families.registry`). Families are imported lazily (only the one asked for).
A family defined elsewhere (a test's, a plug-in's) joins with `register_family` for this process.
"""

from __future__ import annotations

from hwnas.families.base import ElasticSupernet, Family
from hwnas.families.genes import GeneArch, GeneGroup, ShrinkPhase
from hwnas.families.registry import (DEFAULT_FAMILY, family_names, get_family, register_family, registered_family,
                                     unregister_family)
from hwnas.families.spec import NetworkSpec

__all__ = ["Family", "ElasticSupernet", "GeneArch", "GeneGroup", "NetworkSpec", "ShrinkPhase", "DEFAULT_FAMILY",
           "family_names", "get_family", "register_family", "unregister_family", "registered_family"]
