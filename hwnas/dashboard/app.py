"""The hwnas Streamlit dashboard: `hwnas dashboard --run DIR` (or a folder of runs).

It reads run directories only (see `hwnas.dashboard.data`). A small watcher checks the runs'
file times every few seconds and reruns the page only when a file changed, so a search still
running shows up as it writes and nothing is recomputed while nothing changes. A missing file is
shown as the command that makes it, never as a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.space import FLAT_COLUMNS, Arch

PAGES = ("Runs overview", "Pareto front", "Compare", "Predictor quality", "Device comparison", "Subnet detail",
         "Supernet training")
REFRESH_S = 5
svg = charts.svg


def _missing(what: str, command: str) -> None:
    st.info(f"No {what} in this run yet. Make it with:")
    st.code(command, language="bash")


def _root() -> Path:
    return Path(os.environ.get("HWNAS_DASHBOARD_RUN", "runs"))


def _all_runs() -> list[Path]:
    """The runs under the root, or the run itself and the runs beside it (for Compare)."""
    root = _root()
    runs = data.find_runs(root)
    if runs == [root]:
        runs = [root] + [r for r in data.find_runs(root.parent) if r != root]
    return runs


def _pick_run() -> data.RunFiles | None:
    root = _root()
    runs = data.find_runs(root)
    if not runs:
        st.warning(f"No hwnas run under `{root}`.")
        _missing("run", f"hwnas profile --run {root / 'my-run'} --device cpu-ort --samples 100")
        return None
    choice = st.sidebar.selectbox("Run", [str(r) for r in runs], key="run") if len(runs) > 1 else str(runs[0])
    return data.RunFiles(Path(choice))


@st.cache_data(show_spinner=False, max_entries=16)
def _explored(root: str, device: str, key: tuple) -> pd.DataFrame:  # noqa: ARG001 (key: cache on mtimes)
    return data.explored_points(data.RunFiles(Path(root)), device)


@st.cache_resource(show_spinner=False, max_entries=4)
def _zip(folder: str, signature: tuple) -> bytes:  # noqa: ARG001 (signature: rebuilt when files change)
    return data.zip_folder(Path(folder))


def _num(v, fmt: str = ".2f", unit: str = "") -> str:
    try:
        if v is None or pd.isna(v):
            return "—"
    except (TypeError, ValueError):
        return "—"
    return f"{float(v):{fmt}}{unit}"


# -- overview ----------------------------------------------------------------------------------------
def page_overview(files: data.RunFiles) -> None:
    st.header(f"Run `{files.root.name}`")
    h = data.headline(files)
    best = h["best"] or {}
    acc = h["accuracy"] or {}
    exports = h["exports"]
    c = st.columns(4)
    c[0].metric("Device (searched)", h["device"] or "—")
    c[1].metric("Latency budget", _num(h["budget_ms"], ".4g", " ms"))
    c[2].metric("Front size (predicted)", h["front_size"] if h["front_size"] is not None else "—")
    c[3].metric("Hypervolume (top-1 % × ms)", _num(h["hypervolume"], ".4g"),
                help="Area dominated by the predicted front up to (0 %, budget); larger is better.")
    c = st.columns(4)
    c[0].metric("Best subnet", best.get("id") or "—",
                help="search.json's first pick: measured within budget when the search was verified.")
    c[1].metric("Best: top-1 predicted", _num(best.get("top1_pred"), ".2f", " %"))
    c[2].metric("Best: top-1 measured (test)", _num(best.get("measured_top1"), ".2f", " %"))
    c[3].metric("Accuracy predictor, held-out MAE",
                _num(acc.get("oof_mae"), ".2f", " %") if acc else "—",
                help=f"{acc.get('folds')}-fold out-of-fold on {acc.get('oof_n')} subnets" if acc else None)
    n_ok = int((exports["status"] == "verified").sum()) if not exports.empty else 0
    c = st.columns(4)
    c[0].metric("Best: latency predicted", _num(best.get("ms_pred"), ".3f", " ms"))
    c[1].metric("Best: latency measured", _num(best.get("measured_ms"), ".3f", " ms"))
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


# -- pareto --------------------------------------------------------------------------------------------
def page_pareto(files: data.RunFiles) -> None:
    st.header("Pareto front: accuracy vs. latency")
    front = data.load_pareto(files)
    if front.empty:
        _missing("Pareto front", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
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
    explored = _explored(str(files.root), device, files.mtimes()) if show_explored else None
    refs = data.references(files, device) if show_refs else None
    chart, drawn = charts.pareto_chart(df, device=device, budget=budget, explored=explored, refs=refs,
                                       acc_error=acc, show_candidates=show_others)
    event = st.altair_chart(svg(chart), width="stretch", on_select="rerun", selection_mode=charts.PICK,
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
               f"{_num(budget, '.4g')} ms budget; dotted: reference models (latency only, accuracy unknown); "
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


# -- compare ---------------------------------------------------------------------------------------
def page_compare(files: data.RunFiles) -> None:
    st.header("Compare runs and devices")
    runs = _all_runs()
    options = []
    for run in runs:
        rf = data.RunFiles(run)
        devices = {p.stem.removeprefix("latency-") for p in rf.predictors.glob("latency-*.json")} \
            if rf.predictors.exists() else set()
        searched = data.searched_device(data.load_search(rf), data.load_pareto(rf))
        if rf.pareto.exists():
            options += [f"{run.name} · {d}" for d in sorted(devices | ({searched} if searched else set()))]
    if not options:
        _missing("Pareto front to compare", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
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
    st.altair_chart(svg(alt.layer(*layers).properties(height=480)), width="stretch")
    st.caption("Lines: each front, predicted; rings: the best subnet under the budget (measured latency where "
               "measured, else predicted); dashed: the budget.")
    summary = data.compare_summary(series, budget)
    st.subheader("Summary at this budget")
    st.dataframe(summary, hide_index=True, width="stretch")


# -- predictors ------------------------------------------------------------------------------------
def page_predictors(files: data.RunFiles) -> None:
    st.header("Predictor quality")
    st.subheader("Latency predictor")
    measurements = data.load_measurements(files)
    if measurements.empty:
        _missing("measurements", f"hwnas profile --run {files.root} --device cpu-ort --samples 100")
    else:
        device = st.selectbox("Device", sorted(measurements["device"].unique()), key="pred_device")
        q = data.latency_quality(files, device)
        pairs = q["pairs"]
        if pairs.empty:
            _missing(f"latency predictor for {device}", f"hwnas latency fit --run {files.root} --device {device}")
        else:
            _latency_quality(q, device)
    st.subheader("Accuracy predictor")
    _accuracy_quality(files)


def _latency_quality(q: dict, device: str) -> None:
    pairs, metrics, cv = q["pairs"], q["metrics"], q["cv"]
    held = metrics[metrics["points"] == "held-out"].iloc[0]
    train = metrics[metrics["points"] == "training"].iloc[0]
    chosen = cv.get("chosen_metrics") or {}
    c = st.columns(3)
    c[0].metric(f"Held-out: within ±10 % (n={int(held['n'])})", _num(held["within ±10 %"], ".0f", " %"),
                help="Subnets measured after the predictor was fitted (search verification, exports).")
    c[1].metric(f"Cross-validation: within ±10 % ({cv.get('folds', '?')}-fold, n={cv.get('n_rows', '?')})",
                _num(100 * chosen["within_10"] if "within_10" in chosen else None, ".0f", " %"),
                help="Out-of-fold predictions of the training subnets: each predicted by a model fitted without it.")
    c[2].metric(f"Training fit: within ±10 % (n={int(train['n'])})", _num(train["within ±10 %"], ".0f", " %"),
                help="The subnets the predictor was fitted on: optimistic, not a measure of quality.")
    if int(held["n"]) == 0:
        st.info("No held-out subnets yet: every measured subnet trained this predictor. Verify a search or export "
                "a subnet to measure new ones; until then read the cross-validation figure.")
    elif int(held["n"]) < data.MIN_SHARED:
        st.warning(f"Only {int(held['n'])} held-out subnets (< {data.MIN_SHARED}): the held-out figures are rough.")
    st.dataframe(metrics, hide_index=True)
    tip = ["key:N", "split:N", alt.Tooltip("measured_ms:Q", format=".3f"), alt.Tooltip("predicted_ms:Q", format=".3f"),
           alt.Tooltip("error_pct:Q", format=".1f", title="error %")]
    st.altair_chart(svg(charts.identity_chart(
        pairs, x="measured_ms", y="predicted_ms", x_title=f"latency measured on {device} (ms)",
        y_title="latency predicted (ms)", colour="split", tooltip=tip)), width="stretch")
    hist = alt.Chart(pairs).mark_bar(opacity=0.8).encode(
        x=alt.X("error_pct:Q", bin=alt.Bin(maxbins=30), title="prediction error (% of measured latency)"),
        y=alt.Y("count()", title="subnets", stack=True),
        color=alt.Color("split:N", title=None, scale=alt.Scale(domain=["held-out", "training"],
                                                               range=["#d62728", "#9e9e9e"])))
    st.altair_chart(svg(hist.properties(height=260)), width="stretch")
    cands = pd.DataFrame(cv.get("candidates") or [])
    if not cands.empty:
        st.markdown(f"**Cross-validation of the candidate models** (chosen: `{cv.get('chosen')}`; "
                    f"{cv.get('criterion', '')})")
        keep = [c for c in ("name", "n", "within_5", "within_10", "rmse_ms", "mape", "kendall_tau", "seconds")
                if c in cands.columns]
        st.dataframe(cands[keep], hide_index=True, width="stretch")


def _accuracy_quality(files: data.RunFiles) -> None:
    search = data.load_search(files)
    acc = data.accuracy_error(files, search)
    if not acc:
        _missing("accuracy predictor", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X (builds it)")
        return
    c = st.columns(3)
    c[0].metric(f"Held-out MAE ({acc['folds']}-fold out-of-fold, n={acc['oof_n']})", _num(acc["oof_mae"], ".2f", " %"))
    c[1].metric(f"Held-out Kendall τ (n={acc['oof_n']})", _num(acc["oof_tau"], ".2f"))
    c[2].metric(f"Training fit MAE (n={acc['train_n']})", _num(acc["train_mae"], ".2f", " %"),
                help="On the subnets it was fitted on: optimistic.")
    front = data.load_pareto(files)
    if not front.empty and "measured_top1" in front.columns and front["measured_top1"].notna().any():
        checked = front[front["measured_top1"].notna()].assign(split="held-out")
        n = len(checked)
        st.markdown(f"**Predicted vs measured top-1 of the search's checked subnets** (test split, never in the "
                    f"predictor's table: held-out, n={n})")
        if n < data.MIN_SHARED:
            st.warning(f"Only {n} subnets were measured on the test split (< {data.MIN_SHARED}): read this as a spot check.")
        st.altair_chart(svg(charts.identity_chart(
            checked, x="measured_top1", y="top1_pred", x_title="top-1 measured on the test split (%)",
            y_title="top-1 predicted (%)", colour="split", band_pct=None,
            tooltip=["id:N", "measured_top1:Q", "top1_pred:Q"])), width="stretch")
    curve = pd.DataFrame(acc["learning_curve"])
    if not curve.empty and "rows" in curve.columns:
        st.altair_chart(svg(alt.Chart(curve).mark_line(point=True).encode(
            x=alt.X("rows:Q", title="table rows used for fitting"),
            y=alt.Y("mae:Q", title="held-out MAE (top-1 %)", scale=alt.Scale(zero=False)))
            .properties(height=240, title="Accuracy predictor learning curve")), width="stretch")
    if acc["candidates"]:
        st.markdown("**Candidate models, out-of-fold**")
        st.dataframe(pd.DataFrame([{k: v for k, v in c.items() if k != "settings"} for c in acc["candidates"]]),
                     hide_index=True)


# -- devices ---------------------------------------------------------------------------------------
def page_devices(files: data.RunFiles) -> None:
    st.header("The same subnets across devices")
    matrix = data.device_matrix_all(files)
    if matrix.empty:
        _missing("subnets measured on two or more devices",
                 f"hwnas profile --run {files.root} --device cpu-ort --device cpu-openvino --samples 100")
        return
    pairs = data.device_pairs(matrix)
    for _, p in pairs.iterrows():
        if p["shared subnets"] < data.MIN_SHARED:
            st.warning(f"{p['device A']} vs {p['device B']}: {p['note']}.")
    st.write("Kendall τ of the latency rankings, over the subnets both devices measured (n per pair):")
    st.dataframe(pairs, hide_index=True)
    devs = list(matrix.columns)
    c = st.columns(2)
    a = c[0].selectbox("x", devs, index=0, key="dev_x")
    b = c[1].selectbox("y", devs, index=min(1, len(devs) - 1), key="dev_y")
    both = matrix[[a, b]].dropna().reset_index()
    st.altair_chart(svg(alt.Chart(both).mark_circle(size=60).encode(
        x=alt.X(f"{a}:Q", title=f"latency measured on {a} (ms)", scale=alt.Scale(zero=False)),
        y=alt.Y(f"{b}:Q", title=f"latency measured on {b} (ms)", scale=alt.Scale(zero=False)),
        tooltip=["key", a, b]).properties(height=420)), width="stretch")
    st.caption(f"{len(both)} subnets measured on both {a} and {b}.")


# -- subnet ----------------------------------------------------------------------------------------
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
                         "ms_pred": r.ms, "measured_ms": r.measured, "arch": [int(getattr(r, c)) for c in FLAT_COLUMNS]})
    known = {r["id"] for r in rows}
    for path in sorted(files.exports.glob("*/model.json")) if files.exports.exists() else []:
        try:
            meta = json.loads(path.read_text())
            arch = Arch.from_ofa_dict(meta["arch"])
        except Exception:
            continue
        if arch.id in known:
            continue
        known.add(arch.id)
        pred = meta.get("predicted") or {}
        rows.append({"id": arch.id, "source": "export only (not in the current pareto.csv)",
                     "top1_pred": pred.get("top1"), "measured_top1": (meta.get("accuracy") or {}).get("top1"),
                     "ms_pred": pred.get("latency_ms"),
                     "measured_ms": ((meta.get("latency") or {}).get("measured") or {}).get("corrected_ms"),
                     "arch": list(arch.to_row())})
    measured = data.load_measurements(files)
    if not measured.empty:
        for r in measured[measured["kind"] == "subnet"].drop_duplicates("key").itertuples():
            if r.key not in known:
                known.add(r.key)
                rows.append({"id": r.key, "source": f"measured ({r.device})", "top1_pred": None, "measured_top1": None,
                             "ms_pred": None, "measured_ms": r.corrected_ms,
                             "arch": [int(getattr(r, c)) for c in FLAT_COLUMNS]})
    return pd.DataFrame(rows)


def _label(r) -> str:
    return (f"{r['id']} · top-1 {_num(r['top1_pred'])} % pred / {_num(r['measured_top1'])} % meas · "
            f"{_num(r['ms_pred'], '.3f')} ms pred / {_num(r['measured_ms'], '.3f')} ms meas · {r['source']}")


def page_subnet(files: data.RunFiles) -> None:
    st.header("Subnet detail")
    pool = _subnet_pool(files)
    if pool.empty:
        _missing("subnets", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
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
    arch = Arch.from_row(row["arch"])
    st.code(arch.describe())
    numbers = pd.DataFrame({"": ["top-1 (%)", "latency (ms)"],
                            "predicted": [row["top1_pred"], row["ms_pred"]],
                            "measured": [row["measured_top1"], row["measured_ms"]]})
    st.dataframe(numbers, hide_index=True)
    st.caption(f"From {row['source']}. Measured top-1: the test split; measured latency: drift-corrected.")
    grid = data.arch_grid(arch)
    cells = alt.Chart(grid).encode(x=alt.X("block:O", title="block"), y=alt.Y("stage:N", title=None))
    st.altair_chart(svg(cells.mark_rect().encode(color=alt.Color("expand:Q", title="expand ratio",
                                                                 scale=alt.Scale(scheme="blues")))
                        + cells.mark_text().encode(text="label:N")), width="stretch")
    exports = data.load_exports(files)
    mine = exports[exports["id"] == chosen] if not exports.empty else exports
    if mine.empty:
        _missing("export bundle for this subnet", f"hwnas export --run {files.root} --subnet {chosen} --device cpu-ort")
        return
    for _, e in mine.iterrows():
        st.subheader(f"Bundle `{e['bundle']}`")
        (st.success if e["status"] == "verified" else st.error)(f"verification: {e['status']}")
        if e["flags"] != "ok":
            st.warning(e["flags"])
        c = st.columns(3)
        c[0].metric("top-1 measured (test split)", _num(e["measured_top1"], ".2f", " %"),
                    help=f"predicted {_num(e['predicted_top1'])} %")
        c[1].metric(f"latency measured on {e['device']}", _num(e["measured_ms"], ".3f", " ms"),
                    help=f"predicted {_num(e['predicted_ms'], '.3f')} ms")
        c[2].metric("current budget", _num(e["budget_ms"], ".4g", " ms"))
        folder = Path(e["path"])
        try:
            checks = json.loads((folder / "verify.json").read_text()).get("checks") or []
            st.dataframe(pd.DataFrame([{k: ch.get(k) for k in ("name", "passed", "detail")} for ch in checks]),
                         hide_index=True, width="stretch")
        except (OSError, json.JSONDecodeError):
            st.info("This bundle has no readable verify.json.")
        st.download_button(f"download {folder.name}.zip", _zip(str(folder), data.bundle_signature(folder)),
                           file_name=f"{folder.name}.zip", key=f"dl-{folder.name}")


# -- training --------------------------------------------------------------------------------------
def _checkpoint(files: data.RunFiles) -> tuple[str, Path | None]:
    from hwnas.run import open_run
    from hwnas.supernet.pretrained import shipped_checkpoint

    try:
        stem = open_run(files.root, create=False).supernet
    except Exception:  # an unreadable config is reported on the overview page
        return "unknown (config.yaml unreadable)", None
    name = str(stem) if stem else f"shipped ({shipped_checkpoint()})"
    stem = Path(stem) if stem else shipped_checkpoint()
    for candidate in (stem.parent / "train_log.jsonl", stem.with_name(stem.name + "_train_log.jsonl")):
        if candidate.exists():
            return name, candidate
    return name, None


SERIES_NAMES = {"train_acc": "training accuracy (sampled subnets)", "val_top1_max": "largest subnet (validation)",
                "val_top1_mid": "a fixed middle subnet (validation)", "val_top1_min": "smallest subnet (validation)"}


def page_training(files: data.RunFiles) -> None:
    st.header("Supernet training")
    name, path = _checkpoint(files)
    st.markdown(f"Checkpoint: `{name}`" + (f" — log `{path}`" if path else ""))
    log = data.load_train_log(path)
    if log.empty:
        _missing("training log for this run's supernet",
                 "hwnas train --config experiments/supernet_mnist.yaml --out runs/supernet")
        return
    bounds = data.phase_bounds(log)
    order = list(bounds["phase"])
    value_cols = [c for c in SERIES_NAMES if c in log.columns]
    long = log.melt(id_vars=["epoch_total", "phase"], value_vars=value_cols)
    long["series"] = long["variable"].map(SERIES_NAMES)
    x = alt.X("epoch_total:Q", title="epoch (all phases, in training order)")
    edges = bounds.assign(at=bounds["start"] - 0.5, label=[f"{i}. {p}" for i, p in zip(bounds["order"], bounds["phase"])])
    rules = alt.Chart(edges).mark_rule(strokeDash=[3, 3], color="#888888").encode(x="at:Q")
    labels = alt.Chart(edges).mark_text(align="left", dx=3, dy=6, angle=0, baseline="top", color="#555555").encode(
        x="at:Q", y=alt.value(0), text="label:N")
    acc = alt.Chart(long).mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title="top-1 accuracy (%)", scale=alt.Scale(zero=False)),
        color=alt.Color("series:N", title=None), tooltip=["phase", "series", alt.Tooltip("value:Q", format=".2f")])
    st.altair_chart(svg((rules + labels + acc).properties(height=380, title="Accuracy by epoch; dashed lines: "
                                                                              "phase boundaries")), width="stretch")
    loss = alt.Chart(log).mark_line(point=True).encode(
        x=x, y=alt.Y("train_loss:Q", title="training loss (cross-entropy)", scale=alt.Scale(zero=False)),
        color=alt.Color("phase:N", title="phase", sort=order, scale=alt.Scale(domain=order)),
        tooltip=["phase", "epoch", "train_loss"])
    st.altair_chart(svg((rules + labels + loss).properties(height=300)), width="stretch")
    per_phase = log.groupby("phase", sort=False).last().reindex(order).reset_index()
    per_phase.insert(0, "order", range(1, len(per_phase) + 1))
    per_phase = per_phase.merge(bounds[["phase", "start", "end"]], on="phase")
    kept = [c for c in ("order", "phase", "start", "end", "val_top1_max", "val_top1_mid", "val_top1_min")
            if c in per_phase]
    st.subheader("Phases in training order: epochs and accuracy at the end of each")
    st.dataframe(per_phase[kept].rename(columns={"start": "first epoch", "end": "last epoch", **SERIES_NAMES}),
                 hide_index=True)
    st.dataframe(log, hide_index=True)


# -- main ------------------------------------------------------------------------------------------
RENDER = {"Runs overview": page_overview, "Pareto front": page_pareto, "Compare": page_compare,
          "Predictor quality": page_predictors, "Device comparison": page_devices, "Subnet detail": page_subnet,
          "Supernet training": page_training}


def _watch() -> None:
    """Rerun the app when a run file changes; otherwise do nothing (no recomputation)."""
    def stamp() -> tuple:
        return tuple(data.RunFiles(r).mtimes() for r in _all_runs())

    st.session_state.setdefault("_stamp", stamp())

    @st.fragment(run_every=REFRESH_S)
    def check() -> None:
        now = stamp()
        if now != st.session_state.get("_stamp"):
            st.session_state["_stamp"] = now
            st.rerun()

    check()


def main() -> None:
    st.set_page_config(page_title="hwnas", layout="wide")
    st.sidebar.title("hwnas")
    goto = st.session_state.pop("goto", None)
    if goto:
        st.session_state["page"], st.session_state["subnet_wanted"] = goto
    page = st.sidebar.radio("Page", PAGES, key="page")
    files = _pick_run()
    if files is None:
        return
    try:
        RENDER[page](files)
    except Exception as err:  # one clear line, never a traceback
        st.error(f"{page}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    _watch()


main()
