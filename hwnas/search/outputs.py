"""A finished search's answer, written as one unit: the pareto.csv table (predicted and measured
side by side), explored.csv (the scored cloud), search.json (`hwnas.search.record`'s schema) and
pareto.png. `hwnas.search.api.run_search` decides; this module only shapes and writes."""

from __future__ import annotations

import json
import math
import platform
import uuid
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hwnas.baselines import profile_key
from hwnas.fileio import atomic_path, json_safe
from hwnas.run import RunFiles
from hwnas.search.precision import SEARCHED
from hwnas.search.problem import TOP1, Batch, Problem, SearchOutcome, ms_key
from hwnas.search.record import checked_search
from hwnas.search.settings import SearchSettings
from hwnas.search.verify import Verification

__all__ = ["PRECISION", "PRECISION_TAG", "best_entry", "estimate", "explored", "frame", "precision_of", "report",
           "write"]

PRECISION_TAG = "precision"  # Batch column of a merged archive: the row's precision, as its index in SEARCHED
PRECISION = "precision"  # pareto.csv: the precision a row is scored (and verified) in


def estimate(problems: dict[str, Problem], m: np.ndarray, prec: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(top-1, sigma) of rows `m`, each in its precision (`Problem.top1_estimate`)."""
    prec = np.asarray(prec, dtype=object)
    mean, std = np.full(len(m), np.nan), np.full(len(m), np.nan)
    for p, pr in problems.items():
        rows = np.flatnonzero(prec == p)
        if len(rows):
            mean[rows], std[rows] = pr.top1_estimate(np.asarray(m)[rows])
    return mean, std


def precision_of(table: Batch) -> list[str]:
    return [SEARCHED[int(v)] for v in table.cols[PRECISION_TAG]]


def frame(problems: dict[str, Problem], table: Batch, prec_of: list[str], on_front: np.ndarray,
           measured: dict[int, dict[str, float]], chosen: list[int], n_classes: int,
           top1_measured: dict[int, float], variants: dict[str, dict[str, str]],
           memory: dict[int, dict[str, Any]] | None = None):
    """The pareto.csv table: front rows plus the other candidates that were measured or chosen;
    predicted and measured values side by side; each row's precision and the device its latency
    belongs to."""
    problem = next(iter(problems.values()))
    from hwnas.accuracy.features import params_macs
    from hwnas.accuracy.table import values_frame

    rows = np.union1d(np.flatnonzero(on_front),
                      np.array(sorted(set(measured) | set(chosen) | set(top1_measured)), dtype=int))
    m = table.m[rows]
    params, macs = params_macs(problem.space, m, n_classes)
    ids = [a.id for a in problem.space.from_matrix(m)]
    first, *others = problem.devices
    out = values_frame(problem.space, m)  # the family's flat columns, as values
    out["id"] = ids
    prec = [prec_of[int(i)] for i in rows]
    out[PRECISION] = prec
    out["top1_pred"], out["top1_std"] = estimate(problems, m, prec)
    out["top1_objective"] = table.cols[TOP1][rows]
    out["measured_top1"] = [top1_measured.get(int(i), np.nan) for i in rows]
    out["ms_pred"] = table.cols[ms_key(first)][rows]
    for d in problem.devices:  # per-device columns too, so the file names its devices
        out[f"ms_pred:{d}"] = table.cols[ms_key(d)][rows]
    out["ms_device"] = [variants[p][first] for p in prec]  # the device the latencies are of
    for d in problem.devices:
        out[f"ms_device:{d}"] = [variants[p][d] for p in prec]
    out["macs"], out["params"] = macs.astype(np.int64), params.astype(np.int64)
    if problem.space.family.has_memory_model:
        out["ram_kb"], out["flash_kb"] = memory_kb(problem, m, prec, n_classes)
    if memory:
        got = [(memory.get(int(i)) or {}).get("measured") or {} for i in rows]
        out["measured_ram_kb"] = [g.get("ram_kb", np.nan) for g in got]
        out["measured_flash_kb"] = [g.get("flash_kb", np.nan) for g in got]
    out["measured_ms"] = [measured.get(int(i), {}).get(first, np.nan) for i in rows]
    for d in problem.devices:
        out[f"measured_ms:{d}"] = [measured.get(int(i), {}).get(d, np.nan) for i in rows]
    out["verified"] = [int(i) in measured for i in rows]
    within = np.ones(len(rows), bool)
    for d in problem.devices:
        meas = out["measured_ms" if d == first else f"measured_ms:{d}"].to_numpy()
        pred = out["ms_pred" if d == first else f"ms_pred:{d}"].to_numpy()
        within &= np.where(np.isnan(meas), pred, meas) <= problem.budgets[d]
    out["within_budget"] = within
    out["on_front"] = on_front[rows]
    out["selected"] = [int(i) in set(chosen) for i in rows]
    return out.sort_values(["ms_pred", "top1_pred"]).reset_index(drop=True)


def memory_kb(problem: Problem, m: np.ndarray, prec: list[str], n_classes: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Predicted RAM arena and flash (kB) of rows `m`, each at its own precision."""
    from hwnas.families.memory import KB, family_memory

    ram, flash = np.zeros(len(m)), np.zeros(len(m))
    for p in sorted(set(prec)):
        sel = np.array([q == p for q in prec])
        r, f = family_memory(problem.space.family, m[sel], problem.space.width_mult, n_classes, p)
        ram[sel], flash[sel] = r / KB, f / KB
    return ram, flash


def best_entry(row, arch, devices: list[str], verify: bool, precision: str = "fp32",
                variants: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    first, *others = devices
    entry = {"id": arch.id, "precision": precision,
             "latency_devices": {d: (variants or {}).get(precision, {}).get(d, d) for d in devices},
             "arch": arch.to_ofa_dict(), "describe": arch.describe(),
             "top1_pred": float(row["top1_pred"]), "top1_std": num(row["top1_std"]),
             "measured_top1": num(row["measured_top1"]), "ms_pred": {first: float(row["ms_pred"])},
             "measured_ms": {first: num(row["measured_ms"])}, "macs": int(row["macs"]),
             "params": int(row["params"]), "verified": bool(verify and row["verified"]),
             "within_budget": bool(row["within_budget"])}
    if "ram_kb" in row:
        entry["ram_kb"], entry["flash_kb"] = float(row["ram_kb"]), float(row["flash_kb"])
    if "measured_ram_kb" in row:
        entry["measured_ram_kb"] = num(row["measured_ram_kb"])
        entry["measured_flash_kb"] = num(row["measured_flash_kb"])
    for d in others:
        entry["ms_pred"][d] = float(row[f"ms_pred:{d}"])
        entry["measured_ms"][d] = num(row[f"measured_ms:{d}"])
    return entry


def num(v: Any) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def versions() -> dict[str, str]:
    """The libraries a search's numbers depend on (Optuna's samplers, moocore's fronts)."""
    from importlib.metadata import version

    from hwnas import __version__ as hwnas_version

    return {"hwnas": hwnas_version, "python": platform.python_version(), "numpy": np.__version__,
            "optuna": version("optuna"), "moocore": version("moocore")}


def report(problem: Problem, s: SearchSettings, settings: dict[str, Any], metrics: dict[str, Any],
            best: list[dict[str, Any]], ver: Verification, outcome: SearchOutcome, accuracy,
            verification: dict[str, Any] | None) -> dict[str, Any]:
    """search.json's content (without the id and file names `write` adds). `settings`: what the
    algorithm recorded it ran."""
    from hwnas.search.optuna_search import describe_storage

    return {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": {**settings, "devices": s.devices, "budgets_ms": s.budgets, "pareto": s.pareto,
                     "top_k": s.top_k, "seed": s.seed, "verify": s.verify, "accuracy_risk": problem.accuracy_risk,
                     "objectives": list(problem.objectives), "max_macs": problem.max_macs,
                     "max_params": problem.max_params, "max_ram_kb": problem.max_ram_kb,
                     "max_flash_kb": problem.max_flash_kb,
                     "storage": describe_storage(s.storage) if s.storage else settings.get("storage")},
        "metrics": metrics,
        "accuracy_predictor": {"kind": getattr(accuracy, "name", type(accuracy).__name__),
                               "clip": list(getattr(accuracy, "clip", ())),
                               "note": "predictions are clipped to the top-1 range of the table they were "
                                       "fitted on (no extrapolation); top1_std is the predictor's one-sigma "
                                       "uncertainty, calibrated on out-of-fold errors; the search maximises "
                                       "top1_objective = top1_pred - accuracy_risk * top1_std",
                               "metrics": getattr(accuracy, "meta", {}).get("metrics")},
        "best": best,
        "acceptance": verification,
        "verification": ver.records,
        "info": {k: v for k, v in outcome.info.items() if k not in settings},
        # the best objective per generation (the dashboard's search-history chart; empty for
        # algorithms without generations)
        "history": [{"generation": g, "best_top1_objective": round(float(v), 4)}
                    for g, v in enumerate(outcome.history)],
        "versions": versions(),
    }


def explored(problems: dict[str, Problem], feasible: Batch, devices: list[str], most: int = 5000
              ) -> dict[str, np.ndarray]:
    """Up to `most` of the feasible subnets the search scored, evenly spaced: their predicted top-1
    (the predictor's own, as pareto.csv reports it, not the risk-adjusted objective) and latency
    on each device (explored.csv; the grey cloud of pareto.png and of the dashboard), and the
    precision each is scored in."""
    step = max(1, len(feasible) // most)
    prec = precision_of(feasible.take(np.arange(0, len(feasible), step)))
    out = {"top1_pred": estimate(problems, feasible.m[::step], prec)[0]}
    out.update({f"ms_pred:{d}": feasible.cols[ms_key(d)][::step] for d in devices if ms_key(d) in feasible.cols})
    out[PRECISION] = np.asarray(prec, dtype=object)
    return out


def write(files: RunFiles, front, doc: dict[str, Any], sample: dict[str, np.ndarray], devices: list[str],
           budgets: dict[str, float], title: str, plot: bool = True) -> dict[str, Path]:
    """pareto.csv, search.json and pareto.png as one unit: all three are written to temporary
    files, then renamed together under the run's search lock, so no reader and no concurrent
    search sees one search's table beside another's report. Both files carry `search_id`.
    Without `plot` (drawing it is most of the writing time: ~0.2-0.7 s) no pareto.png is written
    and an earlier search's is removed, so the files present always belong together."""
    paths = {"pareto_csv": files.pareto, "search_json": files.search, "explored_csv": files.explored}
    if plot:
        paths["pareto_png"] = files.pareto_png
    search_id = uuid.uuid4().hex[:12]
    first = devices[0]
    explored = (sample[f"ms_pred:{first}"], sample["top1_pred"]) if f"ms_pred:{first}" in sample else None
    with ExitStack() as stack:
        stack.enter_context(files.lock("search"))  # entered first, released after the renames
        tmp = {k: stack.enter_context(atomic_path(p, suffix=p.suffix)) for k, p in paths.items()}
        front.assign(search_id=search_id).to_csv(tmp["pareto_csv"], index=False)
        import pandas as pd

        pd.DataFrame(sample).assign(search_id=search_id).to_csv(tmp["explored_csv"], index=False)
        if plot:
            from hwnas.search.plot import plot_front, reference_models

            timed = [b for b in doc.get("baselines") or [] if first in b["measured_ms"]]
            plot_front(tmp["pareto_png"], front[front["on_front"] | front["verified"]], device=first,
                       budget_ms=budgets[first], explored=explored, title=title,
                       references=reference_models(files.root, first,
                                                   [profile_key(b["name"], b["resolution"]) for b in timed]),
                       baselines=[(f"{b['name']} r{b['resolution']}", b["measured_ms"][first], b["top1"])
                                  for b in timed],
                       ram_limit_kb=doc["settings"]["max_ram_kb"],
                       memory_axis="ram_kb" in doc["settings"]["objectives"] or doc["settings"]["max_ram_kb"] is not None)
        else:
            files.pareto_png.unlink(missing_ok=True)
        doc = checked_search(json_safe({"search_id": search_id, **doc, "files": {k: p.name for k, p in paths.items()}}))
        tmp["search_json"].write_text(json.dumps(doc, indent=2))
    return paths
