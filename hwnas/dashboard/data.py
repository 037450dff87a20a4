"""What the dashboard reads: run-directory files only, never hidden state.

Every loader returns None (or an empty frame) when its file is missing, and the page then shows
the command that produces it. Loaders are keyed on file modification times by the app, so new
results appear while a search is still running.
"""

from __future__ import annotations

import functools

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hwnas.run import RunFiles
from hwnas.space import N_STAGES, Arch

__all__ = ["RunFiles", "run_status", "load_pareto", "load_measurements", "load_accuracy",
           "load_search", "load_train_log", "latency_pairs", "device_matrix", "rank_correlations",
           "arch_grid", "find_runs"]


def find_runs(path: Path) -> list[Path]:
    """`path` itself when it is a run, else the runs directly inside it."""
    path = Path(path)
    if RunFiles(path).config.exists():
        return [path]
    return sorted(p for p in path.glob("*") if RunFiles(p).config.exists()) if path.is_dir() else []


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
    from hwnas.profiling.store import read_measurements

    return read_measurements(files.root)


def load_accuracy(files: RunFiles) -> pd.DataFrame:
    return _read_csv(files.accuracy)


def run_space(files: RunFiles):
    """The run's search space (of its family): `hwnas.space.SearchSpace` or a `FamilySpace`."""
    mtime = files.config.stat().st_mtime if files.config.exists() else 0.0
    return _run_space(files.root, mtime)


@functools.lru_cache(maxsize=32)
def _run_space(root: Path, mtime: float):
    from hwnas.errors import HwnasError
    from hwnas.run import open_run
    from hwnas.space import SearchSpace

    try:
        return open_run(root, create=False).space
    except HwnasError:  # no or a broken config.yaml: the first family's columns
        return SearchSpace()


def arch_codes(files: RunFiles, df: pd.DataFrame) -> np.ndarray:
    """The int matrix of a table's flat rows in the run family's columns (what predictors take)."""
    return run_space(files).family.table_codes(df).astype(np.int32)


def load_pareto(files: RunFiles) -> pd.DataFrame:
    """pareto.csv with each subnet's `id`, its description (`arch`) and its int row (`arch_row`)."""
    df = _read_csv(files.pareto)
    if df.empty:
        return df
    space = run_space(files)
    if not set(space.flat_columns) <= set(df.columns):
        return df
    archs = space.from_matrix(arch_codes(files, df))
    if "id" not in df.columns:
        df["id"] = [a.id for a in archs]
    df["arch"] = [a.describe() for a in archs]
    df["arch_row"] = [list(a.to_row()) for a in archs]
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
    path = files.latency_predictor(device)
    df = load_measurements(files)
    if df.empty or not path.exists():
        return pd.DataFrame()
    from hwnas.latency import load_predictor

    df = df[(df["device"] == device) & (df["kind"] == "subnet")].copy()
    if df.empty:
        return df
    predictor = load_predictor(path)
    df["predicted_ms"] = predictor.predict(arch_codes(files, df))
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


def arch_grid(arch) -> pd.DataFrame:
    """Long table for the per-block picture: row, column, colour value, label, used.

    OFA-MobileNetV3: stages x blocks (kernel and expand per used slot). Other families: one row
    per gene group, one cell per gene (inactive genes, which do not change the network, show —)."""
    rows = []
    if isinstance(arch, Arch):
        for s in range(N_STAGES):
            for j in range(4):
                i = 4 * s + j
                used = j < arch.d[s]
                rows.append({"stage": f"stage {s + 1}", "block": j + 1, "expand": arch.e[i] if used else None,
                             "used": used, "label": f"k{arch.ks[i]} e{arch.e[i]}" if used else "—"})
        return pd.DataFrame(rows)
    family = arch.family
    active = family.active_mask(np.asarray([arch.to_row()]))[0]
    k = 0
    for g in family.gene_groups():
        for i, value in enumerate(arch.group(g.name)):
            used = bool(active[k])
            k += 1
            rows.append({"stage": g.name, "block": i + 1, "expand": float(value) if used else None,
                         "used": used, "label": f"{value:g}" if used else "—"})
    return pd.DataFrame(rows)


