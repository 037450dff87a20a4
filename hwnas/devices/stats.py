"""`LatencyStats`: one candidate's timings on one device, and how they were taken.

Raw statistics (median, percentiles...) describe the candidate's own samples. `corrected_ms` is
the drift-corrected latency (see `hwnas.devices.protocol`): the candidate's time relative to a
fixed reference model timed right beside it, times the reference's calibrated latency (the
anchor, `hwnas.profiling.anchors`). Predictors learn `corrected_ms` by default; the raw values are kept next to it.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, Mapping, Sequence

import numpy as np

from hwnas.errors import InputError

__all__ = ["LatencyStats", "summarize"]


@dataclass
class LatencyStats:
    """Latency summary of one artifact on one device (all times in milliseconds)."""

    median_ms: float
    mean_ms: float
    std_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    n: int  # timed runs
    warmup: int  # warm-up runs made before the first timed block (later ones re-warm briefly)
    cv: float  # std / mean: the run-to-run noise of this candidate
    corrected_ms: float  # drift-corrected latency; == median_ms when measured without a reference
    ref_median_ms: float | None = None  # the anchor: reference latency that scales ratio to ms
    ref_ms: list[float] = field(default_factory=list)  # reference timings next to this candidate
    rounds: int = 1
    # relative standard error of corrected_ms, from the spread of its per-round ratios (0 when
    # measured in one round): how far a second session may plausibly land from this one
    rel_se: float = 0.0
    # how the numbers were taken
    device: str = ""
    backend: str = ""
    threads: int = 1
    batch: int = 1
    precision: str = "fp32"
    resolution: int | None = None
    host: str = ""
    timer: str = "perf_counter_ns"
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """Latency relative to the reference model (drift-free; quote this across sessions)."""
        return self.corrected_ms / self.ref_median_ms if self.ref_median_ms else None

    def rescaled(self, anchor_ms: float) -> LatencyStats:
        """The same measurement with `corrected_ms = ratio * anchor_ms` (another anchor's scale);
        without a reference (no ratio) it is returned unchanged."""
        ratio = self.ratio
        if ratio is None:
            return self
        return replace(self, corrected_ms=ratio * anchor_ms, ref_median_ms=float(anchor_ms))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> LatencyStats:
        """Inverse of `to_dict`; unknown keys (from newer versions) are ignored."""
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls)
                    if f.default is MISSING and f.default_factory is MISSING}
        missing = sorted(required - set(obj))
        if missing:
            raise InputError(f"latency stats are missing {', '.join(missing)}")
        kw = {k: v for k, v in obj.items() if k in names}
        kw["ref_ms"] = [float(v) for v in kw.get("ref_ms") or []]
        kw["versions"] = {str(k): str(v) for k, v in (kw.get("versions") or {}).items()}
        return cls(**kw)


def summarize(samples_ms: Sequence[float], *, warmup: int, corrected_ms: float | None = None,
              **how: Any) -> LatencyStats:
    """Statistics of raw samples. Percentiles use linear interpolation, so
    min <= median <= p90 <= p99 always holds."""
    a = np.asarray(samples_ms, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no samples to summarize")
    median = float(np.median(a))
    mean = float(a.mean())
    std = float(a.std(ddof=1)) if a.size > 1 else 0.0
    p90, p99 = (float(v) for v in np.percentile(a, [90, 99]))
    return LatencyStats(
        median_ms=median, mean_ms=mean, std_ms=std, p90_ms=p90, p99_ms=p99, min_ms=float(a.min()),
        n=int(a.size), warmup=int(warmup), cv=std / mean if mean > 0 else math.nan,
        corrected_ms=median if corrected_ms is None else float(corrected_ms), **how)
