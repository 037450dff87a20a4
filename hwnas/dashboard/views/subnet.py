"""Subnet detail: the arch (and its OFA JSON to copy), costs, latency with its spread, the command
that exports it, its bundle, verification and a cached download. Opens on the recommended subnet."""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import MISSING, cached_zip, fmt_num, md, md_code, metrics, show_missing, table
from hwnas.export.budget import bundle_latency
from hwnas.export.bundle import bundle_arch

ORDERS = ("top-1 (predicted), best first", "latency (predicted), fastest first", "exports first")
PICK_MARK = "★ recommended · "


def _subnet_pool(files: data.RunFiles, front: data.RunFront) -> pd.DataFrame:
    """Every subnet the run knows: pareto.csv rows, exported bundles (also orphaned ones), measured
    ones; `pick` marks the search's recommendation, `in_run` whether `--subnet ID` finds it."""
    rows = [{"id": r.id, "source": "pareto.csv", "top1_pred": r.top1_pred, "measured_top1": r.measured_top1,
             "ms_pred": r.ms, "measured_ms": r.measured, "arch": r.arch_row, "pick": r.pick, "in_run": True,
             "macs": getattr(r, "macs", np.nan), "params": getattr(r, "params", np.nan)}
            for r in front.df.itertuples()] if not front.df.empty and "arch_row" in front.df.columns else []
    known = {r["id"] for r in rows}
    for path in sorted(files.exports.glob("*/model.json")) if files.exports.exists() else []:
        try:
            meta = json.loads(path.read_text())
            arch = bundle_arch(meta)
        except Exception:  # noqa: BLE001 - an unreadable bundle is flagged on the overview
            continue
        if arch.id in known:
            continue
        known.add(arch.id)
        pred = meta.get("predicted") or {}
        rows.append({"id": arch.id, "source": "export only (not in the current pareto.csv)",
                     "top1_pred": pred.get("top1"), "measured_top1": data.bundle_top1(meta)[0],
                     "ms_pred": pred.get("latency_ms"),
                     "measured_ms": bundle_latency(meta)[0],
                     "arch": list(arch.to_row()), "pick": False, "in_run": False, "macs": np.nan, "params": np.nan})
    measured = data.load_measurements(files)
    if not measured.empty:
        subnets = measured[measured["kind"] == "subnet"].drop_duplicates("key")
        for r, codes in zip(subnets.itertuples(), data.arch_codes(files, subnets).tolist()):
            if r.key not in known:
                known.add(r.key)
                rows.append({"id": r.key, "source": f"measured ({r.device})", "top1_pred": None, "measured_top1": None,
                             "ms_pred": None, "measured_ms": r.corrected_ms, "arch": codes, "pick": False,
                             "in_run": True, "macs": getattr(r, "macs", np.nan),
                             "params": getattr(r, "params", np.nan)})
    return pd.DataFrame(rows)


def _label(r) -> str:
    return (f"{PICK_MARK if r['pick'] else ''}{r['id']} · top-1 {fmt_num(r['top1_pred'])} % pred / "
            f"{fmt_num(r['measured_top1'])} % meas · {fmt_num(r['ms_pred'], '.3f')} ms pred / "
            f"{fmt_num(r['measured_ms'], '.3f')} ms meas · {r['source']}")


def _ordered(pool: pd.DataFrame, order: str, files: data.RunFiles) -> pd.DataFrame:
    if order == ORDERS[0]:
        return pool.sort_values("top1_pred", ascending=False, na_position="last")
    if order == ORDERS[1]:
        return pool.sort_values("ms_pred", na_position="last")
    exported = set(data.load_exports(files)["id"])
    return pool.assign(_e=~pool["id"].isin(exported)).sort_values("_e", kind="stable")


def _choose(ids: list[str], order: str, pick: str | None) -> None:
    """The selection: a subnet asked for (a click elsewhere), else the current one, the top of a
    newly chosen order, or the recommendation when nothing was chosen yet."""
    wanted = st.session_state.pop("subnet_wanted", None)
    current = st.session_state.get("subnet_id")
    if current not in ids:
        st.session_state["subnet_id"] = pick if pick in ids else ids[0]
    elif st.session_state.get("_order_seen", order) != order:
        st.session_state["subnet_id"] = ids[0]  # a new order starts at its top
    st.session_state["_order_seen"] = order
    if wanted in ids:
        st.session_state["subnet_id"] = wanted


def page_subnet(files: data.RunFiles) -> None:
    st.header("Subnet detail")
    front = data.load_front(files)
    device = data.run_device(files, front.search)
    pool = _subnet_pool(files, front)
    if pool.empty:
        show_missing("subnets", f"hwnas search --run {files.root} --device {device} --latency-ms X --pareto")
        return
    order = st.radio("Order by", ORDERS, horizontal=True, key="subnet_order")
    pool = _ordered(pool, order, files)
    ids = list(pool["id"])
    _choose(ids, order, front.pick_id)
    labels = {r["id"]: _label(r) for _, r in pool.iterrows()}
    chosen = st.selectbox("Subnet (type to search by id, accuracy or latency)", ids, key="subnet_id",
                          format_func=lambda i: labels.get(i, i))
    row = pool[pool["id"] == chosen].iloc[0]
    space = data.run_space(files)
    arch = space.from_matrix([row["arch"]])[0]
    if row["pick"]:
        st.success("★ The search's pick: the subnet this run recommends.")
    elif front.pick_id:
        st.caption(f"The run recommends {md_code(front.pick_id)} (the search's pick); this is another subnet.")
    st.markdown(md_code(arch.describe()))
    st.caption(f"From {md(row['source'])}. Measured top-1: the test split; measured latency: drift-corrected.")
    _numbers(files, row, arch)
    _arch_json(files, row, arch, device)
    _grid(arch)
    _finetune(files, chosen)
    _bundles(files, chosen)


