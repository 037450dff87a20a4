"""The family's torch-free names in one namespace (arch, plan, space, tables): what `hwnas.space`
re-exports under the names hwnas has always had (the documented `hwnas.space.Arch`)."""

from hwnas.families.ofa_mbv3 import arch, plan, space, tables
from hwnas.families.ofa_mbv3.arch import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.plan import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.space import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.tables import *  # noqa: F401,F403
from hwnas.families.tables import read_table_frame as read_table_frame

__all__ = [*arch.__all__, *plan.__all__, *space.__all__, *tables.__all__, "read_table_frame"]
