"""The elastic OFA-MobileNetV3 supernet, static subnet extraction and exact cost counting.

Names load lazily: the cost counters need no torch, and `hwnas search` should not pay for it.
"""

from __future__ import annotations

import importlib
from typing import Any

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

_HOME = {
    "OFAMobileNetV3": "hwnas.supernet.ofa_mbv3",
    "MobileNetV3Subnet": "hwnas.supernet.ofa_mbv3",
    "mbv3_plan": "hwnas.families.ofa_mbv3.plan",
    "make_divisible": "hwnas.channels",
    "count_params": "hwnas.supernet.stats",
    "count_macs": "hwnas.supernet.stats",
    "count_params_macs": "hwnas.supernet.stats",
    "stats_frame": "hwnas.supernet.stats",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'hwnas.supernet' has no attribute {name!r}")
