"""Subnet detail: the arch, its bundle, verification and a cached download."""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import cached_zip, fmt_num, show_missing
from hwnas.export.bundle import bundle_arch


def _subnet_pool(files: data.RunFiles) -> pd.DataFrame:
    """Every subnet the run knows: pareto.csv rows, exported bundles (also orphaned ones), measured."""
    front = data.load_pareto(files)
    search = data.load_search(files)
    device = data.searched_device(search, front)
    rows = []
    if not front.empty:
        df = data.front_frame(front, device, data.budget_of(search, device))
        for r in df.itertuples():
            rows.append({"id": r.id, "source": "pareto.csv", "top1_pred": r.top1_pred, "measured_top1": r.measured_top1,
                         "ms_pred": r.ms, "measured_ms": r.measured, "arch": r.arch_row})
    known = {r["id"] for r in rows}
    for path in sorted(files.exports.glob("*/model.json")) if files.exports.exists() else []:
        try:
            meta = json.loads(path.read_text())
            arch = bundle_arch(meta)
        except Exception:
            continue
        if arch.id in known:
            continue
        known.add(arch.id)
        pred = meta.get("predicted") or {}
        rows.append({"id": arch.id, "source": "export only (not in the current pareto.csv)",
                     "top1_pred": pred.get("top1"), "measured_top1": data.bundle_top1(meta)[0],
                     "ms_pred": pred.get("latency_ms"),
                     "measured_ms": ((meta.get("latency") or {}).get("measured") or {}).get("corrected_ms"),
                     "arch": list(arch.to_row())})
    measured = data.load_measurements(files)
    if not measured.empty:
        subnets = measured[measured["kind"] == "subnet"].drop_duplicates("key")
        for r, codes in zip(subnets.itertuples(), data.arch_codes(files, subnets).tolist()):
            if r.key not in known:
                known.add(r.key)
                rows.append({"id": r.key, "source": f"measured ({r.device})", "top1_pred": None, "measured_top1": None,
                             "ms_pred": None, "measured_ms": r.corrected_ms, "arch": codes})
    return pd.DataFrame(rows)


def _label(r) -> str:
    return (f"{r['id']} · top-1 {fmt_num(r['top1_pred'])} % pred / {fmt_num(r['measured_top1'])} % meas · "
            f"{fmt_num(r['ms_pred'], '.3f')} ms pred / {fmt_num(r['measured_ms'], '.3f')} ms meas · {r['source']}")


def page_subnet(files: data.RunFiles) -> None:
    st.header("Subnet detail")
    pool = _subnet_pool(files)
    if pool.empty:
        show_missing("subnets", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
        return
    order = st.radio("Order by", ["top-1 (predicted), best first", "latency (predicted), fastest first",
                                  "exports first"], horizontal=True, key="subnet_order")
    if order.startswith("top-1"):
        pool = pool.sort_values("top1_pred", ascending=False, na_position="last")
    elif order.startswith("latency"):
        pool = pool.sort_values("ms_pred", na_position="last")
    else:
        exported = {p.parent.name.split("-")[0] for p in files.exports.glob("*/model.json")} \
            if files.exports.exists() else set()
        pool = pool.assign(_e=~pool["id"].isin(exported)).sort_values("_e", kind="stable")
    ids = list(pool["id"])
    wanted = st.session_state.pop("subnet_wanted", None)
    if st.session_state.get("subnet_id") not in ids or st.session_state.get("_order_seen", order) != order:
        st.session_state["subnet_id"] = ids[0]  # a new order starts at its top
    st.session_state["_order_seen"] = order
    if wanted in ids:
        st.session_state["subnet_id"] = wanted
    labels = {r["id"]: _label(r) for _, r in pool.iterrows()}
    chosen = st.selectbox("Subnet (type to search by id, accuracy or latency)", ids, key="subnet_id",
                          format_func=lambda i: labels.get(i, i))
    row = pool[pool["id"] == chosen].iloc[0]
    arch = data.run_space(files).from_matrix([row["arch"]])[0]
    st.code(arch.describe())
    numbers = pd.DataFrame({"": ["top-1 (%)", "latency (ms)"],
                            "predicted": [row["top1_pred"], row["ms_pred"]],
                            "measured": [row["measured_top1"], row["measured_ms"]]})
    st.dataframe(numbers, hide_index=True)
    st.caption(f"From {row['source']}. Measured top-1: the test split; measured latency: drift-corrected.")
    grid = data.arch_grid(arch)
    cells = alt.Chart(grid).encode(x=alt.X("block:O", title="block"), y=alt.Y("stage:N", title=None))
    st.altair_chart(charts.svg(cells.mark_rect().encode(color=alt.Color("expand:Q", title="expand ratio",
                                                                 scale=alt.Scale(scheme="blues")))
                        + cells.mark_text().encode(text="label:N")), width="stretch")
    tuned = data.load_finetune(files, chosen)
    if tuned is not None:
        before, after = tuned.get("top1_before") or {}, tuned.get("top1_after") or {}
        st.info(f"Fine-tuned for {tuned.get('epochs')} epoch(s): test top-1 {fmt_num(before.get('test'), '.2f')} % "
                f"→ {fmt_num(after.get('test'), '.2f')} % on {(tuned.get('n') or {}).get('test')} images "
                f"(validation {fmt_num(before.get('val'), '.2f')} → {fmt_num(after.get('val'), '.2f')} %); "
                "export ships the fine-tuned weights.")
    exports = data.load_exports(files)
    mine = exports[exports["id"] == chosen] if not exports.empty else exports
    if mine.empty:
        show_missing("export bundle for this subnet", f"hwnas export --run {files.root} --subnet {chosen} --device cpu-ort")
        return
    for _, e in mine.iterrows():
        st.subheader(f"Bundle `{e['bundle']}`")
        (st.success if e["status"] == "verified" else st.error)(f"verification: {e['status']}")
        if e["flags"] != "ok":
            st.warning(e["flags"])
        c = st.columns(3)
        c[0].metric("top-1 measured (test split)", fmt_num(e["measured_top1"], ".2f", " %"),
                    help=f"predicted {fmt_num(e['predicted_top1'])} %")
        c[1].metric(f"latency measured on {e['device']}", fmt_num(e["measured_ms"], ".3f", " ms"),
                    help=f"predicted {fmt_num(e['predicted_ms'], '.3f')} ms")
        c[2].metric("current budget", fmt_num(e["budget_ms"], ".4g", " ms"))
        folder = Path(e["path"])
        try:
            checks = json.loads((folder / "verify.json").read_text()).get("checks") or []
            st.dataframe(pd.DataFrame([{k: ch.get(k) for k in ("name", "passed", "detail")} for ch in checks]),
                         hide_index=True, width="stretch")
        except (OSError, json.JSONDecodeError):
            st.info("This bundle has no readable verify.json.")
        st.download_button(f"download {folder.name}.zip", cached_zip(str(folder), data.bundle_signature(folder)),
                           file_name=f"{folder.name}.zip", key=f"dl-{folder.name}")
