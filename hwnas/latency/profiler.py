"""Moved to `hwnas.profiling` (issue 16 part 5): the stage is `hwnas.profiling.stage`, the
measuring session `hwnas.profiling.session`. This name keeps old imports working."""

from hwnas.profiling.anchors import build_timing_subnet, reference_arch, reference_key, run_anchor  # noqa: F401
from hwnas.profiling.stage import (block_key, measure_subnets, profile,  # noqa: F401
                                     select_subnets)
from hwnas.profiling.protocol import ProtocolSettings  # noqa: F401

__all__ = ["ProtocolSettings", "select_subnets", "reference_arch", "build_timing_subnet", "profile",
           "measure_subnets"]
