"""Predictor quality: held-out and training points apart, with n."""

from __future__ import annotations


import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import fmt_num, show_missing


def page_predictors(files: data.RunFiles) -> None:
    st.header("Predictor quality")
    st.subheader("Latency predictor")
    measurements = data.load_measurements(files)
    if measurements.empty:
        show_missing("measurements", f"hwnas profile --run {files.root} --device cpu-ort --samples 100")
    else:
        device = st.selectbox("Device", sorted(measurements["device"].unique()), key="pred_device")
        q = data.latency_quality(files, device)
        pairs = q["pairs"]
        if pairs.empty:
            show_missing(f"latency predictor for {device}", f"hwnas latency fit --run {files.root} --device {device}")
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
    c[0].metric(f"Held-out: within ±10 % (n={int(held['n'])})", fmt_num(held["within ±10 %"], ".0f", " %"),
                help="Subnets measured after the predictor was fitted (search verification, exports).")
    c[1].metric(f"Cross-validation: within ±10 % ({cv.get('folds', '?')}-fold, n={cv.get('n_rows', '?')})",
                fmt_num(100 * chosen["within_10"] if "within_10" in chosen else None, ".0f", " %"),
                help="Out-of-fold predictions of the training subnets: each predicted by a model fitted without it.")
    c[2].metric(f"Training fit: within ±10 % (n={int(train['n'])})", fmt_num(train["within ±10 %"], ".0f", " %"),
                help="The subnets the predictor was fitted on: optimistic, not a measure of quality.")
    if int(held["n"]) == 0:
        st.info("No held-out subnets yet: every measured subnet trained this predictor. Verify a search or export "
                "a subnet to measure new ones; until then read the cross-validation figure.")
    elif int(held["n"]) < data.MIN_SHARED:
        st.warning(f"Only {int(held['n'])} held-out subnets (< {data.MIN_SHARED}): the held-out figures are rough.")
    st.dataframe(metrics, hide_index=True)
    tip = ["key:N", "split:N", alt.Tooltip("measured_ms:Q", format=".3f"), alt.Tooltip("predicted_ms:Q", format=".3f"),
           alt.Tooltip("error_pct:Q", format=".1f", title="error %")]
    st.altair_chart(charts.svg(charts.identity_chart(
        pairs, x="measured_ms", y="predicted_ms", x_title=f"latency measured on {device} (ms)",
        y_title="latency predicted (ms)", colour="split", tooltip=tip)), width="stretch")
    hist = alt.Chart(pairs).mark_bar(opacity=0.8).encode(
        x=alt.X("error_pct:Q", bin=alt.Bin(maxbins=30), title="prediction error (% of measured latency)"),
        y=alt.Y("count()", title="subnets", stack=True),
        color=alt.Color("split:N", title=None, scale=alt.Scale(domain=["held-out", "training"],
                                                               range=["#d62728", "#9e9e9e"])))
    st.altair_chart(charts.svg(hist.properties(height=260)), width="stretch")
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
        show_missing("accuracy predictor", f"hwnas search --run {files.root} --device cpu-ort --latency-ms X (builds it)")
        return
    c = st.columns(3)
    c[0].metric(f"Held-out MAE ({acc['folds']}-fold out-of-fold, n={acc['oof_n']})", fmt_num(acc["oof_mae"], ".2f", " %"))
    c[1].metric(f"Held-out Kendall τ (n={acc['oof_n']})", fmt_num(acc["oof_tau"], ".2f"))
    c[2].metric(f"Training fit MAE (n={acc['train_n']})", fmt_num(acc["train_mae"], ".2f", " %"),
                help="On the subnets it was fitted on: optimistic.")
    front = data.load_pareto(files)
    if not front.empty and "measured_top1" in front.columns and front["measured_top1"].notna().any():
        checked = front[front["measured_top1"].notna()].assign(split="held-out")
        n = len(checked)
        st.markdown(f"**Predicted vs measured top-1 of the search's checked subnets** (test split, never in the "
                    f"predictor's table: held-out, n={n})")
        if n < data.MIN_SHARED:
            st.warning(f"Only {n} subnets were measured on the test split (< {data.MIN_SHARED}): read this as a spot check.")
        st.altair_chart(charts.svg(charts.identity_chart(
            checked, x="measured_top1", y="top1_pred", x_title="top-1 measured on the test split (%)",
            y_title="top-1 predicted (%)", colour="split", band_pct=None,
            tooltip=["id:N", "measured_top1:Q", "top1_pred:Q"])), width="stretch")
    curve = pd.DataFrame(acc["learning_curve"])
    if not curve.empty and "rows" in curve.columns:
        st.altair_chart(charts.svg(alt.Chart(curve).mark_line(point=True).encode(
            x=alt.X("rows:Q", title="table rows used for fitting"),
            y=alt.Y("mae:Q", title="held-out MAE (top-1 %)", scale=alt.Scale(zero=False)))
            .properties(height=240, title="Accuracy predictor learning curve")), width="stretch")
    if acc["candidates"]:
        st.markdown("**Candidate models, out-of-fold**")
        st.dataframe(pd.DataFrame([{k: v for k, v in c.items() if k != "settings"} for c in acc["candidates"]]),
                     hide_index=True)
