"""The default family's `Arch` and space under the names hwnas has always exported them by (the
documented `hwnas.space.Arch`); they are defined with the rest of that family in `hwnas.families`
(its `arch`, `space`, `tables` and `plan` modules)."""

from hwnas.families.ofa_mbv3.arch import *  # noqa: F401,F403 (the documented names, as `__all__` lists)
from hwnas.families.ofa_mbv3.plan import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.space import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.tables import *  # noqa: F401,F403
from hwnas.families.tables import read_table_frame as read_table_frame

__all__ = [
    "N_STAGES", "MAX_DEPTH", "N_SLOTS", "FLAT_COLUMNS", "Arch", "SearchSpace",
    "archs_to_frame",
    "archs_from_frame",
    "check_matrix",
    "read_arch_table",
    "read_table_frame",
    "write_arch_table",
]
