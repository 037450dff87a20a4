"""The overview's and Compare's summaries: the recommended subnet with its numbers and intervals,
the hypervolume, exports, a table of runs, and what each front would pick at another budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hwnas.dashboard import data
from hwnas.errors import HwnasError
from hwnas.dashboard.quality import accuracy_error, predictor_meta
from hwnas.search.record import RecordedSettings

__all__ = ["headline", "recommended_table", "pick_under", "compare_summary", "runs_table", "fmt_interval"]

NO_PICK = "no subnet of this front fits the budget"


def fmt_interval(lo: Any, hi: Any, fmt: str = ".2f") -> str:
    """"lo–hi" or "" when either end is unknown."""
    try:
        if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
            return ""
    except TypeError:
        return ""
    return f"{lo:{fmt}}–{hi:{fmt}}"


def headline(files: data.RunFiles) -> dict[str, Any]:
    """The overview's cards: device, budget, the recommended subnet (predicted and measured, with
    n and intervals), hypervolume, accuracy predictor error, exports and their state."""
    front = data.load_front(files)
    search = front.search
    settings = search.settings if search else RecordedSettings()
    device = front.device
    exports = data.load_exports(files, search=search)
    out: dict[str, Any] = {"device": device, "budget_ms": front.budget, "search_id": search.search_id if search else None,
                           "algo": settings.algo, "verified": bool(settings.verify),
                           "hypervolume": front.hypervolume(),
                           "search_objectives": search.metrics.get("objectives") or [] if search else [],
                           "front_size": int(front.df["on_front"].sum()) if not front.df.empty else None,
                           "objective": front.objective_text(), "best": None,
                           "accuracy": accuracy_error(files, search), "exports": exports,
                           "exports_state": data.exports_state(exports, data.run_device(files, search))}
    pick, row = search.best[0] if search and search.best else None, front.pick_row
    if pick:
        best = {"id": pick.id, "top1_pred": pick.top1_pred, "top1_std": pick.top1_std,
                "measured_top1": pick.measured_top1, "ms_pred": pick.ms_pred.get(device),
                "measured_ms": pick.measured_ms.get(device), "verified": pick.verified, "top1_n": None,
                "top1_ci": "", "ms_ci": "", "ucb_ms": None, "describe": pick.describe}
        if row is not None:
            best.update(top1_n=None if pd.isna(row["top1_n"]) else int(row["top1_n"]),
                        top1_ci=fmt_interval(row["top1_lo"], row["top1_hi"]),
                        ms_ci=fmt_interval(row["ms_lo"], row["ms_hi"], ".3f"),
                        ucb_ms=None if pd.isna(row["ucb_ms"]) else float(row["ucb_ms"]))
        out["best"] = best
    return out


def recommended_table(best: dict[str, Any], device: str | None) -> pd.DataFrame:
    """The recommended subnet's top-1 and latency, predicted and measured, with the measurement's
    95 % interval and what it rests on (test images; standard error and acceptance bound)."""
    n = best.get("top1_n")
    ucb = best.get("ucb_ms")
    return pd.DataFrame({
        "": ["top-1 (%)", f"latency on {device or 'the device'} (ms)"],
        "predicted": [_or(best.get("top1_pred"), "—", ".2f") + (f" ± {best['top1_std']:.2f} (σ)"
                                                              if best.get("top1_std") is not None else ""),
                      _or(best.get("ms_pred"), "—", ".3f")],
        "measured": [_or(best.get("measured_top1"), "not measured", ".2f"),
                     _or(best.get("measured_ms"), "not measured", ".3f")],
        "95 % interval": [best.get("top1_ci") or "—", best.get("ms_ci") or "—"],
        "from": [f"{n} test images (Wilson interval)" if n else "test images: unknown",
                 ("±2 standard errors" if best.get("ms_ci") else "one round: no standard error")
                 + (f"; accepted on its bound {ucb:.3f} ms" if ucb else "")]})


def pick_under(front: data.RunFront, budget: float, run_budget_step: float = 0.0
               ) -> tuple[pd.Series | None, str]:
    """(the subnet this front recommends at `budget`, how it was chosen).

    At the search's own budget (within `run_budget_step`): the search's pick, so Compare names
    what the overview names. Elsewhere, a what-if with the search's evidence: the best measured
    top-1 among subnets whose measured latency (its acceptance bound when known) fits; without
    one, the best by the search's objective among those predicted to fit."""
    df = front.df
    if df.empty:
        return None, NO_PICK
    at_run_budget = front.budget is not None and abs(budget - front.budget) <= max(run_budget_step, 1e-12)
    if at_run_budget and front.pick_row is not None and front.device == front.searched:
        return front.pick_row, "the search's pick"
    bound = df["ucb_ms"].fillna(df["measured"])
    measured = df[df["measured_top1"].notna() & bound.notna() & (bound <= budget)]
    if not measured.empty:
        return measured.sort_values(["measured_top1", "measured"], ascending=[False, True]).iloc[0], \
            "what-if: best measured top-1 measured within this budget"
    fit = df[df["on_front"] & (df["measured"].fillna(df["ms"]) <= budget)]
    if fit.empty:
        return None, NO_PICK
    return fit.sort_values(["objective", "ms"], ascending=[False, True]).iloc[0], \
        "what-if: best predicted (not measured) within this budget"


