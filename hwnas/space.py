"""The default family's `Arch` and space under the names hwnas has always exported them by (the
documented `hwnas.space.Arch`); they are defined with the rest of that family in `hwnas.families`
(its `arch`, `space`, `tables` and `plan` modules, gathered by its `space_names`)."""

from hwnas.families.ofa_mbv3.space_names import *  # noqa: F401,F403
__all__ = sorted(name for name in dir() if not name.startswith("_"))  # the star import's names
