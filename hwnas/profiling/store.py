"""The run's measurement store: one Parquet table, `runs/<name>/measurements.parquet`.

One row per measured thing on one device: a subnet (`kind="subnet"`, with the flat arch columns
of the run's family, as values: the family's `flat_columns`; a run has one family, so one set of columns),
a single block for lookup tables (`kind="block"`), a reference model such as a timm network
(`kind="model"`), or the profiler's reference subnet, whose latency is the device's anchor in this
run (`kind="reference"`, see `hwnas.profiling.anchors`). Columns: identity (`device`, `kind`,
`key`), the arch's flat columns (-1 when not a subnet), `params`, `macs`, the `LatencyStats`
fields (`corrected_ms` is what predictors learn), how they were taken, and `block` (JSON of a
block's description) / `meta` (JSON).

Appends are atomic (write the whole table to a temp file, rename): a crash leaves the table as it
was before the last append, never half-written. `(device, kind, key)` is unique: profiling skips
what is already there, so reruns resume.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from hwnas.devices.stats import LatencyStats
from hwnas.errors import TableError
from hwnas.families.base import GeneArch
from hwnas.fileio import atomic_path, read_parquet
from hwnas.run import RunFiles

__all__ = ["MEASUREMENTS", "MeasurementStore", "read_measurements", "stats_row"]

MEASUREMENTS = RunFiles(Path("")).measurements.name
KINDS = ("subnet", "block", "model", "reference")
_STAT_COLUMNS = ("median_ms", "mean_ms", "std_ms", "p90_ms", "p99_ms", "min_ms", "n", "warmup", "cv",
                 "corrected_ms", "ref_median_ms", "rounds", "rel_se", "backend", "threads", "batch", "precision",
                 "resolution", "host", "timer")
_REQUIRED = ("device", "kind", "key", "corrected_ms", "median_ms", "r")


def arch_values(arch: GeneArch) -> tuple[tuple[str, ...], list[Any]]:
    """(flat columns, values) of an arch of any family (gene values, not choice indices)."""
    fam = arch.family
    return fam.flat_columns(), [arch.r] + [v for g in fam.gene_groups() for v in arch.group(g.name)]


def stats_row(device: str, kind: str, key: str, stats: LatencyStats, *, arch: GeneArch | None = None,
              params: int | None = None, macs: int | None = None, block: Mapping[str, Any] | None = None,
              meta: Mapping[str, Any] | None = None, columns: Sequence[str] | None = None) -> dict[str, Any]:
    """One store row from a measurement. `columns`: the run's flat columns (default: the arch's
    family's; required for a row without an arch), -1 in each when the row is not a subnet."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    d = stats.to_dict()
    row: dict[str, Any] = {"device": device, "kind": kind, "key": key}
    if arch is not None:
        cols, values = arch_values(arch)
        if columns is not None and tuple(columns) != tuple(cols):
            raise ValueError("the arch's flat columns are not the run's")
        row.update(zip(cols, values))
    elif columns is None:
        raise ValueError("a row without an arch needs the run's flat columns")
    else:
        row.update((c, -1) for c in columns)
    row.update(params=-1 if params is None else int(params), macs=-1 if macs is None else int(macs))
    row.update({c: d[c] for c in _STAT_COLUMNS})
    row["ref_median_ms"] = np.nan if row["ref_median_ms"] is None else row["ref_median_ms"]
    row["resolution"] = -1 if row["resolution"] is None else row["resolution"]
    row.update(ref_ms=json.dumps(d["ref_ms"]), versions=json.dumps(d["versions"], sort_keys=True),
               block=json.dumps(dict(block or {}), sort_keys=True), meta=json.dumps(dict(meta or {})),
               measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return row


class MeasurementStore:
    """Append-only access to a run's measurements, safe across threads and processes: every
    append re-reads the store under an inter-process lock, so two `hwnas profile` on one run
    never lose each other's rows."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / MEASUREMENTS
        self._lock = threading.Lock()

    def read(self) -> pd.DataFrame:
        return read_measurements(self.path.parent)

    def keys(self, device: str, kind: str | None = None) -> set[str]:
        df = self.read()
        if df.empty:
            return set()
        sel = df["device"] == device
        if kind is not None:
            sel &= df["kind"] == kind
        return set(df.loc[sel, "key"])

    def append(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Add rows (replacing none): rows whose (device, kind, key) exist are skipped."""
        new = pd.DataFrame(list(rows))
        if new.empty:
            return 0
        from hwnas.run import run_lock

        with self._lock, run_lock(self.path.parent, MEASUREMENTS):
            old = self.read()
            if not old.empty:
                seen = set(zip(old["device"], old["kind"], old["key"]))
                new = new[[k not in seen for k in zip(new["device"], new["kind"], new["key"])]]
            if new.empty:
                return 0
            table = pd.concat([old, new], ignore_index=True) if not old.empty else new
            with atomic_path(self.path, suffix=".parquet") as tmp:
                table.to_parquet(tmp, index=False)
            return len(new)


def read_measurements(run_dir: str | Path, device: str | None = None, kind: str | None = None
                      ) -> pd.DataFrame:
    """The run's measurements (empty DataFrame when none), optionally for one device/kind."""
    path = Path(run_dir) / MEASUREMENTS
    if not path.exists():
        return pd.DataFrame()
    try:
        df = read_parquet(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise TableError(f"measurement store {path} is unreadable ({type(err).__name__}); "
                         "restore it or move it away and profile again") from None
    missing = [c for c in _REQUIRED if c not in df.columns]
    if not missing:  # the flat columns of one family (the default family's in stores before families)
        from hwnas.families import family_names, get_family

        gaps = [[c for c in get_family(f).flat_columns() if c not in df.columns] for f in family_names()]
        missing = [] if any(not g for g in gaps) else min(gaps, key=len)
    if missing:
        raise TableError(f"{path} is not an hwnas measurement store (missing {', '.join(missing[:4])})")
    if device is not None:
        df = df[df["device"] == device]
    if kind is not None:
        df = df[df["kind"] == kind]
    return df.reset_index(drop=True)
