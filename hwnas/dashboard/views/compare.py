"""Compare runs and devices: overlaid fronts, a budget slider and a summary at that budget."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data, summary
from hwnas.dashboard.views.common import all_runs, md, show_missing, table, trust_warnings
from hwnas.errors import HwnasError

SEP = " · "


def _options(runs) -> list[str]:
    """"run · device" for every run with a front: its searched device and every device it has a
    latency predictor for."""
    options = []
    for run in runs:
        rf = data.RunFiles(run)
        if not rf.pareto.exists():
            continue
        devices = {p.stem.removeprefix("latency-") for p in rf.predictors.glob("latency-*.json")} \
            if rf.predictors.exists() else set()
        try:
            searched = data.searched_device(data.load_search(rf), data.load_pareto(rf))
        except HwnasError:  # a damaged run: its own pages say why; the others stay comparable
            continue
        options += [f"{run.name}{SEP}{d}" for d in sorted(devices | ({searched} if searched else set()))]
    return options


def slider_range(fronts: dict[tuple[str, str], data.RunFront]) -> tuple[float, float, float, float]:
    """(min, max, start, step) of the budget slider: from the fastest front member to past the
    slowest front member or measurement and past every run's own budget (rounded outwards, so the
    maximum is never below a budget), starting at the first run's budget."""
    ms = pd.concat([f.df.loc[f.df["on_front"], "ms"] for f in fronts.values()]
                   + [f.df["measured"].dropna() for f in fronts.values()])
    budgets = [f.budget for f in fronts.values() if f.budget]
    hi_value = max([float(ms.max())] + budgets) * 1.05
    step = 10 ** math.floor(math.log10(max(hi_value - float(ms.min()), 1e-6) / 200))
    lo, hi = math.floor(float(ms.min()) / step) * step, math.ceil(hi_value / step) * step
    start = budgets[0] if budgets else float(ms.median())
    return lo, hi, min(max(round(start / step) * step, lo), hi), step


def page_compare(files: data.RunFiles) -> None:
    st.header("Compare runs and devices")
    runs = all_runs()
    options = _options(runs)
    if not options:
        show_missing("Pareto front to compare", f"hwnas search --run {files.root} --device "
                                                f"{data.run_device(files)} --latency-ms X --pareto")
        return
    by_name = {r.name: data.RunFiles(r) for r in runs}
    default = [o for o in options if o.split(SEP)[1] == (data.searched_device(
        data.load_search(by_name[o.split(SEP)[0]])) or "")] or options[:1]
    chosen = st.multiselect("Runs · devices (each front re-read on that device: its latency predictor there)",
                            options, default=default, key="compare_series")
    fronts = {}
    for o in chosen:
        run, device = o.split(SEP)
        try:
            front = data.load_front(by_name[run], device)
        except HwnasError as err:
            st.warning(f"{md(run)} · {md(device)} left out: {md(err)}")
            continue
        if not front.df.empty:
            fronts[(run, device)] = front
    if not fronts:
        st.info("Pick at least one run · device with a Pareto front.")
        return
    for run, device in fronts:
        trust_warnings(by_name[run], fronts[(run, device)].search, [device])
    lo, hi, start, step = slider_range(fronts)
    budget = st.slider("Latency budget (ms): the recommended subnet at it is re-selected on every front",
                       min_value=lo, max_value=hi, value=start, step=step, format="%.4f", key="compare_budget")
    st.altair_chart(charts.svg(_chart(fronts, budget, [lo, hi], step / 2)), width="stretch")
    st.caption("Lines: each front as its search ranked it (predicted top-1 − σ); rings: the subnet each front "
               "recommends at this budget (at a run's own budget the search's pick; elsewhere a what-if from "
               "its measurements, else its predictions); dashed: the budget. The x axis spans the slider's range.")
    st.subheader("Summary at this budget")
    table(summary.compare_summary(fronts, budget, step / 2))


def _chart(fronts: dict[tuple[str, str], data.RunFront], budget: float, x_dom: list[float], tolerance: float
           ) -> alt.LayerChart:
    """Every front as a step line (one distinct hue per series) with the subnet it recommends at
    `budget` ringed (a run's own budget within `tolerance`: its search's pick); axes fixed to the
    slider's range and to every point and ring."""
    names = [f"{run}{SEP}{device}" for run, device in fronts]
    colour = alt.Color("series:N", title="run · device", legend=charts.legend(),
                       scale=alt.Scale(domain=names, range=charts.SERIES_COLOURS[:len(names)] or None))
    lines, picks = [], []
    for (run, device), front in fronts.items():
        name = f"{run}{SEP}{device}"
        lines.append(front.df[front.df["on_front"]].assign(series=name))
        row, _ = summary.pick_under(front, budget, tolerance)
        if row is not None:
            at = row.copy()
            at["x"] = row["measured"] if pd.notna(row["measured"]) else row["ms"]
            at["y"] = row["measured_top1"] if pd.notna(row["measured_top1"]) else row["objective"]
            picks.append(at.to_frame().T.assign(series=name))
    lines_df = pd.concat(lines)
    picks_df = pd.concat(picks) if picks else pd.DataFrame(columns=["x", "y", "series", "id"])
    for col in ("x", "y"):
        picks_df[col] = picks_df[col].astype(float)
    every = pd.concat([f.df for f in fronts.values()])  # any ring sits on one of these: y fixed while dragging
    y_dom = data.tight_domain(list(every["objective"]) + list(every["measured_top1"]), pad=0.12)
    x = lambda f: alt.X(f, title="latency ms (predicted on that device; rings: measured if measured)",  # noqa: E731
                        scale=alt.Scale(domain=x_dom, zero=False, nice=False))
    y = lambda f: alt.Y(f, title="top-1 % (objective; rings: measured if measured)",  # noqa: E731
                        scale=alt.Scale(domain=y_dom, zero=False, nice=False))
    tip = ["series:N", "id:N", alt.Tooltip("objective:Q", format=".2f", title="top-1 objective (%)"),
           alt.Tooltip("ms:Q", format=".3f", title="latency predicted (ms)")]
    layers = [alt.Chart(lines_df).mark_line(interpolate="step-after", point=True, clip=True).encode(
        x=x("ms:Q"), y=y("objective:Q"), color=colour, tooltip=tip),
        alt.Chart(pd.DataFrame({"ms": [budget]})).mark_rule(strokeDash=[6, 4], color="black").encode(x=x("ms:Q"))]
    if not picks_df.empty:
        layers.append(alt.Chart(picks_df).mark_point(size=300, strokeWidth=3, clip=False).encode(
            x=x("x:Q"), y=y("y:Q"), color=colour,
            tooltip=["series:N", "id:N", alt.Tooltip("y:Q", format=".2f", title="top-1 (%)"),
                     alt.Tooltip("x:Q", format=".3f", title="latency (ms)")]))
    return alt.layer(*layers).properties(height=charts.with_legend(420, len(names)))
