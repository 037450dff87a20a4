"""Altair charts of the dashboard (no Streamlit here). Every label says predicted or measured."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from hwnas.dashboard import data

EXPLORED = "explored subnets (predicted)"
FRONT = "Pareto front (predicted)"
OTHER = "other candidates (predicted)"
BAND = "front ± accuracy predictor's held-out MAE"
WITHIN = "measured, within budget"
OVER = "measured, over budget"
BUDGET = "latency budget"
REFERENCE = "reference model (measured latency)"
COLOURS = {EXPLORED: "#c7c7c7", BAND: "#aec7e8", FRONT: "#1f77b4", OTHER: "#6baed6", WITHIN: "#2ca02c",
           OVER: "#d62728", BUDGET: "#000000", REFERENCE: "#9467bd"}
PICK = "pick"


def svg(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Render as SVG so each point is an element (browser tests count them)."""
    return chart.properties(usermeta={"embedOptions": {"renderer": "svg"}})


def _colour(series: list[str]) -> alt.Color:
    present = [s for s in COLOURS if s in series]
    return alt.Color("series:N", title=None, scale=alt.Scale(domain=present, range=[COLOURS[s] for s in present]),
                     legend=alt.Legend(orient="bottom", columns=3, labelLimit=400, symbolLimit=20))


def pareto_chart(df: pd.DataFrame, *, device: str, budget: float | None, explored: pd.DataFrame | None = None,
                 refs: pd.DataFrame | None = None, acc_error: dict[str, Any] | None = None,
                 show_candidates: bool = True) -> tuple[alt.LayerChart, dict[str, Any]]:
    """The interactive pareto.png: explored subnets in grey, the front connected, predicted ->
    measured links, within/over budget marks, the budget, reference models, the accuracy
    predictor's held-out error as a band. Returns (chart, what is drawn: counts and domains)."""
    front = df[df["on_front"]]
    others = df[~df["on_front"]] if show_candidates else df.iloc[:0]
    links = data.measured_links(df)
    refs = refs if refs is not None else pd.DataFrame(columns=["name", "ms"])
    mae = (acc_error or {}).get("oof_mae")
    xs = list(df["ms"]) + list(links.get("x1", [])) + ([budget] if budget else []) + list(refs["ms"])
    x_dom = data.tight_domain(xs)
    ys = list(df["top1_pred"]) + list(links.get("y1", []))
    if mae:
        ys += list(front["top1_pred"] + mae) + list(front["top1_pred"] - mae)
    y_dom = data.tight_domain(ys, pad=0.08)
    x = lambda f, t=f"latency on {device} (ms)": alt.X(f, title=t, scale=alt.Scale(domain=x_dom, zero=False))  # noqa: E731
    y = lambda f: alt.Y(f, title="top-1 accuracy (%): predicted, or measured on the test split",  # noqa: E731
                        scale=alt.Scale(domain=y_dom, zero=False))
    series: list[str] = []
    layers = []
    tip = ["id:N", "arch:N", alt.Tooltip("top1_pred:Q", format=".2f", title="top-1 predicted (%)"),
           alt.Tooltip("top1_std:Q", format=".2f", title="± predicted std"),
           alt.Tooltip("measured_top1:Q", format=".2f", title="top-1 measured, test (%)"),
           alt.Tooltip("ms:Q", format=".3f", title="latency predicted (ms)"),
           alt.Tooltip("measured:Q", format=".3f", title="latency measured (ms)"),
           alt.Tooltip("budget_state:N", title="budget")]
    if explored is not None and not explored.empty and x_dom:
        ex = explored[(explored["ms"] >= x_dom[0]) & (explored["ms"] <= x_dom[1])].assign(series=EXPLORED)
        if not ex.empty:
            series.append(EXPLORED)
            layers.append(alt.Chart(ex).mark_circle(size=10, opacity=0.5, clip=True).encode(
                x=x("ms:Q"), y=y("top1_pred:Q"), color=_colour([]),
                tooltip=[alt.Tooltip("ms:Q", format=".3f", title="latency predicted (ms)"),
                         alt.Tooltip("top1_pred:Q", format=".2f", title="top-1 predicted (%)")]))
    if mae and not front.empty:
        series.append(BAND)
        band = front.assign(lo=front["top1_pred"] - mae, hi=front["top1_pred"] + mae, series=BAND)
        layers.append(alt.Chart(band).mark_area(opacity=0.35, interpolate="step-after", clip=True).encode(
            x=x("ms:Q"), y=y("lo:Q"), y2="hi:Q", color=_colour([])))
    if not others.empty:
        series.append(OTHER)
        layers.append(alt.Chart(others.assign(series=OTHER)).mark_point(size=40, clip=True).encode(
            x=x("ms:Q"), y=y("top1_pred:Q"), color=_colour([]), tooltip=tip))
    pick = alt.selection_point(name=PICK, fields=["id"], on="click")
    if not front.empty:
        series.append(FRONT)
        f = front.assign(series=FRONT)
        layers.append(alt.Chart(f).mark_line(interpolate="step-after", clip=True).encode(
            x=x("ms:Q"), y=y("top1_pred:Q"), color=_colour([])))
        layers.append(alt.Chart(f).mark_point(filled=True, size=60, clip=True).encode(
            x=x("ms:Q"), y=y("top1_pred:Q"), color=_colour([]), tooltip=tip).add_params(pick))
    if not links.empty:
        links = links.assign(series=np.where(links["budget_state"] == "over budget", OVER, WITHIN))
        series += [s for s in (WITHIN, OVER) if (links["series"] == s).any()]
        layers.append(alt.Chart(links).mark_rule(color="#555555", strokeWidth=1.2, clip=True).encode(
            x=x("x0:Q"), y=y("y0:Q"), x2="x1:Q", y2="y1:Q"))
        layers.append(alt.Chart(links).mark_point(shape="diamond", filled=True, size=110, clip=True).encode(
            x=x("x1:Q"), y=y("y1:Q"), color=_colour([]), tooltip=tip))
    if budget:
        series.append(BUDGET)
        layers.append(alt.Chart(pd.DataFrame({"ms": [budget], "series": [BUDGET]})).mark_rule(
            strokeDash=[6, 4], size=1.5).encode(x=x("ms:Q"), color=_colour([]),
                                                tooltip=[alt.Tooltip("ms:Q", title="budget (ms)")]))
    if not refs.empty:
        series.append(REFERENCE)
        r = refs.assign(series=REFERENCE)
        layers.append(alt.Chart(r).mark_rule(strokeDash=[2, 3], size=1.5).encode(
            x=x("ms:Q"), color=_colour([]), tooltip=["name:N", alt.Tooltip("ms:Q", format=".3f",
                                                                             title="latency measured (ms)")]))
        layers.append(alt.Chart(r).mark_text(align="left", dx=3, dy=8, angle=0, color=COLOURS[REFERENCE]).encode(
            x=x("ms:Q"), y=alt.value(0), text="name:N"))
    # every layer must name the same colour scale, with every series present in its domain
    chart = alt.layer(*[lay.encode(color=_colour(series)) if _has_series(lay) else lay for lay in layers]) \
        .properties(height=560, title=f"accuracy vs latency on {device}")
    return chart, {"series": series, "x_domain": x_dom, "y_domain": y_dom, "front": len(front),
                   "measured": len(links), "explored": 0 if explored is None else len(explored)}


