"""OFA-MobileNetV3's `Arch` and `SearchSpace` under the names hwnas has always exported them by;
they are defined with the rest of that family in `hwnas.families.ofa_mbv3` (`arch`, `space`,
`tables`, `plan`)."""

from hwnas.families.ofa_mbv3.arch import FLAT_COLUMNS as FLAT_COLUMNS
from hwnas.families.ofa_mbv3.arch import PAD_E as PAD_E
from hwnas.families.ofa_mbv3.arch import PAD_KS as PAD_KS
from hwnas.families.ofa_mbv3.arch import Arch as Arch
from hwnas.families.ofa_mbv3.plan import MAX_DEPTH as MAX_DEPTH
from hwnas.families.ofa_mbv3.plan import N_SLOTS as N_SLOTS
from hwnas.families.ofa_mbv3.plan import N_STAGES as N_STAGES
from hwnas.families.ofa_mbv3.space import MAX_E as MAX_E
from hwnas.families.ofa_mbv3.space import MAX_KS as MAX_KS
from hwnas.families.ofa_mbv3.space import MAX_R as MAX_R
from hwnas.families.ofa_mbv3.space import SearchSpace as SearchSpace
from hwnas.families.ofa_mbv3.space import check_matrix as check_matrix
from hwnas.families.ofa_mbv3.tables import archs_from_frame as archs_from_frame
from hwnas.families.ofa_mbv3.tables import archs_to_frame as archs_to_frame
from hwnas.families.ofa_mbv3.tables import read_arch_table as read_arch_table
from hwnas.families.ofa_mbv3.tables import write_arch_table as write_arch_table
from hwnas.families.tables import read_table_frame as read_table_frame

__all__ = [
    "N_STAGES",
    "MAX_DEPTH",
    "N_SLOTS",
    "FLAT_COLUMNS",
    "Arch",
    "SearchSpace",
    "archs_to_frame",
    "archs_from_frame",
    "check_matrix",
    "read_arch_table",
    "read_table_frame",
    "write_arch_table",
]
