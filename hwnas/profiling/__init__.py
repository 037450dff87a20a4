"""Measuring on devices in one place: what profiling, search verification and export share.

- `protocol`: `ProtocolSettings`, the drift-corrected protocol's settings;
- `store`: the run's measurement store (`MeasurementStore`, `read_measurements`, `stats_row`);
- `anchors`: the reference subnet, the run's anchor per device and the host's `AnchorBook`;
- `session`: `open_session(run, device)` -> a `DeviceSession` (or `RemoteSession` for a remote
  agent's device) that compiles the reference once and measures anything beside it
  (`DeviceSession.measure`, the one call), with INT8 calibration on the run's training images;
- `stage`: the `hwnas profile` stage (`profile`, `select_subnets`, `measure_subnets`; `measure_paired`:
  a subnet against a reference model, timed together).

Names are imported on first use, so importing one module stays cheap.
"""

from __future__ import annotations

from hwnas.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "hwnas.profiling.protocol": ("ProtocolSettings",),
    "hwnas.profiling.store": ("MEASUREMENTS", "MeasurementStore", "read_measurements", "stats_row"),
    "hwnas.profiling.anchors": ("AnchorBook", "anchor_key", "reference_arch", "reference_key", "run_anchor", "build_timing_subnet"),
    "hwnas.profiling.session": ("DeviceSession", "RemoteSession", "open_session", "CalibrationImages"),
    "hwnas.profiling.stage": ("profile", "select_subnets", "measure_subnets", "measure_paired", "block_key"),
})