def _has_series(layer: alt.Chart) -> bool:
    d = layer.data
    return isinstance(d, pd.DataFrame) and "series" in d.columns


def identity_chart(pairs: pd.DataFrame, *, x: str, y: str, x_title: str, y_title: str, colour: str,
                   band_pct: float | None = 10.0, tooltip: list | None = None) -> alt.LayerChart:
    """Predicted vs measured with the y = x line and (optionally) a labelled ±band."""
    dom = data.tight_domain(list(pairs[x]) + list(pairs[y]))
    lo, hi = dom
    grid = np.linspace(lo, hi, 50)
    line = pd.DataFrame({"x": grid, "y": grid, "what": "y = x (perfect prediction)"})
    layers = []
    if band_pct:
        band = pd.DataFrame({"x": grid, "lo": grid * (1 - band_pct / 100), "hi": grid * (1 + band_pct / 100),
                             "what": f"±{band_pct:g} % of measured"})
        layers.append(alt.Chart(band).mark_area(opacity=0.15, clip=True).encode(
            x=alt.X("x:Q", scale=alt.Scale(domain=dom)), y=alt.Y("lo:Q", scale=alt.Scale(domain=dom)), y2="hi:Q",
            fill=alt.Fill("what:N", title=None, scale=alt.Scale(range=["#1f77b4"]))))
    layers.append(alt.Chart(line).mark_line(strokeDash=[4, 3], color="#444444", clip=True).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=dom)), y=alt.Y("y:Q", scale=alt.Scale(domain=dom)),
        strokeDash=alt.StrokeDash("what:N", title=None)))
    layers.append(alt.Chart(pairs).mark_circle(size=60, clip=True).encode(
        x=alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(domain=dom)),
        y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(domain=dom)),
        color=alt.Color(f"{colour}:N", title=None, scale=alt.Scale(domain=["held-out", "training"],
                                                                   range=["#d62728", "#9e9e9e"])),
        tooltip=tooltip or [x, y, colour]))
    return alt.layer(*layers).resolve_scale(color="independent").properties(height=420)
