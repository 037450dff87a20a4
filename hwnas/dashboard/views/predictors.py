"""Predictor quality: held-out points apart from out-of-fold ones (never the in-sample fit), with
n; which genes drive accuracy and latency."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from hwnas.dashboard import charts, data, stats
from hwnas.dashboard.quality import HELD_OUT, IN_SAMPLE, OUT_OF_FOLD, accuracy_error, gene_importance
from hwnas.dashboard.views.common import cached_latency_quality, fmt_num, md, md_code, metrics, show_missing, table

SPLITS = [HELD_OUT, OUT_OF_FOLD, IN_SAMPLE]


def page_predictors(files: data.RunFiles) -> None:
    st.header("Predictor quality")
    st.subheader("Latency predictor")
    measurements = data.load_measurements(files)
    if measurements.empty:
        show_missing("measurements",
                     f"hwnas profile --run {files.root} --device {data.run_device(files)} --samples 100")
    else:
        devices = sorted(measurements["device"].unique())
        mine = data.run_device(files)
        device = st.selectbox("Device", devices, index=devices.index(mine) if mine in devices else 0, key="pred_device")
        q = cached_latency_quality(str(files.root), device, files.mtimes())
        if q["pairs"].empty:
            show_missing(f"latency predictor for {device}", f"hwnas latency fit --run {files.root} --device {device}")
        else:
            _latency_quality(q, device, data.search_pick(data.load_search(files)))
    st.subheader("Accuracy predictor")
    _accuracy_quality(files)
    st.subheader("Which genes drive accuracy and latency")
    _importance(files)


def _latency_quality(q: dict, device: str, pick: dict | None) -> None:
    pick = pick["id"] if pick else None
    pairs, by_split, cv = q["pairs"], q["metrics"].set_index("points"), q["cv"]
    held, oof = by_split.loc[HELD_OUT], by_split.loc[OUT_OF_FOLD]
    items = [(f"Held-out: within ±10 % (n={int(held['n'])})", fmt_num(held["within ±10 %"], ".0f", " %"),
              "Subnets the predictor was not fitted on (its file lists the ones it was): measured later by search verification or exports."),
             (f"Cross-validation: within ±10 % ({cv.folds or '?'}-fold out-of-fold, n={int(oof['n'])})",
              fmt_num(oof["within ±10 %"], ".0f", " %"),
              "The subnets it was fitted on, each predicted by the fold model that did not see it.")]
    if IN_SAMPLE in by_split.index:
        fit = by_split.loc[IN_SAMPLE]
        items.append((f"Training fit, in-sample: within ±10 % (n={int(fit['n'])})",
                      fmt_num(fit["within ±10 %"], ".0f", " %"),
                      "The final model on the subnets it was fitted on: optimistic, not a measure of quality "
                      "(not plotted)."))
    metrics(*items)
    if int(held["n"]) == 0:
        st.info("No held-out subnets yet: every measured subnet trained this predictor. Verify a search or export "
                "a subnet to measure new ones; until then read the cross-validation figure.")
    elif int(held["n"]) < data.MIN_SHARED:
        st.warning(f"Only {int(held['n'])} held-out subnets (< {data.MIN_SHARED}): the held-out figures are rough.")
    if not q.get("out_of_fold"):
        st.warning("The out-of-fold predictions could not be recomputed for this predictor: the training points "
                   "below are its in-sample fit (optimistic).")
    table(by_split.reset_index(), width="content")
    splits = [s for s in SPLITS if (pairs["split"] == s).any()]
    tip = ["key:N", "split:N", alt.Tooltip("measured_ms:Q", format=".3f", title="measured (ms)"),
           alt.Tooltip("predicted_ms:Q", format=".3f", title="predicted (ms)"),
           alt.Tooltip("error_pct:Q", format=".1f", title="error %")]
    st.altair_chart(charts.svg(charts.identity_chart(
        pairs, x="measured_ms", y="predicted_ms", x_title=f"latency measured on {device} (ms)",
        y_title="latency predicted (ms)", colour="split", domain=splits, tooltip=tip,
        highlight=pairs["key"].eq(pick))),
        width="stretch")
    hist = alt.Chart(pairs).mark_bar(opacity=0.8).encode(
        x=alt.X("error_pct:Q", bin=alt.Bin(maxbins=30), title="prediction error (% of measured latency)"),
        y=alt.Y("count()", title="subnets", stack=True),
        color=alt.Color("split:N", title=None, legend=charts.legend(),
                        scale=alt.Scale(domain=splits, range=["#d62728", "#9e9e9e", "#1f77b4"][:len(splits)])))
    st.altair_chart(charts.svg(hist.properties(height=charts.with_legend(220, len(splits)))), width="stretch")
    cands = pd.DataFrame(cv.candidates)
    if not cands.empty:
        st.markdown(f"**Cross-validation of the candidate models** (chosen: {md_code(cv.chosen)}; "
                    f"{md(cv.criterion or '')})")
        cands["name"] = stats.distinct_names(cands["name"], cands.get("params", [None] * len(cands)))
        keep = [c for c in ("name", "n", "within_5", "within_10", "rmse_ms", "mape", "kendall_tau", "seconds")
                if c in cands.columns]
        table(cands[keep])


def _accuracy_quality(files: data.RunFiles) -> None:
    search = data.load_search(files)
    acc = accuracy_error(files, search)
    if not acc:
        show_missing("accuracy predictor", f"hwnas accuracy build --run {files.root} --samples 150 && "
                                           f"hwnas accuracy fit --run {files.root}")
        return
    if acc.get("held_mae") is not None:
        metrics((f"Held-out MAE (test-split checks, n={acc['held_n']})", fmt_num(acc["held_mae"], ".2f", " points"),
                 "Predicted vs test top-1 of the subnets the search evaluated: none was in the table the predictor "
                 "was fitted on."),
                ("Held-out bias", fmt_num(acc["held_bias"], "+.2f", " points"), "Positive: predicted too high."),
                (f"Held-out Kendall τ (n={acc['held_n']})", fmt_num(acc["held_tau"], ".2f")))
    metrics((f"Out-of-fold MAE ({acc['folds']}-fold, n={acc['oof_n']})", fmt_num(acc["oof_mae"], ".2f", " points"),
                "Mean absolute error of top-1 in percentage points, each subnet predicted by a model fitted "
                "without it."),
               (f"Out-of-fold Kendall τ (n={acc['oof_n']})", fmt_num(acc["oof_tau"], ".2f")),
               (f"Training fit MAE, in-sample (n={acc['train_n']})", fmt_num(acc["train_mae"], ".2f", " points"),
                "On the subnets it was fitted on: optimistic."))
    front = data.load_front(files)
    checked = front.df[front.df["measured_top1"].notna()] if not front.df.empty else front.df
    if not checked.empty:
        n = len(checked)
        st.markdown(f"**Predicted vs measured top-1 of the search's checked subnets** (test split, never in the "
                    f"predictor's table: held-out, n={n})")
        if n < data.MIN_SHARED:
            st.warning(f"Only {n} subnets were measured on the test split (< {data.MIN_SHARED}): read this as a "
                       "spot check.")
        st.altair_chart(charts.svg(charts.identity_chart(
            checked.assign(split=HELD_OUT), x="measured_top1", y="top1_pred",
            x_title="top-1 measured on the test split (%)",
            y_title="top-1 predicted (%)", colour="split", domain=[HELD_OUT], band_pct=None,
            tooltip=["id:N", alt.Tooltip("measured_top1:Q", format=".2f"), alt.Tooltip("top1_pred:Q", format=".2f")],
            highlight=checked["pick"])),
            width="stretch")
    curve = pd.DataFrame(acc["learning_curve"])
    if not curve.empty and "rows" in curve.columns:
        st.altair_chart(charts.svg(alt.Chart(curve).mark_line(point=True).encode(
            x=alt.X("rows:Q", title="table rows used for fitting"),
            y=alt.Y("mae:Q", title="out-of-fold MAE (top-1 points)", scale=alt.Scale(zero=False)))
            .properties(height=240, title="Accuracy predictor learning curve")), width="stretch")
    if acc["candidates"]:
        st.markdown("**Candidate models, out-of-fold** (MAE and RMSE in top-1 points)")
        cands = pd.DataFrame([{k: v for k, v in c.items() if k not in ("settings", "kind")} for c in acc["candidates"]])
        table(cands[["name"] + [c for c in cands.columns if c != "name"]])


def _importance(files: data.RunFiles) -> None:
    imp = gene_importance(files)
    cols = [c for c in imp.columns if c.startswith("ρ with")]
    if not cols:
        show_missing("measured subnets", f"hwnas accuracy build --run {files.root} --samples 150")
        return
    st.caption("Spearman ρ of each gene group's mean value (over the genes a subnet uses) with measured top-1 and "
               "with measured latency: one group at a time, so groups that move together share the credit; "
               "|ρ| near 1: that group orders the subnets.")
    long = imp.melt(id_vars=["gene group"], value_vars=cols, var_name="measured", value_name="rho").dropna()
    if not long.empty:
        st.altair_chart(charts.svg(alt.Chart(long).mark_bar().encode(
            x=alt.X("rho:Q", title="Spearman ρ", scale=alt.Scale(domain=[-1, 1])),
            y=alt.Y("gene group:N", title=None), color=alt.Color("measured:N", title=None, legend=charts.legend()),
            yOffset="measured:N", tooltip=["gene group", "measured", alt.Tooltip("rho:Q", format=".2f")])
            .properties(height=charts.with_legend(60 * len(imp), len(cols)))), width="stretch")
    table(imp)
