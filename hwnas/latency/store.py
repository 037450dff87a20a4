"""Moved to `hwnas.profiling.store` (issue 16 part 5); this name keeps old imports working."""

from hwnas.profiling.store import (KINDS, MEASUREMENTS, MeasurementStore, arch_values,  # noqa: F401
                                   read_measurements, stats_row)

__all__ = ["MEASUREMENTS", "MeasurementStore", "read_measurements", "stats_row"]
