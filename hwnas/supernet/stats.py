"""Moved to `hwnas.families.ofa_mbv3.costs` (OFA-MobileNetV3's exact params and MACs, counted
without building a network); kept for existing imports. `count_params_macs` here counts one arch
(the family module's name for that is `arch_params_macs`)."""

from hwnas.families.ofa_mbv3.costs import arch_params_macs as count_params_macs
from hwnas.families.ofa_mbv3.costs import count_macs as count_macs
from hwnas.families.ofa_mbv3.costs import count_params as count_params
from hwnas.families.ofa_mbv3.costs import stats_frame as stats_frame

__all__ = ["count_params", "count_macs", "count_params_macs", "stats_frame"]
