"""What the dashboard reads: run-directory files only, never hidden state.

Every loader returns None (or an empty frame) when its file is missing, and the page then shows
the command that produces it. Loaders are keyed on file modification times by the app, so new
results appear while a search is still running.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hwnas.space import FLAT_COLUMNS, N_STAGES, Arch

__all__ = ["RunFiles", "run_status", "load_pareto", "load_measurements", "load_accuracy",
           "load_search", "load_train_log", "latency_pairs", "device_matrix", "rank_correlations",
           "arch_grid", "find_runs"]


@dataclass(frozen=True)
class RunFiles:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def measurements(self) -> Path:
        return self.root / "measurements.parquet"

    @property
    def accuracy(self) -> Path:
        return self.root / "accuracy.csv"

    @property
    def pareto(self) -> Path:
        return self.root / "pareto.csv"

    @property
    def search(self) -> Path:
        return self.root / "search.json"

    @property
    def predictors(self) -> Path:
        return self.root / "predictors"

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    def mtimes(self) -> tuple[float, ...]:
        """A cache key that changes whenever any run file changes."""
        paths = [self.config, self.measurements, self.accuracy, self.pareto, self.search]
        paths += sorted(self.predictors.glob("*.json")) + sorted(self.exports.glob("*/model.json"))
        return tuple(p.stat().st_mtime if p.exists() else 0.0 for p in paths)


def find_runs(path: Path) -> list[Path]:
    """`path` itself when it is a run, else the runs directly inside it."""
    path = Path(path)
    if (path / "config.yaml").exists():
        return [path]
    return sorted(p for p in path.glob("*") if (p / "config.yaml").exists()) if path.is_dir() else []


def run_status(files: RunFiles) -> list[dict[str, str]]:
    """One row per pipeline stage: done or missing, and the command that makes it."""
    run = files.root
    measurements = load_measurements(files)
    devices = sorted(measurements["device"].unique()) if not measurements.empty else []
    dev = devices[0] if devices else "cpu-ort"
    predictors = sorted(p.stem for p in files.predictors.glob("latency-*.json")) if files.predictors.exists() else []
    exports = sorted(p.parent.name for p in files.exports.glob("*/model.json")) if files.exports.exists() else []
    rows = [
        ("measurements", f"{len(measurements)} rows on {', '.join(devices)}" if devices else "",
         f"hwnas profile --run {run} --device {dev} --samples 100"),
        ("latency predictors", ", ".join(predictors), f"hwnas latency fit --run {run} --device {dev}"),
        ("accuracy table", f"{len(load_accuracy(files))} subnets" if files.accuracy.exists() else "",
         f"hwnas search --run {run} --device {dev} --latency-ms X (builds it)"),
        ("pareto front", f"{len(load_pareto(files))} subnets" if files.pareto.exists() else "",
         f"hwnas search --run {run} --device {dev} --latency-ms X --pareto"),
        ("exports", ", ".join(exports), f"hwnas export --run {run} --device {dev} --pareto"),
    ]
    return [{"stage": s, "status": "done" if have else "missing", "what": have or "—",
             "command": "" if have else cmd} for s, have, cmd in rows]


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def load_measurements(files: RunFiles) -> pd.DataFrame:
    from hwnas.latency.store import read_measurements

    return read_measurements(files.root)


def load_accuracy(files: RunFiles) -> pd.DataFrame:
    return _read_csv(files.accuracy)


def load_pareto(files: RunFiles) -> pd.DataFrame:
    df = _read_csv(files.pareto)
    if df.empty:
        return df
    if "id" not in df.columns and set(FLAT_COLUMNS) <= set(df.columns):
        df["id"] = [Arch.from_row(r).id for r in df[list(FLAT_COLUMNS)].to_numpy().tolist()]
    return df


def load_search(files: RunFiles) -> dict[str, Any] | None:
    try:
        return json.loads(files.search.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def load_train_log(path: Path | None) -> pd.DataFrame:
    """Supernet training curves from a `train_log.jsonl` (one JSON record per epoch)."""
    if path is None or not Path(path).exists():
        return pd.DataFrame()
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    df = pd.DataFrame(rows)
    if not df.empty:
        df["epoch_total"] = np.arange(1, len(df) + 1)
    return df


def latency_pairs(files: RunFiles, device: str) -> pd.DataFrame:
    """Measured vs. predicted latency of the device's measured subnets (needs its predictor)."""
    path = files.predictors / f"latency-{device}.json"
    df = load_measurements(files)
    if df.empty or not path.exists():
        return pd.DataFrame()
    from hwnas.latency import load_predictor

    df = df[(df["device"] == device) & (df["kind"] == "subnet")].copy()
    if df.empty:
        return df
    predictor = load_predictor(path)
    df["predicted_ms"] = predictor.predict(df[list(FLAT_COLUMNS)].to_numpy().astype(np.int32))
    df["measured_ms"] = df["corrected_ms"]
    df["error_pct"] = 100 * (df["predicted_ms"] / df["measured_ms"] - 1)
    return df


def device_matrix(files: RunFiles) -> pd.DataFrame:
    """Subnets measured on more than one device: rows = subnet id, columns = device."""
    df = load_measurements(files)
    if df.empty:
        return df
    df = df[df["kind"] == "subnet"]
    table = df.pivot_table(index="key", columns="device", values="corrected_ms", aggfunc="first")
    return table.dropna() if table.shape[1] > 1 else pd.DataFrame()


def rank_correlations(matrix: pd.DataFrame) -> pd.DataFrame:
    """Kendall tau between each pair of devices over the subnets both measured."""
    if matrix.empty:
        return matrix
    return matrix.corr(method="kendall")


def arch_grid(arch: Arch) -> pd.DataFrame:
    """Long table of the 20 slots for the per-stage picture: stage, block, kernel, expand, used."""
    rows = []
    for s in range(N_STAGES):
        for j in range(4):
            i = 4 * s + j
            used = j < arch.d[s]
            rows.append({"stage": f"stage {s + 1}", "block": j + 1, "kernel": arch.ks[i] if used else None,
                         "expand": arch.e[i] if used else None, "used": used,
                         "label": f"k{arch.ks[i]} e{arch.e[i]}" if used else "—"})
    return pd.DataFrame(rows)
