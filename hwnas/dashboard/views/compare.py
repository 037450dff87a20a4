"""Compare runs and devices: overlaid fronts, a summary table and a budget slider."""

from __future__ import annotations


import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import all_runs, show_missing


def page_compare(files: data.RunFiles) -> None:
    st.header("Compare runs and devices")
    runs = all_runs()
    options = []
    for run in runs:
        rf = data.RunFiles(run)
        devices = {p.stem.removeprefix("latency-") for p in rf.predictors.glob("latency-*.json")} \
            if rf.predictors.exists() else set()
        searched = data.searched_device(data.load_search(rf), data.load_pareto(rf))
        if rf.pareto.exists():
            options += [f"{run.name} · {d}" for d in sorted(devices | ({searched} if searched else set()))]
    if not options:
        show_missing("Pareto front to compare", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
        return
    by_name = {r.name: data.RunFiles(r) for r in runs}
    default = [o for o in options if o.split(" · ")[1] == (data.searched_device(
        data.load_search(by_name[o.split(" · ")[0]])) or "")] or options[:1]
    chosen = st.multiselect("Runs · devices (each front re-read on that device: its latency predictor there)",
                            options, default=default, key="compare_series")
    series = {}
    for o in chosen:
        run, device = o.split(" · ")
        df = data.front_on(by_name[run], device)
        if not df.empty:
            series[(run, device)] = (by_name[run], df)
    if not series:
        st.info("Pick at least one run · device with a Pareto front.")
        return
    all_ms = pd.concat([df["ms"] for _, df in series.values()])
    budgets = [data.budget_of(data.load_search(f), d) for (_, d), (f, _) in series.items()]
    start = next((b for b in budgets if b), float(all_ms.median()))
    lo, hi = float(all_ms.min()), float(max(all_ms.max(), start))
    budget = st.slider("Latency budget (ms): the best subnet under it is re-selected on every front",
                       min_value=round(lo, 4), max_value=round(hi * 1.05, 4), value=round(start, 4),
                       step=round(max((hi - lo) / 200, 1e-4), 4), format="%.4f", key="compare_budget")
    lines, picks = [], []
    for (run, device), (_, df) in series.items():
        f = df[df["on_front"]].assign(series=f"{run} · {device}")
        lines.append(f)
        best = data.best_under(f, budget)
        if best is not None:
            picks.append(best.to_frame().T.assign(series=f"{run} · {device}"))
    lines_df = pd.concat(lines)
    dom = data.tight_domain(list(lines_df["ms"]) + [budget])
    colour = alt.Color("series:N", title="run · device")
    x = alt.X("ms:Q", title="latency (ms, predicted on that device)", scale=alt.Scale(domain=dom, zero=False))
    yy = alt.Y("top1_pred:Q", title="top-1 (%, predicted)", scale=alt.Scale(zero=False))
    tip = ["series:N", "id:N", alt.Tooltip("top1_pred:Q", format=".2f", title="top-1 predicted (%)"),
           alt.Tooltip("ms:Q", format=".3f", title="latency predicted (ms)"),
           alt.Tooltip("measured:Q", format=".3f", title="latency measured (ms)"),
           alt.Tooltip("measured_top1:Q", format=".2f", title="top-1 measured (%)")]
    layers = [alt.Chart(lines_df).mark_line(interpolate="step-after", point=True, clip=True).encode(
        x=x, y=yy, color=colour, tooltip=tip),
        alt.Chart(pd.DataFrame({"ms": [budget]})).mark_rule(strokeDash=[6, 4], color="black").encode(x="ms:Q")]
    if picks:
        p = pd.concat(picks)
        p["ms"], p["top1_pred"] = p["ms"].astype(float), p["top1_pred"].astype(float)
        layers.append(alt.Chart(p).mark_point(size=300, strokeWidth=3, clip=True).encode(
            x=x, y=yy, color=colour, tooltip=tip))
    st.altair_chart(charts.svg(alt.layer(*layers).properties(height=480)), width="stretch")
    st.caption("Lines: each front, predicted; rings: the best subnet under the budget (measured latency where "
               "measured, else predicted); dashed: the budget.")
    summary = data.compare_summary(series, budget)
    st.subheader("Summary at this budget")
    st.dataframe(summary, hide_index=True, width="stretch")
