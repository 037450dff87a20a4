"""How good the run's predictors are, honestly: held-out points apart from the ones a predictor was
fitted on, and those shown as out-of-fold predictions (each predicted by a model fitted without it),
never as the in-sample fit."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from hwnas.dashboard import stats
from hwnas.dashboard.data import RunFiles, arch_codes, load_accuracy, load_measurements, run_space
from hwnas.errors import HwnasError
from hwnas.latency import metrics
from hwnas.latency.record import FitReport, PredictorMeta
from hwnas.search.record import SearchRecord

__all__ = ["HELD_OUT", "OUT_OF_FOLD", "IN_SAMPLE", "accuracy_error", "split_pairs", "pair_metrics",
           "latency_quality", "predictor_meta", "gene_importance"]

HELD_OUT = "held-out"  # a subnet the predictor was not fitted on (its file lists the ids it was)
OUT_OF_FOLD = "out-of-fold"  # trained it: predicted by the fold model that did not see it
IN_SAMPLE = "training fit (in-sample)"  # trained it, predicted by the final model: optimistic


def accuracy_error(files: RunFiles, search: SearchRecord | None = None) -> dict[str, Any] | None:
    """The accuracy predictor's quality in top-1 points, with n: held-out (`held_*`: against the
    search's test-split checks, subnets it was not fitted on), out-of-fold and training-fit errors.
    From search.json's report, else the predictor file; None without metrics.
    Candidates carry a `name` that tells two of one kind apart (their settings)."""
    metrics = search.accuracy_predictor.metrics if search else None
    kind = search.accuracy_predictor.kind if search else None
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
    cands = [dict(c) for c in metrics.get("candidates") or []]
    names = stats.distinct_names([c.get("name") or c.get("kind") or "?" for c in cands],
                                 [c.get("settings") for c in cands])
    for c, name in zip(cands, names):
        c["name"] = name
    held = (search.held_out_accuracy if search else None) or {}
    return {"kind": kind or (metrics.get("chosen") or {}).get("name"), "folds": metrics.get("folds"),
            "held_mae": held.get("mae"), "held_bias": held.get("bias"), "held_tau": held.get("kendall_tau"),
            "held_n": held.get("n"),
            "oof_mae": oof.get("mae"), "oof_rmse": oof.get("rmse"), "oof_tau": oof.get("kendall_tau"),
            "oof_n": oof.get("n"), "within_1_sigma": oof.get("within_1_sigma"),
            "train_mae": train.get("mae"), "train_tau": train.get("kendall_tau"), "train_n": train.get("n"),
            "learning_curve": metrics.get("learning_curve") or [], "candidates": cands}


def band_mae(acc: dict[str, Any] | None) -> tuple[float | None, str]:
    """(the top-1 error the front's band is drawn with, what it is): the held-out MAE of the
    search's test-split checks where it made them, else the out-of-fold MAE."""
    if not acc:
        return None, "unknown"
    if acc.get("held_mae") is not None:
        return acc["held_mae"], f"held-out MAE on the search's {acc['held_n']} test-split checks"
    if acc.get("oof_mae") is not None:
        return acc["oof_mae"], f"{acc.get('folds')}-fold out-of-fold MAE, n={acc.get('oof_n')}"
    return None, "unknown"


def fitted_ids(meta: PredictorMeta | None) -> set[str] | None:
    """The subnet ids a latency predictor was fitted on (its file records them), or None for a
    predictor written before it did."""
    ids = meta.notes.fitted_on if meta is not None else None
    return None if ids is None else set(ids)


def split_pairs(pairs: pd.DataFrame, fitted: set[str] | None) -> pd.DataFrame:
    """Label each measured subnet `out-of-fold` (the predictor was fitted on it) or `held-out`
    (not among the ids it was fitted on: measured afterwards by a search's verification or an
    export). Decided by the content of the predictor file, never by file times, so a copied run
    (cp -r, rsync, git) shows the same figures; a predictor that records no ids has no held-out points."""
    df = pairs.copy()
    if df.empty:
        return df
    if fitted is None:
        df["split"] = OUT_OF_FOLD
        return df
    df["split"] = np.where(df["key"].astype(str).isin(fitted), OUT_OF_FOLD, HELD_OUT)
    return df


def _metrics_row(label: str, predicted: pd.Series, measured: pd.Series) -> dict[str, Any]:
    n = len(predicted)
    p, m = predicted.to_numpy(float), measured.to_numpy(float)
    return {"points": label, "n": n, "within ±10 %": 100 * metrics.within(p, m, 0.10) if n else None,
            "mean |error| %": metrics.mape(p, m) if n else None,
            "Kendall τ": metrics.kendall_tau(p, m) if n >= 3 else None}


def pair_metrics(pairs: pd.DataFrame) -> pd.DataFrame:
    """n, share within ±10 %, mean abs error %, Kendall tau (None below 3 points) of the held-out
    points, of the out-of-fold predictions and (optimistic) of the in-sample fit (`fit_ms`)."""
    rows = []
    for split in (HELD_OUT, OUT_OF_FOLD):
        df = pairs[pairs["split"] == split] if not pairs.empty else pairs
        rows.append(_metrics_row(split, df.get("predicted_ms", pd.Series(dtype=float)),
                                 df.get("measured_ms", pd.Series(dtype=float))))
    if "fit_ms" in pairs.columns:
        df = pairs[pairs["split"] != HELD_OUT]
        rows.append(_metrics_row(IN_SAMPLE, df["fit_ms"], df["measured_ms"]))
    return pd.DataFrame(rows)


def predictor_meta(files: RunFiles, device: str) -> PredictorMeta | None:
    """The latency predictor file's `meta` (its fit report under ``cv``), None when unreadable."""
    try:
        return PredictorMeta.from_dict(json.loads(files.latency_predictor(device).read_text()).get("meta") or {})
    except (OSError, json.JSONDecodeError, AttributeError, HwnasError):
        return None


def _out_of_fold(predictor, m: np.ndarray, y: np.ndarray, cv: FitReport) -> np.ndarray | None:
    """The fit's own cross-validation predictions (same folds and seed), or None when they cannot
    be recomputed (too few rows, a predictor kind that cannot be refitted here)."""
    from hwnas.latency.select import cross_val_predict

    if len(y) < 3:
        return None
    try:
        return np.asarray(cross_val_predict(predictor, m, y, cv.folds, cv.seed), float)
    except Exception:  # noqa: BLE001 - the page falls back to the in-sample fit, and says so
        return None


def latency_quality(files: RunFiles, device: str) -> dict[str, Any]:
    """Measured vs predicted latency of the device's measured subnets: held-out points (measured
    after the fit) predicted by the fitted predictor, and the subnets it was fitted on predicted
    out-of-fold (the fit's own cross-validation, recomputed); their metrics, and the fit's report."""
    path = files.latency_predictor(device)
    df = load_measurements(files)
    if df.empty or not path.exists():
        return {"pairs": pd.DataFrame()}
    df = df[(df["device"] == device) & (df["kind"] == "subnet")]
    if df.empty:
        return {"pairs": df}
    from hwnas.latency import load_predictor

    predictor = load_predictor(path)
    meta = predictor.meta
    df = split_pairs(df, fitted_ids(meta))
    first = df.drop_duplicates("key")
    pairs = df.groupby("key", as_index=False, sort=False).agg(
        measured_ms=("corrected_ms", "median"), split=("split", "first"),
        measured_at=("measured_at", "min") if "measured_at" in df.columns else ("key", "first"),
        macs=("macs", "first"))
    codes = arch_codes(files, first)
    pairs["fit_ms"] = np.asarray(predictor.predict(codes), float)
    pairs["predicted_ms"] = pairs["fit_ms"]
    cv = meta.cv
    trained = (pairs["split"] == OUT_OF_FOLD).to_numpy()
    oof = _out_of_fold(predictor, codes[trained], pairs.loc[trained, "measured_ms"].to_numpy(float), cv)
    if oof is None:
        pairs.loc[trained, "split"] = IN_SAMPLE
    else:
        pairs.loc[trained, "predicted_ms"] = oof
    pairs["error_pct"] = 100 * (pairs["predicted_ms"] / pairs["measured_ms"] - 1)
    return {"pairs": pairs, "metrics": pair_metrics(pairs), "cv": cv, "n_train": meta.n_train,
            "chosen": cv.chosen, "out_of_fold": oof is not None}


def _gene_groups(space) -> dict[str, list[int]]:
    """Gene group -> its columns in a flat row (the resolution first, then each group's genes)."""
    groups, at = {"resolution (r)": [0]}, 1
    for g in space.family.gene_groups():
        groups[g.name] = list(range(at, at + g.count))
        at += g.count
    return groups


def _used_codes(space, codes: np.ndarray) -> np.ndarray:
    """The rows' codes with the genes that do not change the network (inactive) set to NaN."""
    out = codes.astype(np.float64)
    out[:, 1:][~space.family.active_mask(codes)] = np.nan
    return out


def gene_importance(files: RunFiles) -> pd.DataFrame:
    """Which gene groups drive measured top-1 (the accuracy table) and measured latency (each
    device's profiled subnets): Spearman ρ of the group's mean gene value with each, with n. A
    rank correlation of one group at a time: genes that move together share the credit."""
    space = run_space(files)
    groups = _gene_groups(space)
    out = pd.DataFrame({"gene group": list(groups), "genes": [len(c) for c in groups.values()]})
    targets = []
    acc = load_accuracy(files)
    if not acc.empty and "top1" in acc.columns:
        targets.append((f"top-1 (accuracy table, n={len(acc)})", acc, acc["top1"]))
    measured = load_measurements(files)
    if not measured.empty:
        subnets = measured[measured["kind"] == "subnet"]
        for device, rows in subnets.groupby("device"):
            median = rows.groupby("key", sort=False)["corrected_ms"].median()
            rows = rows.drop_duplicates("key").assign(corrected_ms=lambda d: d["key"].map(median))
            targets.append((f"latency on {device} (n={len(rows)})", rows, rows["corrected_ms"]))
    for name, rows, y in targets:
        rho = stats.gene_correlations(_used_codes(space, arch_codes(files, rows)), groups, y.to_numpy(float))
        out[f"ρ with {name}"] = out["gene group"].map(rho)
    return out
