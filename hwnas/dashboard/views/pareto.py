"""The Pareto front: predicted and measured, explored subnets, budget, references."""

from __future__ import annotations


import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import cached_explored, fmt_num, show_missing


def page_pareto(files: data.RunFiles) -> None:
    st.header("Pareto front: accuracy vs. latency")
    front = data.load_pareto(files)
    if front.empty:
        show_missing("Pareto front", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
        return
    if "top1_pred" not in front.columns or "ms_pred" not in front.columns:
        st.error(f"{files.pareto} lacks the top1_pred / ms_pred columns; rerun `hwnas search`.")
        return
    search = data.load_search(files)
    device = data.searched_device(search, front) or "device"
    budget = data.budget_of(search, device)
    df = data.front_frame(front, device, budget)
    acc = data.accuracy_error(files, search)
    o = st.columns(3)
    show_explored = o[0].checkbox("explored subnets (predicted)", value=True)
    show_refs = o[1].checkbox("reference models", value=True)
    show_others = o[2].checkbox("candidates off the front", value=True)
    explored = cached_explored(str(files.root), device, files.mtimes()) if show_explored else None
    refs = data.references(files, device) if show_refs else None
    chart, drawn = charts.pareto_chart(df, device=device, budget=budget, explored=explored, refs=refs,
                                       acc_error=acc, show_candidates=show_others)
    event = st.altair_chart(charts.svg(chart), width="stretch", on_select="rerun", selection_mode=charts.PICK,
                            key="pareto_chart")
    picked = ((event or {}).get("selection") or {}).get(charts.PICK) or []
    if picked and picked[0].get("id"):
        st.session_state["goto"] = ("Subnet detail", picked[0]["id"])
        st.rerun()
    n_meas = int(df["measured"].notna().sum())
    n_top1 = int(df["measured_top1"].notna().sum())
    mae = f"±{acc['oof_mae']:.2f} % ({acc['folds']}-fold out-of-fold MAE, n={acc['oof_n']})" if acc else "unknown"
    searched = explored is not None and not explored.empty and explored["source"].iloc[0] == "search"
    grey = ("subnets the search scored (predicted)" if searched
            else "a random sample of the space scored by the predictors (this search kept no explored.csv)")
    st.caption(f"{int(df['on_front'].sum())} subnets on the front, {n_meas} with measured latency, {n_top1} with "
               f"measured top-1 (test split). Line and dots: predicted; grey: {grey}; diamonds: the same subnet as measured, joined to its prediction "
               f"(measured latency and measured top-1 where measured, else the predicted value); dashed: the "
               f"{fmt_num(budget, '.4g')} ms budget; dotted: reference models (latency only, accuracy unknown); "
               f"band: the accuracy predictor's held-out error {mae}. Click a point to open the subnet.")
    refs_df = refs if refs is not None else pd.DataFrame()
    if not refs_df.empty:
        st.caption("Reference models: " + ", ".join(f"{r.name} {r.ms:.3f} ms (measured)"
                                                     for r in refs_df.itertuples()))
    keep = ["id", "on_front", "top1_pred", "top1_std", "measured_top1", "ms", "measured", "budget_state",
            "macs", "params", "arch"]
    table = df[[c for c in keep if c in df.columns]].rename(columns={
        "top1_pred": "top-1 predicted %", "top1_std": "± std predicted", "measured_top1": "top-1 measured (test) %",
        "ms": "latency predicted ms", "measured": "latency measured ms", "budget_state": "budget"})
    st.dataframe(table, hide_index=True, width="stretch")
