"""Runs overview: every run under the folder with its settings, then this run's headline cards (the
recommended subnet with n and intervals), its pipeline stages, exports and their flags."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from hwnas.dashboard import data, stats, summary
from hwnas.dashboard.views.common import all_runs, fmt_num, md, md_code, metrics, table, trust_warnings


def page_overview(files: data.RunFiles) -> None:
    st.header(f"Run `{files.root.name}`")
    h = summary.headline(files)
    _search_cards(h)
    trust_warnings(files, data.load_search(files))
    _recommended_cards(h)
    for _, e in h["exports"].iterrows():
        if e["flags"] != "ok":
            st.warning(f"Export {md_code(e['bundle'])}: {md(e['flags'])}.")
    st.subheader("Pipeline")
    table(pd.DataFrame(data.run_status(files)))
    if not h["exports"].empty:
        st.subheader("Exports")
        table(h["exports"].drop(columns=["path"]))
    runs = all_runs()
    st.subheader(f"All runs ({len(runs)})")
    table(summary.runs_table(runs), column_config={"path": st.column_config.TextColumn(width="small")})


def _search_cards(h: dict) -> None:
    metrics(("Device (searched)", h["device"] or "—"), ("Latency budget", fmt_num(h["budget_ms"], ".4g", " ms")),
            ("Front size", h["front_size"] if h["front_size"] is not None else "—"),
            ("Hypervolume (top-1 % × ms)", fmt_num(h["hypervolume"], ".4g"), stats.HYPERVOLUME_TEXT))
    extra = ""
    if len(h["search_objectives"]) > 2:
        extra = (f" The search had {len(h['search_objectives'])} objectives ({', '.join(h['search_objectives'])}); "
                 "this is its two-objective (top-1, latency) part, which Compare shows too.")
    st.caption(f"Hypervolume: the {stats.HYPERVOLUME_TEXT}.{extra}")


def _recommended_cards(h: dict) -> None:
    best = h["best"] or {}
    acc = h["accuracy"] or {}
    exports = h["exports_state"]
    metrics(("★ Recommended subnet", best.get("id") or "none",
             "The search's pick (search.json's first `best`): measured within the budget when the search verified. "
             "Every page highlights this subnet."),
            ("Accuracy MAE held-out / out-of-fold",
             (fmt_num(acc.get("held_mae"), ".2f") + " / " + fmt_num(acc.get("oof_mae"), ".2f", " points")) if acc else "—",
             (f"Held-out: predicted vs test top-1 of the {acc.get('held_n')} subnets the search evaluated (bias "
              f"{fmt_num(acc.get('held_bias'), '+.2f')}); out-of-fold: the predictor's {acc.get('folds')}-fold error "
              f"on {acc.get('oof_n')} subnets of its table; top-1 points") if acc else None),
            ("Exports (current / all)", f"{exports['current']} / {exports['total']}",
             "Current: verified bundles for the searched device of a subnet in the current pareto.csv."),
            (f"Search ({h['algo'] or '—'})", "verified" if h["verified"] else "not verified",
             f"search id {h['search_id']}"))
    if best:
        st.markdown(f"**★ Recommended {md_code(best['id'])}: predicted vs measured**")
        table(summary.recommended_table(best, h["device"]), width="content")
    if exports["total"] and exports["status"] != "done":
        st.info(f"Exports: {md(exports['text'])}.")