def _costs(files: data.RunFiles, row: pd.Series, arch) -> tuple[float, float]:
    """(params, MACs): pareto.csv's or the store's, else counted (exact, no network built)."""
    if pd.notna(row["macs"]) and pd.notna(row["params"]):
        return float(row["params"]), float(row["macs"])
    from hwnas.accuracy.features import params_macs
    from hwnas.run import open_run

    try:
        n_classes = open_run(files.root, create=False).n_classes
        params, macs = params_macs(data.run_space(files), np.asarray([arch.to_row()]), n_classes)
        return float(params[0]), float(macs[0])
    except Exception:  # noqa: BLE001 - an unreadable config: costs unknown
        return np.nan, np.nan


def _numbers(files: data.RunFiles, row: pd.Series, arch) -> None:
    params, macs = _costs(files, row, arch)
    metrics(("MACs", fmt_num(macs / 1e6, ".2f", " M")), ("Parameters", fmt_num(params / 1e6, ".3f", " M")),
            ("top-1 predicted", fmt_num(row["top1_pred"], ".2f", " %")),
            ("top-1 measured (test)", fmt_num(row["measured_top1"], ".2f", " %")))
    lat = data.latency_stats(files)
    lat = lat[lat["key"] == row["id"]]
    if lat.empty:
        st.caption(f"Latency: predicted {fmt_num(row['ms_pred'], '.3f', ' ms')}; not measured on any device.")
        return
    shown = pd.DataFrame({
        "device": lat["device"], "median ms (drift-corrected)": lat["corrected_ms"], "p90 ms": lat["p90_ms"],
        "relative SE %": 100 * lat["rel_se"], "timed runs": lat["n"], "rounds": lat["rounds"],
        "measurements": lat["measurements"]})
    st.markdown(f"**Latency, measured** (predicted on the searched device: {fmt_num(row['ms_pred'], '.3f', ' ms')}; "
                f"SE {MISSING} where one round could not estimate it)")
    table(shown, width="content")


def _arch_json(files: data.RunFiles, row: pd.Series, arch, device: str) -> None:
    text = arch.to_json()
    st.markdown("**OFA arch JSON** (what `hwnas export --subnet` and `hwnas supernet eval --arch` take; the "
                "copy button is at the block's top right)")
    st.code(text, language="json", wrap_lines=True)
    subnet = row["id"] if row["in_run"] else f"'{text}'"
    st.markdown(f"**Export it** for {device}, the device this run was {'searched' if row['in_run'] else 'made'} for:")
    st.code(f"hwnas export --run {files.root} --device {device} --subnet {subnet}", language="bash", wrap_lines=True)


def _grid(arch) -> None:
    grid = data.arch_grid(arch)
    cells = alt.Chart(grid).encode(x=alt.X("block:O", title="block"), y=alt.Y("stage:N", title=None))
    st.altair_chart(charts.svg(cells.mark_rect().encode(color=alt.Color(
        "expand:Q", title="expand ratio", scale=alt.Scale(scheme="blues"), legend=alt.Legend(orient="bottom")))
        + cells.mark_text().encode(text="label:N")), width="stretch")


def _finetune(files: data.RunFiles, chosen: str) -> None:
    tuned = data.load_finetune(files, chosen)
    if tuned is None:
        return
    before, after = tuned.get("top1_before") or {}, tuned.get("top1_after") or {}
    st.info(f"Fine-tuned for {tuned.get('epochs')} epoch(s): test top-1 {fmt_num(before.get('test'), '.2f')} % "
            f"→ {fmt_num(after.get('test'), '.2f')} % on {(tuned.get('n') or {}).get('test')} images "
            f"(validation {fmt_num(before.get('val'), '.2f')} → {fmt_num(after.get('val'), '.2f')} %); "
            "export ships the fine-tuned weights.")


def _bundles(files: data.RunFiles, chosen: str) -> None:
    exports = data.load_exports(files)
    mine = exports[exports["id"] == chosen] if not exports.empty else exports
    if mine.empty:
        st.caption("No export bundle of this subnet yet (the command above makes one).")
        return
    for _, e in mine.iterrows():
        st.subheader(f"Bundle `{e['bundle']}`")
        (st.success if e["status"] == "verified" else st.error)(f"verification: {e['status']}")
        if e["flags"] != "ok":
            st.warning(e["flags"])
        n = f", n={int(e['top1_n'])}" if pd.notna(e["top1_n"]) else ""
        metrics((f"top-1 measured (test split{n})", fmt_num(e["measured_top1"], ".2f", " %"),
                 f"predicted {fmt_num(e['predicted_top1'])} %"),
                (f"latency measured on {e['device']}", fmt_num(e["measured_ms"], ".3f", " ms"),
                 f"predicted {fmt_num(e['predicted_ms'], '.3f')} ms"),
                ("current budget", fmt_num(e["budget_ms"], ".4g", " ms")))
        folder = Path(e["path"])
        try:
            checks = json.loads((folder / "verify.json").read_text()).get("checks") or []
            table(pd.DataFrame([{k: ch.get(k) for k in ("name", "passed", "detail")} for ch in checks]))
        except (OSError, json.JSONDecodeError):
            st.info("This bundle has no readable verify.json.")
        st.download_button(f"download {folder.name}.zip", cached_zip(str(folder), data.bundle_signature(folder)),
                           file_name=f"{folder.name}.zip", key=f"dl-{folder.name}")
