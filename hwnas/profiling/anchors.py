"""Anchors: the calibrated latency of the reference model on a device, which turns drift-free
ratios into milliseconds (``corrected_ms = ratio * anchor_ms``).

A calibrated number rather than each session's own reference median, because that median carries
the machine's state of the moment into every number of the session. A run keeps one anchor per
device (a ``kind="reference"`` row in its store), so all its measurements share the scale its
predictor learned; new runs take the host's anchor from the anchor book, keyed by everything that
changes the reference's latency; remote agents are calibrated per run. The reference
(`reference_arch`) is the space's smallest subnet at the middle resolution, fixed random weights.

Scope, the book's location and key, recalibration: docs/devices.md, 'Anchors'.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from hwnas.devices.stats import LatencyStats
from hwnas.errors import ConfigError
from hwnas.fileio import atomic_write_json, file_lock, state_dir

__all__ = ["AnchorBook", "anchor_key", "reference_arch", "reference_key", "run_anchor", "build_timing_subnet"]

_FORMAT = "hwnas-anchors/1"


def anchor_key(how: Mapping[str, Any], reference_id: str, n_classes: int, weights: str | None = None
               ) -> tuple[str, dict[str, Any]]:
    """(key, what it stands for) for a reference runner's `how()` on this host. `weights`: the
    weights the reference was timed with, where they matter (INT8 devices time trained weights:
    `DeviceSession.timing_subnet`); None for fixed random weights (fp32)."""
    what = {k: how.get(k) for k in ("device", "backend", "threads", "batch", "precision", "resolution",
                                    "host", "versions")}
    what.update(reference=reference_id, n_classes=int(n_classes))
    if weights is not None:
        what["weights"] = weights
    blob = json.dumps(what, sort_keys=True).encode()
    return hashlib.sha1(blob).hexdigest()[:16], what


class AnchorBook:
    """The host's anchors: one JSON file, rewritten atomically on every change."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else state_dir() / "anchors.json"
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
            if data.get("format") != _FORMAT or not isinstance(data.get("anchors"), dict):
                raise ValueError(f"not an {_FORMAT} file")
            return data["anchors"]
        except (OSError, ValueError, AttributeError) as err:
            raise ConfigError(f"anchor book {self.path} is unreadable ({err}); delete it and the "
                              f"next profile recalibrates") from None

    def get(self, key: str) -> LatencyStats | None:
        entry = self._read().get(key)
        return None if entry is None else LatencyStats.from_dict(entry["stats"])

    def entries(self, device: str) -> list[dict[str, Any]]:
        """This host's anchors of one device (for `hwnas devices show`), without the raw stats."""
        return [{"key": key, "anchor_ms": e["anchor_ms"], "calibrated_at": e.get("calibrated_at"), **e["what"]}
                for key, e in self._read().items() if e["what"].get("device") == device]

    def put(self, key: str, stats: LatencyStats, what: Mapping[str, Any]) -> None:
        """Add or replace one anchor. Runs on one host share the file, so the read-modify-write
        holds an inter-process lock (two profiles calibrating at once keep both anchors)."""
        try:
            with self._lock, file_lock(self.path.with_name(f".{self.path.name}.lock")):
                anchors = self._read()
                anchors[key] = {"anchor_ms": stats.median_ms, "what": dict(what), "stats": stats.to_dict(),
                                "calibrated_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
                atomic_write_json(self.path, {"format": _FORMAT, "anchors": anchors})
        except OSError as err:
            raise ConfigError(f"cannot write the anchor book {self.path} ({err.strerror or err}); "
                              "set HWNAS_STATE_DIR to a writable folder") from None


def reference_arch(space: Any) -> Any:
    """The fixed reference model: the smallest subnet at the middle resolution."""
    rs = space.r_choices
    return space.min_arch(r=rs[len(rs) // 2])


def reference_key(space: Any) -> str:
    """Store key of the reference's own measurement (the device's anchor in this run)."""
    return f"reference:{reference_arch(space).id}"


def run_anchor(run_dir: str | Path, device: str, space: Any) -> float | None:
    """The run's anchor for `device` (ms), or None before the device's first profile."""
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run_dir, device=device, kind="reference")
    df = df[df["key"] == reference_key(space)] if not df.empty else df
    return None if df.empty else float(df["median_ms"].iloc[0])


def build_timing_subnet(arch: Any, n_classes: int) -> Any:
    """A subnet (of any family) with fixed random weights: what profiling compiles and times."""
    return arch.family.static_subnet(arch, n_classes)
