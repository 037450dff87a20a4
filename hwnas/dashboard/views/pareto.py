"""The Pareto front: what the search ranked on, measured points with their intervals, the
recommended subnet, explored subnets, budget, references, and a filterable table linked to the chart."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.quality import accuracy_error, band_mae
from hwnas.search.record import SearchRecord
from hwnas.dashboard.views.common import cached_explored, fmt_num, goto_subnet, md, show_missing, table, trust_warnings

Y_OPTIONS = {"search objective: predicted top-1 − σ (what the front is computed on)": "objective",
             "predicted top-1 ± σ (the predictor's mean)": "top1_pred"}
KINDS = ("on the front", "other candidates")
LAYERS = ("explored subnets", "reference models and baselines", "candidates off the front")
_PCT, _MS = st.column_config.NumberColumn(format="%.2f"), st.column_config.NumberColumn(format="%.3f")
COLUMNS = {"★": st.column_config.TextColumn(help="the search's pick: the subnet this run recommends"),
           "on front": st.column_config.CheckboxColumn(), "top-1 objective %": _PCT, "top-1 predicted %": _PCT,
           "σ predicted": _PCT, "top-1 measured (test) %": _PCT, "latency predicted ms": _MS,
           "latency measured ms": _MS, "MACs": st.column_config.NumberColumn(format="%d"),
           "params": st.column_config.NumberColumn(format="%d"),
           "test images": st.column_config.NumberColumn(format="%d")}


def subnet_table(df: pd.DataFrame) -> pd.DataFrame:
    """The table under the chart: one row per subnet, the recommendation first and starred."""
    out = pd.DataFrame({
        "★": df["pick"].map({True: "★", False: ""}), "id": df["id"],
        "on front": df["on_front"], "top-1 objective %": df["objective"], "top-1 predicted %": df["top1_pred"],
        "σ predicted": df["top1_std"], "top-1 measured (test) %": df["measured_top1"],
        "95 % interval": [f"{lo:.2f}–{hi:.2f}" if pd.notna(lo) else None
                          for lo, hi in zip(df["top1_lo"], df["top1_hi"])],
        "test images": df["top1_n"], "latency predicted ms": df["ms"], "latency measured ms": df["measured"],
        "±2 SE ms": [f"{lo:.3f}–{hi:.3f}" if pd.notna(lo) else None for lo, hi in zip(df["ms_lo"], df["ms_hi"])],
        "budget": df["budget_state"], "MACs": df.get("macs"), "params": df.get("params"), "arch": df["arch"]})
    return out.sort_values("★", ascending=False, kind="stable").reset_index(drop=True)


def filter_table(rows: pd.DataFrame, kinds: list[str], measured_only: bool, text: str) -> pd.DataFrame:
    """Rows of the checked kinds (on the front / other candidates), only measured ones when asked,
    and, when given, containing `text` in their id or arch."""
    keep = (rows["on front"] & ("on the front" in kinds)) | (~rows["on front"] & ("other candidates" in kinds))
    if measured_only:
        keep &= rows["top-1 measured (test) %"].notna() | rows["latency measured ms"].notna()
    if text:
        keep &= rows["id"].str.contains(text, case=False, regex=False) | \
            rows["arch"].astype(str).str.contains(text, case=False, regex=False)
    return rows[keep].reset_index(drop=True)


def page_pareto(files: data.RunFiles) -> None:
    st.header("Pareto front: accuracy vs. latency")
    front = data.load_front(files)
    df = front.df
    if df.empty:
        show_missing("Pareto front", f"hwnas search --run {files.root} --device {data.run_device(files)} "
                                     "--latency-ms X --pareto")
        return
    device = front.device or "device"
    trust_warnings(files, front.search, [device])
    acc = accuracy_error(files, front.search)
    st.markdown(f"**What is drawn.** {front.objective_text().capitalize()}: the front line is that ranking. "
                "Measured points sit at their measured coordinates with 95 % intervals.")
    y = Y_OPTIONS[st.radio("Top-1 shown", list(Y_OPTIONS), key="pareto_y")]
    layers = st.pills("Also draw", LAYERS, selection_mode="multi", default=list(LAYERS), key="pareto_layers")
    show_explored, show_refs, show_others = (name in (layers or []) for name in LAYERS)
    explored = cached_explored(str(files.root), device, files.mtimes()) if show_explored else None
    explored_note = _explored_note(explored, y)
    if explored is not None and y not in explored.columns:
        explored = None
    refs = data.references(files, device, front.search) if show_refs else None
    versus = data.baselines(front.search, device)
    chart_box = st.container()
    selected = _table(df)
    with chart_box:
        chart, _ = charts.pareto_chart(df, device=device, budget=front.budget, y=y, explored=explored, refs=refs,
                                       acc_error=acc, show_candidates=show_others, selected=selected,
                                       baselines=versus if show_refs else None)
        event = st.altair_chart(charts.svg(chart), width="stretch", on_select="rerun", selection_mode=charts.PICK,
                                key="pareto_chart")
        picked = ((event or {}).get("selection") or {}).get(charts.PICK) or []
        if picked and picked[0].get("id"):
            goto_subnet(picked[0]["id"])
        _caption(front, acc, explored_note, refs)
        _recommended(front)
        _baselines(versus, device)
    _memory(df, front.search)
    _history(front)


def _explored_note(explored: pd.DataFrame | None, y: str) -> str:
    if explored is None:
        return "explored subnets hidden"
    if explored.empty:
        return "no explored subnets (no explored.csv and no predictors)"
    if y not in explored.columns:
        return ("explored subnets are drawn only with “predicted top-1 ± σ” (explored.csv holds their "
                "prediction, not the search objective)")
    source = explored["source"].iloc[0]
    return ("grey: subnets the search scored" if source == "search"
            else "grey: a random sample of the space scored by the predictors (this search kept no explored.csv)")


def _caption(front: data.RunFront, acc: dict | None, explored_note: str, refs: pd.DataFrame | None) -> None:
    df = front.df
    band, what = band_mae(acc)
    mae = f"±{band:.2f} points ({what})" if band is not None else "unknown"
    if acc and acc.get("held_mae") is not None and acc.get("oof_mae") is not None:
        mae += f"; out-of-fold MAE {acc['oof_mae']:.2f} on {acc['oof_n']} subnets"
    st.caption(
        f"{int(df['on_front'].sum())} subnets on the front, {int(df['measured'].notna().sum())} with measured "
        f"latency, {int(df['measured_top1'].notna().sum())} with measured top-1 (test split). Blue: predicted; "
        "diamonds: top-1 and latency both measured (green within, red over the budget); orange squares: latency "
        "measured, top-1 predicted; brown triangles: top-1 measured, latency predicted; grey lines join a "
        "subnet's prediction to its measurement; black bars: 95 % intervals (top-1: Wilson over the test images; "
        "latency: ±2 standard errors); gold star: the search's pick; "
        f"dashed: the {fmt_num(front.budget, '.4g')} ms budget; dotted: reference models (latency only); band: the "
        f"accuracy predictor's error {mae}; {explored_note}. Click a point to open the subnet; select a row of "
        "the table to ring it.")
    if refs is not None and not refs.empty:
        st.caption("Reference models: " + ", ".join(f"{r.name} {r.ms:.3f} ms (measured)" for r in refs.itertuples()))


def _baselines(versus: pd.DataFrame, device: str) -> None:
    """The front against the hand-designed baselines, as search.json records it."""
    if versus.empty:
        return
    st.subheader("Against hand-designed baselines")
    beaten = int((versus["beaten_by"] != "none").sum())
    st.caption(f"Each baseline trained alone on this run's data (test top-1 on n images, latency measured on "
               f"{md(device)}): the fastest subnet this search measured at least as accurate on the test "
               f"split and, timed together with the baseline's network in one call, faster by the "
               f"verification margin. Beaten: {beaten} of {len(versus)}.")
    table(versus.rename(columns={"ms": "latency measured ms", "top1": "test top-1 %", "n_test": "test images",
                                 "beaten_by": "beaten by", "its_top1": "its test top-1 %",
                                 "its_ms": "its latency ms", "gain": "gain (points)",
                                 "ratio": "its latency / the baseline's (timed together)"}), width="content")


def _recommended(front: data.RunFront) -> None:
    row = front.pick_row
    if row is None:
        st.info("This search recommends no subnet (search.json has no `best`): none was measured within the "
                "budget, or the search ran without verification.")
        return
    top1 = "not measured" if pd.isna(row["measured_top1"]) else (
        f"{row['measured_top1']:.2f} % measured on {fmt_num(row['top1_n'], '.0f')} test images "
        f"(95 %: {fmt_num(row['top1_lo'])}–{fmt_num(row['top1_hi'])})")
    ms = "not measured" if pd.isna(row["measured"]) else f"{row['measured']:.3f} ms measured"
    c = st.columns([4, 1])
    c[0].success(f"★ Recommended (the search's pick): `{row['id']}` — top-1 {top1}; latency {ms} "
                 f"(predicted {row['top1_pred']:.2f} % and {row['ms']:.3f} ms).")
    if c[1].button("Open it in Subnet detail", key="open_pick"):
        goto_subnet(str(row["id"]))


def _table(df: pd.DataFrame) -> str | None:
    """The filterable subnet table; returns the id of the selected row (ringed on the chart)."""
    st.subheader("Subnets")
    c = st.columns([2, 1, 2])
    kinds = c[0].multiselect("Show", KINDS, default=list(KINDS), key="pareto_kinds")
    measured_only = c[1].checkbox("measured only", key="pareto_measured")
    text = c[2].text_input("Filter by id or arch", key="pareto_filter")
    rows = filter_table(subnet_table(df), kinds, measured_only, text)
    event = table(rows, key="pareto_table", on_select="rerun", selection_mode="single-row", column_config=COLUMNS)
    picked = ((event or {}).get("selection") or {}).get("rows") or []
    if not picked or picked[0] >= len(rows):
        st.caption(f"{len(rows)} of {len(df)} subnets. Select a row to ring it on the chart.")
        return None
    chosen = str(rows["id"].iloc[picked[0]])
    c = st.columns([4, 1])
    c[0].caption(f"{len(rows)} of {len(df)} subnets; `{chosen}` is ringed on the chart.")
    if c[1].button("Open the selected subnet", key="open_selected"):
        goto_subnet(chosen)
    return chosen


def _memory(df: pd.DataFrame, search: SearchRecord | None) -> None:
    """Top-1 against the RAM arena or the flash bytes, where pareto.csv has them (a family with a
    memory model): predicted for every subnet, measured on the artifact where the search checked it."""
    if "ram_kb" not in df.columns or pd.to_numeric(df["ram_kb"], errors="coerce").isna().all():
        return
    st.subheader("Memory")
    axis = st.radio("Memory shown", ["RAM arena", "flash (weights)"], key="pareto_memory", horizontal=True)
    col = "ram_kb" if axis == "RAM arena" else "flash_kb"
    show = df.assign(kb=pd.to_numeric(df.get(col), errors="coerce"), top1=df["measured_top1"].fillna(df["top1_pred"]),
                     top1_is=np.where(df["measured_top1"].notna(), "measured (test)", "predicted"))
    limit = (search.settings.max_ram_kb if col == "ram_kb" else search.settings.max_flash_kb) if search else None
    chart = alt.Chart(show).mark_point(filled=True).encode(
        x=alt.X("kb:Q", title=f"{axis} (kB = 1024 bytes, predicted)", scale=alt.Scale(zero=False)),
        y=alt.Y("top1:Q", title="top-1 %", scale=alt.Scale(zero=False)),
        color=alt.Color("top1_is:N", title="top-1"), shape=alt.Shape("on_front:N", title="on the front"),
        tooltip=["id", alt.Tooltip("kb:Q", format=".1f", title=f"{axis} kB"), alt.Tooltip("top1:Q", format=".2f")])
    if isinstance(limit, (int, float)):
        chart = chart + alt.Chart(pd.DataFrame({"kb": [float(limit)]})).mark_rule(color="red", strokeDash=[4, 3]).encode(
            x="kb:Q")
    st.altair_chart(charts.svg(chart.properties(height=260)), width="stretch")
    measured = f"measured_{col}"
    n = int(pd.to_numeric(df[measured], errors="coerce").notna().sum()) if measured in df.columns else 0
    st.caption(f"Predicted by hwnas's memory model (the arena ExecuTorch's planner reserves at batch 1, the "
               f"weight bytes); {n} subnets also measured on an exported ExecuTorch program"
               + (f"; red: the search's limit {float(limit):.4g} kB" if isinstance(limit, (int, float)) else "") + ".")


def _history(front: data.RunFront) -> None:
    st.subheader("Search history")
    history = data.search_history(front.search)
    if history.empty:
        st.caption("This search.json records no per-generation history (hypervolume or best objective per "
                   "generation), so there is none to draw.")
        return
    st.altair_chart(charts.svg(alt.Chart(history).mark_line(point=True).encode(
        x=alt.X("generation:Q", title="generation"), y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        tooltip=["generation", "measure", alt.Tooltip("value:Q", format=".4g")]).properties(height=160).facet(
        row=alt.Row("measure:N", title=None)).resolve_scale(y="independent")), width="stretch")