def _or(value: Any, text: str, fmt: str = ".4g") -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return text
    return f"{value:{fmt}}"


def compare_summary(series: dict[tuple[str, str], data.RunFront], budget: float, step: float = 0.0
                    ) -> pd.DataFrame:
    """One row per (run, device), as text (a message where there is no number): front size, the
    hypervolume at `budget` (the overview's number at the run's own budget), the recommended
    subnet at it and how it was chosen, its numbers, and the predictors' held-out quality."""
    rows = []
    for (run, device), front in series.items():
        df = front.df
        pick, how = pick_under(front, budget, step)
        acc = accuracy_error(front.files, front.search) or {}
        meta = predictor_meta(front.files, device)
        cv = meta.cv.chosen_metrics if meta is not None else {}
        measured = df[df["measured_top1"].notna() & df["measured"].notna() & (df["measured"] <= budget)]
        rows.append({
            "run": run, "device": device, "front size": str(int(df["on_front"].sum())),
            "hypervolume at this budget": _or(front.hypervolume(budget), "—"),
            "recommended at this budget": NO_PICK if pick is None else str(pick["id"]),
            "how": how,
            "its top-1 %": "—" if pick is None else (
                f"{pick['measured_top1']:.2f} measured" if pd.notna(pick["measured_top1"])
                else f"{pick['objective']:.2f} predicted − σ"),
            "its latency ms": "—" if pick is None else (
                f"{pick['measured']:.4g} measured" if pd.notna(pick["measured"]) else f"{pick['ms']:.4g} predicted"),
            "best measured top-1 % within budget": _or(measured["measured_top1"].max() if not measured.empty
                                                       else None, "none measured within budget", ".2f"),
            "accuracy MAE, points (held-out test checks)": _or(acc.get("held_mae"), "no test-split checks", ".2f"),
            "accuracy MAE, points (out-of-fold)": _or(acc.get("oof_mae"), "no accuracy predictor", ".2f"),
            "latency within ±10 % (out-of-fold)": _or(100 * float(cv["within_10"]) if "within_10" in cv else None,
                                                      "no cross-validation", ".0f")})
    return pd.DataFrame(rows)


def runs_table(runs: list[Path]) -> pd.DataFrame:
    """One row per run: its supernet and data, what was searched with which settings, and the
    recommended subnet's measured numbers."""
    rows = []
    for root in runs:
        files = data.RunFiles(root)
        try:
            front = data.load_front(files)
        except HwnasError as err:  # one damaged run is said on its row, the others still listed
            rows.append({"run": root.name, "supernet": f"unreadable: {err}", "path": str(root)})
            continue
        settings = front.search.settings if front.search else None
        space = data.run_space(files)
        try:
            from hwnas.run import open_run

            cfg = open_run(root, create=False)
            supernet, dataset = cfg.supernet or "shipped", (cfg.data or {}).get("name") or "the supernet's"
        except Exception:  # noqa: BLE001 - a broken config is reported on that run's overview
            supernet, dataset = "config.yaml unreadable", "—"
        row = front.pick_row
        rows.append({
            "run": root.name, "family": space.family.name, "supernet": str(supernet), "data": dataset,
            "device": front.device or "not searched", "budget ms": _or(front.budget, "—"),
            "algorithm": (settings.mode or settings.algo or "—") if settings else "—",
            "objectives": ", ".join(settings.objectives) or "—" if settings else "—",
            "accuracy risk (σ)": _or(settings.accuracy_risk, "—", "g") if settings else "—",
            "precision": settings.precision if settings else "—",
            "verified": ("yes" if settings.verify else "no") if settings else "—",
            "searched at": (front.search.created_at or "—") if front.search else "—",
            "front size": str(int(front.df["on_front"].sum())) if not front.df.empty else "—",
            "hypervolume": _or(front.hypervolume(), "—"),
            "recommended": front.pick_id or "—",
            "its top-1 % (measured)": "—" if row is None else _or(row["measured_top1"], "not measured", ".2f"),
            "its latency ms (measured)": "—" if row is None else _or(row["measured"], "not measured"),
            "path": str(root)})
    return pd.DataFrame(rows)
