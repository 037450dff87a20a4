"""`pareto.png`: the predicted front, the budget, what the device measured, and reference models."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from hwnas.fileio import atomic_path

__all__ = ["plot_front", "reference_models"]


def plot_front(path: str | Path, front, *, device: str, budget_ms: float, explored=None,
               references: Sequence[tuple[str, float]] = (), title: str = "",
               baselines: Sequence[tuple[str, float, float]] = (), memory_axis: bool = False,
               ram_limit_kb: float | None = None) -> Path:
    """Write the plot atomically. `front`: DataFrame with ms_pred, top1_pred and, where measured,
    measured_ms; `explored`: optional (ms, top1) arrays of every scored feasible subnet;
    `references`: (name, measured ms) of reference models on the device (their accuracy on this
    task is unknown, so they are marked on the latency axis); `baselines`: (name, measured ms,
    test top-1) of hand-designed networks trained on this task, drawn as measured points.
    `memory_axis`: a second panel, top-1 against the RAM arena (``ram_kb``; measured on the
    artifact where `measured_ram_kb` is), with `ram_limit_kb` marked."""
    # a bare Agg figure: pyplot's import (backend selection, figure manager) cost more than the
    # drawing itself, and a file needs neither
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    memory_axis = memory_axis and "ram_kb" in front.columns
    fig = Figure(figsize=(13, 5) if memory_axis else (7.5, 5), dpi=120)
    FigureCanvasAgg(fig)
    ax, mem = fig.subplots(1, 2) if memory_axis else (fig.subplots(), None)
    try:
        if mem is not None:
            _memory_panel(mem, front, ram_limit_kb)
        if explored is not None and len(explored[0]):
            ax.scatter(explored[0], explored[1], s=4, c="0.8", lw=0, label="explored (predicted)",
                       rasterized=True)
        f = front.sort_values("ms_pred")
        ax.plot(f["ms_pred"], f["top1_pred"], "-o", ms=3.5, color="tab:blue", label="Pareto front (predicted)")
        done = f[f["measured_ms"].notna()] if "measured_ms" in f else f.iloc[:0]
        if len(done):
            ok = done["within_budget"].astype(bool).to_numpy()
            for x0, x1, y in zip(done["ms_pred"], done["measured_ms"], done["top1_pred"]):
                ax.annotate("", xy=(x1, y), xytext=(x0, y),
                            arrowprops={"arrowstyle": "->", "color": "0.4", "lw": 0.8})
            ax.scatter(done["ms_pred"], done["top1_pred"], s=60, facecolors="none", edgecolors="k",
                       zorder=3, label="verified: predicted")
            ax.scatter(done["measured_ms"][ok], done["top1_pred"][ok], s=40, c="tab:green", zorder=4,
                       label="verified: measured, within budget")
            if (~ok).any():
                ax.scatter(done["measured_ms"][~ok], done["top1_pred"][~ok], s=50, c="tab:red",
                           marker="x", zorder=4, label="verified: measured, over budget (dropped)")
        if "measured_top1" in f and f["measured_top1"].notna().any():
            acc = f[f["measured_top1"].notna()]
            x = acc["measured_ms"].fillna(acc["ms_pred"]) if "measured_ms" in acc else acc["ms_pred"]
            ax.scatter(x, acc["measured_top1"], s=30, marker="D", c="tab:orange", zorder=5,
                       label="top-1 measured (test split)")
        ax.axvline(budget_ms, color="tab:red", ls="--", lw=1.2, label=f"budget {budget_ms:.4g} ms")
        for i, (name, ms) in enumerate(references):
            ax.axvline(ms, color="tab:purple", ls=":", lw=1)
            ax.text(ms, 1.0 - 0.05 * (i % 4), f" {name}", transform=ax.get_xaxis_transform(),
                    fontsize=7, color="tab:purple", va="top", rotation=0)
        if references:
            ax.plot([], [], color="tab:purple", ls=":", label="reference models (measured ms)")
        if baselines:
            ax.scatter([b[1] for b in baselines], [b[2] for b in baselines], s=70, marker="*", c="tab:purple",
                       zorder=6, label="baselines trained alone: measured ms, test top-1")
            # names stacked in the upper left (above a front nothing is that fast and accurate), each
            # with a thin line to its star: long timm names a few hundredths of a ms apart overlap
            for k, (name, ms, top1) in enumerate(sorted(baselines, key=lambda b: b[1])):
                ax.annotate(name, (ms, top1), xytext=(0.02, 0.97 - 0.045 * k), textcoords="axes fraction",
                            fontsize=6.5, color="tab:purple", va="top",
                            arrowprops={"arrowstyle": "-", "color": "tab:purple", "lw": 0.4, "alpha": 0.6})
        ax.set_xlabel(f"latency on {device} (ms)")
        ax.set_ylabel("top-1 (%)")
        ax.set_title(title or f"accuracy vs latency on {device}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png")
    finally:
        fig.clear()
    return Path(path)


def _memory_panel(ax, front, limit: float | None) -> None:
    """Top-1 against the RAM arena: predicted for every front point, measured where the search
    checked the artifact."""
    f = front.sort_values("ram_kb")
    ax.scatter(f["ram_kb"], f["top1_pred"], s=14, color="tab:blue", label="front (predicted arena)")
    if "measured_ram_kb" in f and f["measured_ram_kb"].notna().any():
        m = f[f["measured_ram_kb"].notna()]
        y = m["measured_top1"].fillna(m["top1_pred"]) if "measured_top1" in m else m["top1_pred"]
        ax.scatter(m["measured_ram_kb"], y, s=40, marker="D", c="tab:orange", zorder=3,
                   label="arena measured on the artifact")
    if limit is not None:
        ax.axvline(limit, color="tab:red", ls="--", lw=1.2, label=f"RAM limit {limit:.4g} kB")
    ax.set_xlabel("activation arena (kB, batch 1)")
    ax.set_ylabel("top-1 (%)")
    ax.set_title("accuracy vs RAM")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def reference_models(run_dir: str | Path, device: str, leave_out: Sequence[str] = ()) -> list[tuple[str, float]]:
    """(name, corrected ms) of the reference models measured on `device` in the run's store, but
    the keys in `leave_out` (the baselines, drawn as points)."""
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run_dir, device=device, kind="model")
    if df.empty:
        return []
    return [(str(k).removeprefix("timm:"), float(ms)) for k, ms in zip(df["key"], df["corrected_ms"])
            if np.isfinite(ms) and str(k) not in leave_out]
