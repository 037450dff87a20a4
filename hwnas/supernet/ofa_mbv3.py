"""Moved to the default family's `network` module (and its layout to `plan`; families are the bottom
layer); kept for existing imports."""

from hwnas.families.mbconv import BlockSpec as BlockSpec
from hwnas.families.ofa_mbv3.network import *  # noqa: F401,F403
from hwnas.families.ofa_mbv3.plan import *  # noqa: F401,F403

__all__ = ["StageSpec", "MBV3Plan", "BlockSpec", "mbv3_plan", "iter_blocks", "MobileNetV3Subnet", "OFAMobileNetV3"]
