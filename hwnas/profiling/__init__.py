"""Measuring on devices in one place: what profiling, search verification and export share.

- `protocol`: `ProtocolSettings`, the drift-corrected protocol's settings;
- `store`: the run's measurement store (`MeasurementStore`, `read_measurements`, `stats_row`);
- `anchors`: the reference subnet, the run's anchor per device and the host's `AnchorBook`;
- `session`: `open_session(run, device)` -> a `DeviceSession` (or `RemoteSession` for a remote
  agent's device) that compiles the reference once and measures anything beside it
  (`DeviceSession.measure`, the one call), with INT8 calibration on the run's training images;
- `stage`: the `hwnas profile` stage (`profile`, `select_subnets`, `measure_subnets`).

Names are imported on first use, so importing one module stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "ProtocolSettings": "hwnas.profiling.protocol",
    "MEASUREMENTS": "hwnas.profiling.store", "MeasurementStore": "hwnas.profiling.store",
    "read_measurements": "hwnas.profiling.store", "stats_row": "hwnas.profiling.store",
    "AnchorBook": "hwnas.profiling.anchors", "anchor_key": "hwnas.profiling.anchors",
    "reference_arch": "hwnas.profiling.anchors", "reference_key": "hwnas.profiling.anchors",
    "run_anchor": "hwnas.profiling.anchors", "build_timing_subnet": "hwnas.profiling.anchors",
    "DeviceSession": "hwnas.profiling.session", "RemoteSession": "hwnas.profiling.session",
    "open_session": "hwnas.profiling.session", "CalibrationImages": "hwnas.profiling.session",
    "profile": "hwnas.profiling.stage", "select_subnets": "hwnas.profiling.stage",
    "measure_subnets": "hwnas.profiling.stage", "block_key": "hwnas.profiling.stage",
}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'hwnas.profiling' has no attribute {name!r}")
