"""Moved to `hwnas.families.ofa_mbv3.network` (and its layout to `.plan`; families are the bottom
layer); kept for existing imports."""

from hwnas.families.mbconv import BlockSpec as BlockSpec
from hwnas.families.ofa_mbv3.network import MobileNetV3Subnet as MobileNetV3Subnet
from hwnas.families.ofa_mbv3.network import OFAMobileNetV3 as OFAMobileNetV3
from hwnas.families.ofa_mbv3.plan import MBV3Plan as MBV3Plan
from hwnas.families.ofa_mbv3.plan import StageSpec as StageSpec
from hwnas.families.ofa_mbv3.plan import iter_blocks as iter_blocks
from hwnas.families.ofa_mbv3.plan import mbv3_plan as mbv3_plan

__all__ = ["StageSpec", "MBV3Plan", "BlockSpec", "mbv3_plan", "iter_blocks", "MobileNetV3Subnet",
           "OFAMobileNetV3"]
