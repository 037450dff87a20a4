"""The hwnas Streamlit dashboard: `hwnas dashboard --run DIR` (or a folder of runs).

It reads run directories only (see `hwnas.dashboard.data`) and re-reads them every few seconds,
so a search still running shows up as it writes. A missing file is shown as the command that
makes it, never as a traceback.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import data
from hwnas.space import FLAT_COLUMNS, Arch

PAGES = ("Runs overview", "Pareto front", "Predictor quality", "Device comparison", "Subnet detail",
         "Supernet training")
REFRESH_S = 5


def _svg(chart: alt.Chart) -> alt.Chart:
    """Render as SVG so each point is an element (browser tests count them)."""
    return chart.properties(usermeta={"embedOptions": {"renderer": "svg"}})


def _missing(what: str, command: str) -> None:
    st.info(f"No {what} in this run yet. Make it with:")
    st.code(command, language="bash")


def _pick_run() -> data.RunFiles | None:
    root = Path(os.environ.get("HWNAS_DASHBOARD_RUN", "runs"))
    runs = data.find_runs(root)
    if not runs:
        st.warning(f"No hwnas run under `{root}`.")
        _missing("run", f"hwnas profile --run {root / 'my-run'} --device cpu-ort --samples 100")
        return None
    choice = st.sidebar.selectbox("Run", [str(r) for r in runs]) if len(runs) > 1 else str(runs[0])
    return data.RunFiles(Path(choice))


def page_overview(files: data.RunFiles) -> None:
    st.header(f"Run `{files.root.name}`")
    status = pd.DataFrame(data.run_status(files))
    st.dataframe(status, hide_index=True, width="stretch")
    search = data.load_search(files)
    if search:
        st.subheader("Last search")
        st.json({k: search[k] for k in ("settings", "metrics", "best") if k in search}, expanded=False)


def page_pareto(files: data.RunFiles) -> None:
    st.header("Pareto front: accuracy vs. latency")
    front = data.load_pareto(files)
    if front.empty:
        _missing("Pareto front", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
        return
    lat = next((c for c in ("ms_pred", "predicted_ms") if c in front.columns), None)
    acc = next((c for c in ("top1_pred", "predicted_top1", "top1") if c in front.columns), None)
    if lat is None or acc is None:
        st.error(f"{files.pareto} lacks latency/accuracy columns; rerun `hwnas search`.")
        return
    colour = st.radio("Colour by", ["r", "macs"] if "macs" in front.columns else ["r"], horizontal=True)
    settings = (data.load_search(files) or {}).get("settings", {})
    searched = settings.get("devices") or ["device"]
    if "device" not in front.columns:
        front["device"] = searched[0]
    devices = sorted(front["device"].unique())
    shown = st.multiselect("Devices", devices, default=devices)
    front = front[front["device"].isin(shown)].copy()
    front["arch"] = [Arch.from_row(r).describe() for r in front[list(FLAT_COLUMNS)].to_numpy().tolist()]
    tooltip = ["id", "arch", alt.Tooltip(acc, format=".2f"), alt.Tooltip(lat, format=".3f"), "r", "device"]
    tooltip += [c for c in ("top1_std", "measured_top1", "macs", "params", "measured_ms") if c in front.columns]
    base = alt.Chart(front)
    layers = [base.mark_point(filled=True, size=70).encode(
        x=alt.X(f"{lat}:Q", title="latency (ms, predicted)"),
        y=alt.Y(f"{acc}:Q", title="top-1 (%)", scale=alt.Scale(zero=False, padding=12)),
        color=alt.Color(f"{colour}:Q", scale=alt.Scale(scheme="viridis")),
        shape=alt.Shape("device:N"), tooltip=tooltip)]
    if "measured_ms" in front.columns and front["measured_ms"].notna().any():
        measured = front[front["measured_ms"].notna()]
        layers.append(alt.Chart(measured).mark_point(shape="diamond", size=120, color="red", filled=False).encode(
            x="measured_ms:Q", y=f"{acc}:Q", tooltip=["id", alt.Tooltip("measured_ms:Q", format=".3f")]))
    if "measured_top1" in front.columns and front["measured_top1"].notna().any():
        checked = front[front["measured_top1"].notna()].copy()
        checked["x_ms"] = checked["measured_ms"].fillna(checked[lat]) if "measured_ms" in checked else checked[lat]
        layers.append(alt.Chart(checked).mark_point(shape="triangle-up", size=110, color="black").encode(
            x="x_ms:Q", y="measured_top1:Q",
            tooltip=["id", alt.Tooltip("measured_top1:Q", format=".2f", title="top-1 measured (test)"),
                     alt.Tooltip(f"{acc}:Q", format=".2f", title="top-1 predicted")]))
    budget = (settings.get("budgets_ms") or {}).get(searched[0])
    if budget:
        layers.append(alt.Chart(pd.DataFrame({"budget": [budget]})).mark_rule(
            color="orange", strokeDash=[6, 4]).encode(x="budget:Q"))
    st.altair_chart(_svg(alt.layer(*layers).interactive()), width="stretch")
    st.caption(f"{len(front)} subnets on the front. Filled: predicted latency and top-1; red diamonds: "
               "latency measured on the device; black triangles: top-1 measured on the test split (at the "
               "measured latency); dashed line: the budget.")
    st.dataframe(front.drop(columns=list(FLAT_COLUMNS)), hide_index=True)


def page_predictors(files: data.RunFiles) -> None:
    st.header("Latency predictor quality")
    measurements = data.load_measurements(files)
    if measurements.empty:
        _missing("measurements", f"hwnas profile --run {files.root} --device cpu-ort --samples 100")
        return
    device = st.selectbox("Device", sorted(measurements["device"].unique()))
    pairs = data.latency_pairs(files, device)
    if pairs.empty:
        _missing(f"latency predictor for {device}", f"hwnas latency fit --run {files.root} --device {device}")
        return
    within = (pairs["error_pct"].abs() <= 10).mean() * 100
    st.metric("within ±10%", f"{within:.1f}%")
    hi = float(max(pairs["measured_ms"].max(), pairs["predicted_ms"].max())) * 1.05
    line = pd.DataFrame({"x": [0, hi], "lo": [0, hi * 0.9], "hi": [0, hi * 1.1]})
    band = alt.Chart(line).mark_area(opacity=0.15).encode(x="x:Q", y="lo:Q", y2="hi:Q")
    points = alt.Chart(pairs).mark_circle(size=40).encode(
        x=alt.X("measured_ms:Q", title="measured (ms)"), y=alt.Y("predicted_ms:Q", title="predicted (ms)"),
        tooltip=["key", "measured_ms", "predicted_ms", "error_pct"])
    st.altair_chart(_svg(band + points), width="stretch")
    hist = alt.Chart(pairs).mark_bar().encode(x=alt.X("error_pct:Q", bin=alt.Bin(maxbins=30), title="error %"),
                                              y="count()")
    st.altair_chart(_svg(hist), width="stretch")
    meta = _predictor_meta(files, device)
    curve = meta.get("learning_curve") if meta else None
    if curve:
        st.subheader("Learning curve")
        st.altair_chart(_svg(alt.Chart(pd.DataFrame(curve)).mark_line(point=True).encode(
            x=alt.X("n:Q", scale=alt.Scale(type="log")), y="within_10:Q")), width="stretch")
    elif meta:
        st.json(meta, expanded=False)


def _predictor_meta(files: data.RunFiles, device: str) -> dict | None:
    import json

    path = files.predictors / f"latency-{device}.json"
    try:
        doc = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return doc.get("meta") or doc.get("metadata") or {}


def page_devices(files: data.RunFiles) -> None:
    st.header("The same subnets across devices")
    matrix = data.device_matrix(files)
    if matrix.empty:
        _missing("subnets measured on two or more devices",
                 f"hwnas profile --run {files.root} --device cpu-ort --device cpu-openvino --samples 100")
        return
    st.write(f"{len(matrix)} subnets measured on {matrix.shape[1]} devices. Kendall tau of their rankings:")
    st.dataframe(data.rank_correlations(matrix).round(3))
    devs = list(matrix.columns)
    a = st.selectbox("x", devs, index=0)
    b = st.selectbox("y", devs, index=min(1, len(devs) - 1))
    st.altair_chart(_svg(alt.Chart(matrix.reset_index()).mark_circle().encode(
        x=alt.X(f"{a}:Q", title=f"{a} (ms)"), y=alt.Y(f"{b}:Q", title=f"{b} (ms)"), tooltip=["key", a, b])),
        width="stretch")


def page_subnet(files: data.RunFiles) -> None:
    st.header("Subnet detail")
    front = data.load_pareto(files)
    measured = data.load_measurements(files)
    pool = front if not front.empty else measured[measured["kind"] == "subnet"] if not measured.empty else front
    if pool.empty:
        _missing("subnets", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X --pareto")
        return
    ids = list(dict.fromkeys(pool["id"] if "id" in pool.columns else pool["key"]))
    chosen = st.selectbox("Subnet", ids)
    row = pool[(pool["id"] if "id" in pool.columns else pool["key"]) == chosen].iloc[0]
    arch = Arch.from_row([int(row[c]) for c in FLAT_COLUMNS])
    st.code(arch.describe())
    grid = data.arch_grid(arch)
    cells = alt.Chart(grid).encode(x=alt.X("block:O"), y=alt.Y("stage:N"))
    st.altair_chart(_svg(cells.mark_rect().encode(color=alt.Color("expand:Q", scale=alt.Scale(scheme="blues")))
                         + cells.mark_text().encode(text="label:N")), width="stretch")
    numbers = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items() if k not in FLAT_COLUMNS}
    st.json(numbers, expanded=True)
    bundles = sorted(files.exports.glob(f"{chosen}*/model.json")) if files.exports.exists() else []
    if not bundles:
        _missing("export bundle for this subnet",
                 f"hwnas export --run {files.root} --subnet {chosen} --device cpu-ort")
    for bundle in bundles:
        st.download_button(f"download {bundle.parent.name}.zip", _zip(bundle.parent),
                           file_name=f"{bundle.parent.name}.zip")


def _zip(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder.parent))
    return buf.getvalue()


def _train_log_path(files: data.RunFiles) -> Path | None:
    from hwnas.run import open_run
    from hwnas.supernet.pretrained import shipped_checkpoint

    try:
        stem = open_run(files.root, create=False).supernet
    except Exception:  # an unreadable config is reported on the overview page
        return None
    stem = Path(stem) if stem else shipped_checkpoint()
    for candidate in (stem.parent / "train_log.jsonl", stem.with_name(stem.name + "_train_log.jsonl")):
        if candidate.exists():
            return candidate
    return None


def page_training(files: data.RunFiles) -> None:
    st.header("Supernet training")
    log = data.load_train_log(_train_log_path(files))
    if log.empty:
        _missing("training log for this run's supernet",
                 "hwnas train --config experiments/supernet_mnist.yaml --out runs/supernet")
        return
    value_cols = [c for c in ("train_loss", "train_acc", "val_top1_max", "val_top1_mid", "val_top1_min")
                  if c in log.columns]
    long = log.melt(id_vars=["epoch_total", "phase"], value_vars=value_cols)
    acc = long[long["variable"] != "train_loss"]
    st.altair_chart(_svg(alt.Chart(acc).mark_line(point=True).encode(
        x=alt.X("epoch_total:Q", title="epoch (all phases)"), y=alt.Y("value:Q", title="%"),
        color="variable:N", tooltip=["phase", "variable", "value"])), width="stretch")
    st.altair_chart(_svg(alt.Chart(log).mark_line(point=True).encode(
        x="epoch_total:Q", y="train_loss:Q", color="phase:N")), width="stretch")
    per_phase = log.groupby("phase", sort=False).last().reset_index()
    kept = [c for c in ("phase", "epoch", "val_top1_max", "val_top1_mid", "val_top1_min") if c in per_phase]
    st.subheader("Accuracy after each phase (largest / a fixed random / smallest subnet, validation split)")
    st.dataframe(per_phase[kept], hide_index=True)
    st.dataframe(log, hide_index=True)


def main() -> None:
    st.set_page_config(page_title="hwnas", layout="wide")
    st.sidebar.title("hwnas")
    page = st.sidebar.radio("Page", PAGES)
    files = _pick_run()
    if files is None:
        return

    @st.fragment(run_every=REFRESH_S)
    def body() -> None:
        {"Runs overview": page_overview, "Pareto front": page_pareto, "Predictor quality": page_predictors,
         "Device comparison": page_devices, "Subnet detail": page_subnet,
         "Supernet training": page_training}[page](files)

    body()


main()