# -- what the pages show, computed from the files above (pure: no Streamlit) ----------------------
MIN_SHARED = 10  # fewer shared subnets than this and a rank correlation is not worth reading


def searched_device(search: dict[str, Any] | None, front: pd.DataFrame | None = None) -> str | None:
    devices = ((search or {}).get("settings") or {}).get("devices") or []
    if devices:
        return devices[0]
    if front is not None and not front.empty:
        named = [c.split(":", 1)[1] for c in front.columns if c.startswith("ms_pred:")]
        if named:
            return named[0]
    return None


def budget_of(search: dict[str, Any] | None, device: str | None) -> float | None:
    value = (((search or {}).get("settings") or {}).get("budgets_ms") or {}).get(device)
    return float(value) if value is not None else None


def accuracy_error(files: RunFiles, search: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The accuracy predictor's quality: out-of-fold (held-out) and training-fit errors, with n.

    From search.json's report, else the predictor file. None when neither holds metrics."""
    metrics = ((search or {}).get("accuracy_predictor") or {}).get("metrics")
    kind = ((search or {}).get("accuracy_predictor") or {}).get("kind")
    if not metrics:
        try:
            doc = json.loads(files.accuracy_predictor.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        metrics = (doc.get("meta") or {}).get("metrics")
        kind = kind or doc.get("kind")
    if not metrics or not metrics.get("oof"):
        return None
    oof, train = metrics["oof"], metrics.get("train") or {}
    return {"kind": kind or (metrics.get("chosen") or {}).get("name"), "folds": metrics.get("folds"),
            "oof_mae": oof.get("mae"), "oof_rmse": oof.get("rmse"), "oof_tau": oof.get("kendall_tau"),
            "oof_n": oof.get("n"), "within_1_sigma": oof.get("within_1_sigma"),
            "train_mae": train.get("mae"), "train_tau": train.get("kendall_tau"), "train_n": train.get("n"),
            "learning_curve": metrics.get("learning_curve") or [], "candidates": metrics.get("candidates") or []}


def front_frame(front: pd.DataFrame, device: str | None, budget: float | None) -> pd.DataFrame:
    """pareto.csv with what the chart needs: `ms` (predicted on `device`), `measured` ms,
    `on_front`, `budget_state` (within / over, measured when measured), `arch`."""
    df = front.copy()
    if df.empty:
        return df
    ms_col = f"ms_pred:{device}" if device and f"ms_pred:{device}" in df.columns else "ms_pred"
    meas_col = f"measured_ms:{device}" if device and f"measured_ms:{device}" in df.columns else "measured_ms"
    df["ms"] = df[ms_col].astype(float)
    df["measured"] = df[meas_col].astype(float) if meas_col in df.columns else np.nan
    if "measured_top1" not in df.columns:
        df["measured_top1"] = np.nan
    if "top1_std" not in df.columns:
        df["top1_std"] = np.nan
    df["on_front"] = df["on_front"].astype(bool) if "on_front" in df.columns else True
    effective = df["measured"].fillna(df["ms"])
    if budget is not None:
        df["budget_state"] = np.where(effective <= budget, "within budget", "over budget")
    else:
        df["budget_state"] = "no budget"
    df["latency_source"] = np.where(df["measured"].notna(), "measured", "predicted")
    return df.sort_values(["ms", "top1_pred"]).reset_index(drop=True)


def measured_links(df: pd.DataFrame) -> pd.DataFrame:
    """One row per subnet with a measurement: from its predicted point (ms, top1_pred) to its
    measured one (measured ms, else predicted; measured top-1, else predicted)."""
    if df.empty:
        return df
    done = df[df["measured"].notna() | df["measured_top1"].notna()].copy()
    done["x0"], done["y0"] = done["ms"], done["top1_pred"]
    done["x1"] = done["measured"].fillna(done["ms"])
    done["y1"] = done["measured_top1"].fillna(done["top1_pred"])
    return done


def explored_points(files: RunFiles, device: str, n: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The subnets the last search scored (`explored.csv`, written with pareto.csv: predicted
    top-1 and `device` latency), at most `n`; for a run searched before that file existed, or on a
    device it did not search, a random sample of the space scored by the run's predictors. Empty
    when a predictor is missing."""
    path = files.explored
    if path.exists():
        try:
            df = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            df = pd.DataFrame()
        if f"ms_pred:{device}" in df.columns and "top1_pred" in df.columns:
            df = df.rename(columns={f"ms_pred:{device}": "ms"})[["ms", "top1_pred"]]
            step = max(1, len(df) // n)
            return df.iloc[::step].reset_index(drop=True).assign(source="search")
    from hwnas.accuracy import load_accuracy_predictor
    from hwnas.run import open_run
    from hwnas.search.problem import load_latency_predictor

    try:
        run = open_run(files.root, create=False)
        latency = load_latency_predictor(files.root, device, run.space.width_mult)
        accuracy = load_accuracy_predictor(files.root)
    except Exception:  # a missing or unreadable predictor: the page says so elsewhere
        return pd.DataFrame()
    m = run.space.sample_matrix(n, seed).astype(np.int32)
    return pd.DataFrame({"ms": np.asarray(latency.predict(m), float),
                         "top1_pred": np.asarray(accuracy.predict(m), float), "source": "space sample"})


def references(files: RunFiles, device: str) -> pd.DataFrame:
    """Reference models measured on `device` (name, ms)."""
    from hwnas.search.plot import reference_models

    rows = reference_models(files.root, device) if files.measurements.exists() else []
    return pd.DataFrame(rows, columns=["name", "ms"])


def tight_domain(values, pad: float = 0.05) -> list[float] | None:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    span = (hi - lo) or max(abs(hi), 1e-3) * 0.1
    return [lo - pad * span, hi + pad * span]


# -- exports ---------------------------------------------------------------------------------------
def load_exports(files: RunFiles, front: pd.DataFrame | None = None,
                 search: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per bundle under RUN/exports: its verification status, measured and predicted
    numbers, and flags: from an earlier search (stale), not in the current pareto.csv (orphaned),
    measured over the current budget of its device."""
    cols = ["bundle", "id", "device", "status", "measured_top1", "int8_drop", "measured_ms", "predicted_top1",
            "predicted_ms", "budget_ms", "over_budget", "search_id", "current_search", "in_front", "flags",
            "path"]
    if not files.exports.exists():
        return pd.DataFrame(columns=cols)
    front = load_pareto(files) if front is None else front
    search = load_search(files) if search is None else search
    current = (search or {}).get("search_id")
    if current is None and not front.empty and "search_id" in front.columns:
        current = str(front["search_id"].iloc[0])
    ids = set(front["id"]) if not front.empty and "id" in front.columns else set()
    rows = []
    for path in sorted(files.exports.glob("*/model.json")):
        folder = path.parent
        try:
            meta = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            rows.append({"bundle": folder.name, "status": "unreadable", "flags": "model.json is unreadable",
                         "path": str(folder)})
            continue
        try:
            verify = json.loads((folder / "verify.json").read_text())
        except (OSError, json.JSONDecodeError):
            verify = {}
        device = verify.get("device") or folder.name.rsplit("-", 2)[-1]
        if meta.get("id") and folder.name.startswith(meta["id"] + "-"):
            device = verify.get("device") or folder.name[len(meta["id"]) + 1:]
        lat = (meta.get("latency") or {}).get("measured") or (verify.get("latency") or {}).get("measured") or {}
        predicted = meta.get("predicted") or {}
        row = predicted.get("row") or {}
        sid = row.get("search_id")
        budget = budget_of(search, device)
        ms = lat.get("corrected_ms")
        over = bool(budget is not None and ms is not None and ms > budget)
        status = meta.get("status") or verify.get("status") or "unknown"
        if verify and not verify.get("passed", True):
            status = "failed"
        flags = []
        if meta.get("id") not in ids:
            flags.append("orphaned: not in the current pareto.csv")
        elif current and sid and sid != current:
            flags.append("stale: exported from an earlier search")
        if over:
            flags.append(f"over the current {budget:.4g} ms budget")
        if status != "verified":
            flags.append(f"verification {status}")
        top1, drop = bundle_top1(meta)
        rows.append({"bundle": folder.name, "id": meta.get("id"), "device": device, "status": status,
                     "measured_top1": top1, "int8_drop": drop, "measured_ms": ms,
                     "predicted_top1": predicted.get("top1"), "predicted_ms": predicted.get("latency_ms"),
                     "budget_ms": budget, "over_budget": over, "search_id": sid,
                     "current_search": bool(current and sid == current), "in_front": meta.get("id") in ids,
                     "flags": "; ".join(flags) or "ok", "path": str(folder)})
    return pd.DataFrame(rows, columns=cols)


def load_finetune(files: RunFiles, arch_id: str) -> dict[str, Any] | None:
    """What `hwnas finetune` recorded for a subnet (epochs, top-1 before / after), or None."""
    from hwnas.supernet.finetune import STEM

    try:
        record = json.loads((files.finetuned(arch_id) / f"{STEM}.json").read_text())["extra"]["finetune"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def bundle_top1(meta: dict[str, Any]) -> tuple[float | None, float | None]:
    """(top-1 of what the bundle ships, INT8 drop): an INT8 bundle ships the quantized model, so
    its measured top-1 is the INT8 one (model.json's ``accuracy.int8``), not the fp32 subnet's."""
    acc = meta.get("accuracy") or {}
    int8 = acc.get("int8") or {}
    if int8.get("top1_int8") is not None:
        return int8["top1_int8"], int8.get("drop")
    return acc.get("top1"), None


def bundle_signature(folder: Path) -> tuple:
    """(name, size, mtime_ns) of every file: a zip of the bundle is rebuilt only when it changes."""
    folder = Path(folder)
    return tuple((p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns)
                 for p in sorted(folder.rglob("*")) if p.is_file() for st in [p.stat()])


def zip_folder(folder: Path) -> bytes:
    import io
    import zipfile

    folder = Path(folder)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder.parent))
    return buf.getvalue()


# -- overview ----------------------------------------------------------------------------------------
def headline(files: RunFiles) -> dict[str, Any]:
    """The overview's cards: device, budget, best subnet (predicted and measured), hypervolume,
    accuracy predictor error, exports and their flags."""
    search = load_search(files)
    front = load_pareto(files)
    device = searched_device(search, front)
    best = ((search or {}).get("best") or [None])[0]
    metrics = (search or {}).get("metrics") or {}
    exports = load_exports(files, front, search)
    out: dict[str, Any] = {"device": device, "budget_ms": budget_of(search, device),
                           "search_id": (search or {}).get("search_id"),
                           "algo": ((search or {}).get("settings") or {}).get("algo"),
                           "verified": bool(((search or {}).get("settings") or {}).get("verify")),
                           "hypervolume": metrics.get("hypervolume"), "front_size": metrics.get("front_size"),
                           "best": None, "accuracy": accuracy_error(files, search),
                           "exports": exports}
    if best:
        out["best"] = {"id": best.get("id"), "top1_pred": best.get("top1_pred"),
                       "measured_top1": best.get("measured_top1"),
                       "ms_pred": (best.get("ms_pred") or {}).get(device),
                       "measured_ms": (best.get("measured_ms") or {}).get(device),
                       "verified": best.get("verified")}
    return out


# -- honest predictor and device metrics ---------------------------------------------------------
def _fit_time(path: Path) -> pd.Timestamp | None:
    return pd.Timestamp(path.stat().st_mtime, unit="s", tz="UTC") if path.exists() else None


def split_pairs(pairs: pd.DataFrame, fitted_at: pd.Timestamp | None) -> pd.DataFrame:
    """Label each measured subnet `training` (measured before the predictor was fitted, so it
    trained it) or `held-out` (measured afterwards: by a search's verification or an export)."""
    df = pairs.copy()
    if df.empty:
        return df
    if fitted_at is None or "measured_at" not in df.columns:
        df["split"] = "training"
        return df
    when = pd.to_datetime(df["measured_at"], utc=True, errors="coerce")
    first = when.groupby(df["key"]).transform("min")
    # measured_at has one-second resolution: a row measured in the fit's own second trained it
    df["split"] = np.where(first > fitted_at.floor("s"), "held-out", "training")
    return df


def pair_metrics(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per split: n, share within ±10 %, mean abs error %, Kendall tau (None below 3 points)."""
    rows = []
    for split in ("held-out", "training"):
        df = pairs[pairs["split"] == split] if not pairs.empty else pairs
        n = len(df)
        tau = None
        if n >= 3:
            tau = float(pd.Series(df["predicted_ms"].to_numpy()).corr(
                pd.Series(df["measured_ms"].to_numpy()), method="kendall"))
        rows.append({"points": split, "n": n,
                     "within ±10 %": float((df["error_pct"].abs() <= 10).mean() * 100) if n else None,
                     "mean |error| %": float(df["error_pct"].abs().mean()) if n else None,
                     "Kendall τ": tau})
    return pd.DataFrame(rows)


def latency_quality(files: RunFiles, device: str) -> dict[str, Any]:
    """Measured vs predicted latency split into training and held-out points, their metrics, and
    the fit's own cross-validation (out-of-fold) metrics."""
    path = files.latency_predictor(device)
    pairs = latency_pairs(files, device)
    if pairs.empty:
        return {"pairs": pairs}
    pairs = pairs.groupby("key", as_index=False).agg(
        predicted_ms=("predicted_ms", "first"), measured_ms=("measured_ms", "median"),
        measured_at=("measured_at", "min") if "measured_at" in pairs.columns else ("key", "first"),
        macs=("macs", "first"))
    pairs["error_pct"] = 100 * (pairs["predicted_ms"] / pairs["measured_ms"] - 1)
    pairs = split_pairs(pairs, _fit_time(path))
    try:
        meta = json.loads(path.read_text()).get("meta") or {}
    except (OSError, json.JSONDecodeError):
        meta = {}
    cv = meta.get("cv") or {}
    return {"pairs": pairs, "metrics": pair_metrics(pairs), "cv": cv, "n_train": meta.get("n_train"),
            "chosen": cv.get("chosen")}


def device_pairs(matrix: pd.DataFrame) -> pd.DataFrame:
    """Each pair of devices: subnets both measured (n), Kendall tau, and a warning when n is small."""
    rows = []
    cols = list(matrix.columns)
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            both = matrix[[a, b]].dropna()
            n = len(both)
            tau = float(both[a].corr(both[b], method="kendall")) if n >= 3 else None
            rows.append({"device A": a, "device B": b, "shared subnets": n, "Kendall τ": tau,
                         "note": "ok" if n >= MIN_SHARED else
                         f"only {n} shared subnets (< {MIN_SHARED}): τ is not reliable"})
    return pd.DataFrame(rows)


def device_matrix_all(files: RunFiles) -> pd.DataFrame:
    """Like `device_matrix`, but keeps subnets missing on some device (NaN) so pairs count their own n."""
    df = load_measurements(files)
    if df.empty:
        return df
    df = df[df["kind"] == "subnet"]
    table = df.pivot_table(index="key", columns="device", values="corrected_ms", aggfunc="median")
    return table if table.shape[1] > 1 else pd.DataFrame()


# -- compare runs / devices ------------------------------------------------------------------------
def front_on(files: RunFiles, device: str) -> pd.DataFrame:
    """The run's pareto.csv front re-read for `device`: its predicted ms there (the file's
    column when the search covered the device, else the device's latency predictor), measured ms
    where measured, the predicted top-1, and `on_front` recomputed for that device."""
    front = load_pareto(files)
    if front.empty or "top1_pred" not in front.columns:
        return pd.DataFrame()
    search = load_search(files)
    first = searched_device(search, front)
    df = front.copy()
    if f"ms_pred:{device}" in df.columns:
        df["ms"] = df[f"ms_pred:{device}"].astype(float)
    elif device == first and "ms_pred" in df.columns:
        df["ms"] = df["ms_pred"].astype(float)
    else:
        try:
            from hwnas.latency import load_predictor

            pred = load_predictor(files.latency_predictor(device))
            df["ms"] = np.asarray(pred.predict(arch_codes(files, df)), float)
        except Exception:
            return pd.DataFrame()
    mcol = f"measured_ms:{device}" if f"measured_ms:{device}" in df.columns else (
        "measured_ms" if device == first and "measured_ms" in df.columns else None)
    df["measured"] = df[mcol].astype(float) if mcol else np.nan
    if "measured_top1" not in df.columns:
        df["measured_top1"] = np.nan
    df["on_front"] = pareto_mask(df["ms"].to_numpy(), df["top1_pred"].to_numpy())
    return df.sort_values("ms").reset_index(drop=True)


def pareto_mask(ms: np.ndarray, top1: np.ndarray) -> np.ndarray:
    """Non-dominated rows for (min ms, max top-1)."""
    order = np.lexsort((-top1, ms))
    keep = np.zeros(len(ms), bool)
    best = -np.inf
    for i in order:
        if top1[i] > best:
            keep[i], best = True, top1[i]
    return keep


def hypervolume_2d(ms: np.ndarray, top1: np.ndarray, budget: float) -> float:
    """Area dominated by the points up to (latency = budget, top-1 = 0 %): search.json's
    reference point, so values compare with its `hypervolume`."""
    ok = np.asarray(ms) < budget
    ms, top1 = np.asarray(ms)[ok], np.asarray(top1)[ok]
    if not len(ms):
        return 0.0
    keep = pareto_mask(ms, top1)
    ms, top1 = ms[keep], top1[keep]
    order = np.argsort(ms)
    ms, top1 = ms[order], top1[order]
    edges = np.append(ms[1:], budget)
    return float(np.sum((edges - ms) * top1))


def best_under(df: pd.DataFrame, budget: float) -> pd.Series | None:
    """The subnet with the highest predicted top-1 whose latency (measured when measured) fits."""
    if df.empty:
        return None
    effective = df["measured"].fillna(df["ms"])
    fit = df[effective <= budget]
    if fit.empty:
        return None
    return fit.sort_values(["top1_pred", "ms"], ascending=[False, True]).iloc[0]


def compare_summary(series: dict[tuple[str, str], tuple[RunFiles, pd.DataFrame]], budget: float | None
                    ) -> pd.DataFrame:
    """One row per (run, device): front size, hypervolume at the budget, best measured top-1 under
    the budget, best predicted under it, and the predictors' held-out quality."""
    rows = []
    for (run, device), (files, df) in series.items():
        search = load_search(files)
        b = budget if budget is not None else budget_of(search, device)
        front = df[df["on_front"]] if not df.empty else df
        measured = df[df["measured_top1"].notna() & df["measured"].notna()] if not df.empty else df
        if b is not None and not measured.empty:
            measured = measured[measured["measured"] <= b]
        pick = best_under(front, b) if b is not None else None
        acc = accuracy_error(files, search) or {}
        lat = latency_quality(files, device)
        cv = (lat.get("cv") or {}).get("chosen_metrics") or {}
        rows.append({"run": run, "device": device, "budget ms": b, "front size": int(len(front)),
                     "hypervolume": hypervolume_2d(front["ms"].to_numpy(), front["top1_pred"].to_numpy(), b)
                     if b is not None and not front.empty else None,
                     "best measured top-1 % under budget": float(measured["measured_top1"].max())
                     if not measured.empty else None,
                     "best subnet (predicted)": None if pick is None else pick["id"],
                     "its predicted top-1 %": None if pick is None else float(pick["top1_pred"]),
                     "its predicted ms": None if pick is None else float(pick["ms"]),
                     "accuracy MAE % (out-of-fold)": acc.get("oof_mae"),
                     "latency within ±10 % (CV)": None if not cv else 100 * float(cv.get("within_10", 0))})
    return pd.DataFrame(rows)


# -- training ----------------------------------------------------------------------------------------
def phase_bounds(log: pd.DataFrame) -> pd.DataFrame:
    """Each phase in training order: first and last overall epoch, and its order number."""
    if log.empty or "phase" not in log.columns:
        return pd.DataFrame(columns=["phase", "order", "start", "end"])
    order = list(dict.fromkeys(log["phase"]))
    g = log.groupby("phase", sort=False)["epoch_total"].agg(["min", "max"]).reindex(order)
    return pd.DataFrame({"phase": order, "order": range(1, len(order) + 1), "start": g["min"].to_numpy(),
                         "end": g["max"].to_numpy()})
