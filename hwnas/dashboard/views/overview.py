"""Runs overview: headline cards, the pipeline's stages, exports and their flags."""

from __future__ import annotations


import pandas as pd
import streamlit as st

from hwnas.dashboard import data
from hwnas.dashboard.views.common import fmt_num


def page_overview(files: data.RunFiles) -> None:
    st.header(f"Run `{files.root.name}`")
    h = data.headline(files)
    best = h["best"] or {}
    acc = h["accuracy"] or {}
    exports = h["exports"]
    c = st.columns(4)
    c[0].metric("Device (searched)", h["device"] or "—")
    c[1].metric("Latency budget", fmt_num(h["budget_ms"], ".4g", " ms"))
    c[2].metric("Front size (predicted)", h["front_size"] if h["front_size"] is not None else "—")
    c[3].metric("Hypervolume (top-1 % × ms)", fmt_num(h["hypervolume"], ".4g"),
                help="Area dominated by the predicted front up to (0 %, budget); larger is better.")
    c = st.columns(4)
    c[0].metric("Best subnet", best.get("id") or "—",
                help="search.json's first pick: measured within budget when the search was verified.")
    c[1].metric("Best: top-1 predicted", fmt_num(best.get("top1_pred"), ".2f", " %"))
    c[2].metric("Best: top-1 measured (test)", fmt_num(best.get("measured_top1"), ".2f", " %"))
    c[3].metric("Accuracy predictor, held-out MAE",
                fmt_num(acc.get("oof_mae"), ".2f", " %") if acc else "—",
                help=f"{acc.get('folds')}-fold out-of-fold on {acc.get('oof_n')} subnets" if acc else None)
    n_ok = int((exports["status"] == "verified").sum()) if not exports.empty else 0
    c = st.columns(4)
    c[0].metric("Best: latency predicted", fmt_num(best.get("ms_pred"), ".3f", " ms"))
    c[1].metric("Best: latency measured", fmt_num(best.get("measured_ms"), ".3f", " ms"))
    c[2].metric("Exports (verified / all)", f"{n_ok} / {len(exports)}")
    c[3].metric(f"Search ({h['algo'] or '—'})", "verified" if h["verified"] else "not verified",
                help=f"search id {h['search_id']}")
    for _, e in exports.iterrows():
        if e["flags"] != "ok":
            st.warning(f"Export `{e['bundle']}`: {e['flags']}.")
    st.subheader("Pipeline")
    st.dataframe(pd.DataFrame(data.run_status(files)), hide_index=True, width="stretch")
    if not exports.empty:
        st.subheader("Exports")
        st.dataframe(exports.drop(columns=["path"]), hide_index=True, width="stretch")
