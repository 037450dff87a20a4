"""`ExportSettings`: how `hwnas export` checks a bundle, defined once (type, default, bounds, help);
`export_subnet` / `export_pareto` validate their keywords through it and the CLI builds its options
from its fields."""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Strict

from hwnas.settings import Settings, setting

__all__ = ["ExportSettings", "MAX_INT8_DROP"]

MAX_INT8_DROP = 1.0  # points of test top-1 an INT8 (or bf16) bundle may lose against its fp32 subnet
Count = Annotated[int, Strict()]


class ExportSettings(Settings):
    calib_batches: Optional[Count] = setting(None, ge=1, help=(
        "Training batches for BN recalibration (default: the accuracy table's 2,000 images)."))
    verify_images: Count = setting(64, ge=1, help="Test images the exported model is checked on.")
    measure: bool = setting(True, help="Measure the latency on the device.")
    max_int8_drop: float = setting(MAX_INT8_DROP, ge=0.0, what="at least 0 top-1 points", help=(
        "INT8 and bf16 devices: the most test top-1 points the reduced-precision model may lose against the "
        "fp32 subnet before the bundle is marked failed."))
