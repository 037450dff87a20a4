"""The elastic OFA-MobileNetV3 supernet, static subnet extraction and exact cost counting."""

from __future__ import annotations

from hwnas.supernet.layers import make_divisible
from hwnas.supernet.ofa_mbv3 import MobileNetV3Subnet, OFAMobileNetV3, mbv3_plan
from hwnas.supernet.stats import count_macs, count_params, count_params_macs, stats_frame

__all__ = [
    "OFAMobileNetV3",
    "MobileNetV3Subnet",
    "mbv3_plan",
    "make_divisible",
    "count_params",
    "count_macs",
    "count_params_macs",
    "stats_frame",
]
