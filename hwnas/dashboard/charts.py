"""Altair charts of the dashboard (no Streamlit here). Every label says predicted or measured.

The Pareto chart draws every subnet point (predicted, measured, the recommendation) in one layer,
so one click selects exactly the point under the cursor, and names each series once, with its own
colour and symbol, in one legend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from hwnas.dashboard import data
from hwnas.dashboard.quality import band_mae

EXPLORED = "explored subnets (predicted)"
BAND = "front ± accuracy predictor's MAE (held-out where measured)"
FRONT = "Pareto front (predicted)"
FRONT_OBJECTIVE = "Pareto front (predicted top-1 − σ)"  # as the search ranked it
OTHER = "other candidates (predicted)"
SIGMA = "predicted top-1 ± σ"
LINK = "predicted → measured"
BOTH_IN = "measured top-1 and latency, within budget"
BOTH_OVER = "measured top-1 and latency, over budget"
LATENCY_ONLY = "measured latency (top-1 predicted)"
TOP1_ONLY = "measured top-1 (latency predicted)"
INTERVAL = "95 % interval of a measurement"
PICKED = "recommended: the search's pick"
SELECTED = "selected in the table"
BUDGET = "latency budget"
REFERENCE = "reference model (measured latency)"
BASELINE = "baseline trained alone (measured latency, test top-1)"
STAR = ("M0,-1L0.235,-0.324L0.951,-0.309L0.38,0.124L0.588,0.809L0,0.4L-0.588,0.809L-0.38,0.124L-0.951,-0.309"
        "L-0.235,-0.324Z")  # a five-pointed star in Vega's unit square
STYLE = {  # series: (colour, legend symbol, point size)
    EXPLORED: ("#c7c7c7", "circle", 10), BAND: ("#aec7e8", "square", 0), FRONT: ("#1f77b4", "circle", 60),
    FRONT_OBJECTIVE: ("#1f77b4", "circle", 60),
    OTHER: ("#6baed6", "triangle-up", 45), SIGMA: ("#7f9fbf", "stroke", 0), LINK: ("#999999", "stroke", 0),
    BOTH_IN: ("#2ca02c", "diamond", 110), BOTH_OVER: ("#d62728", "diamond", 110),
    LATENCY_ONLY: ("#ff7f0e", "square", 80), TOP1_ONLY: ("#8c564b", "triangle-down", 80),
    INTERVAL: ("#444444", "stroke", 0), PICKED: ("#e6ab02", STAR, 420), SELECTED: ("#000000", "circle", 520),
    BUDGET: ("#000000", "stroke", 0), REFERENCE: ("#9467bd", "stroke", 0), BASELINE: ("#7b2d8e", "cross", 140)}
COLOURS = {s: c for s, (c, _, _) in STYLE.items()}
PICK = "pick"  # the chart's click selection (its id field)
STATE_SERIES = {"latency": LATENCY_ONLY, "top-1": TOP1_ONLY}
SERIES_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                  "#bcbd22", "#7f7f7f"]  # Compare: one distinct hue per run · device


def svg(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Render as SVG so each point is an element (browser tests count them)."""
    return chart.properties(usermeta={"embedOptions": {"renderer": "svg"}})


def legend(**kw: Any) -> alt.Legend:
    """A legend under the chart, one entry a line, never cut: it fits any width the page has."""
    return alt.Legend(orient="bottom", direction="vertical", columns=1, labelLimit=0, symbolLimit=0,
                      symbolOpacity=1, **kw)


def with_legend(plot: int, entries: int) -> int:
    """Chart height for a `plot` px high plot and a one-column legend of `entries` under it (the
    page fits the whole chart, legend included, into the height)."""
    return plot + 40 + 21 * entries


@dataclass
class _Scales:
    series: list[str]

    def colour(self) -> alt.Color:
        return alt.Color("series:N", title=None, legend=legend(),
                         scale=alt.Scale(domain=self.series, range=[COLOURS[s] for s in self.series]))

    def shape(self) -> alt.Shape:
        return alt.Shape("series:N", title=None, legend=legend(),
                         scale=alt.Scale(domain=self.series, range=[STYLE[s][1] for s in self.series]))



def _size(points: pd.DataFrame) -> pd.DataFrame:
    """Each point's area (px², used as is) from its series."""
    return points.assign(size=[STYLE[s][2] for s in points["series"]])


def _text(v: Any, fmt: str, unit: str = "", missing: str = "not measured") -> str:
    return missing if v is None or pd.isna(v) else f"{v:{fmt}}{unit}"


def tooltip_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns for tooltips (never `null`): what is predicted, what is measured, with n and
    intervals, and the budget verdict."""
    def top1_measured(r) -> str:
        if pd.isna(r["measured_top1"]):
            return "not measured"
        n = "" if pd.isna(r["top1_n"]) else \
            f" on {int(r['top1_n'])} test images, 95 % {r['top1_lo']:.2f}–{r['top1_hi']:.2f}"
        return f"{r['measured_top1']:.2f} %{n}"

    def ms_measured(r) -> str:
        if pd.isna(r["measured"]):
            return "not measured"
        se = "SE not estimated (one round)" if pd.isna(r["rel_se"]) else \
            f"±2 SE {r['ms_lo']:.3f}–{r['ms_hi']:.3f}"
        ucb = "" if pd.isna(r["ucb_ms"]) else f"; acceptance bound {r['ucb_ms']:.3f} ms"
        return f"{r['measured']:.3f} ms ({se}{ucb})"

    return df.assign(
        t_pred=[f"{p:.2f} % ± {_text(s, '.2f', '', '?')} (σ); search objective {o:.2f} %"
                for p, s, o in zip(df["top1_pred"], df["top1_std"], df["objective"])],
        t_top1=[top1_measured(r) for _, r in df.iterrows()],
        t_ms=[f"{v:.3f} ms" for v in df["ms"]],
        t_measured=[ms_measured(r) for _, r in df.iterrows()],
        t_role=np.where(df["pick"], "the search's pick (recommended)",
                        np.where(df["on_front"], "on the front", "candidate off the front")))


TIP = [alt.Tooltip("id:N", title="subnet"), alt.Tooltip("t_role:N", title="role"),
       alt.Tooltip("shown_at:N", title="point drawn at"), alt.Tooltip("arch:N", title="arch"),
       alt.Tooltip("t_pred:N", title="top-1 predicted"), alt.Tooltip("t_top1:N", title="top-1 measured (test)"),
       alt.Tooltip("t_ms:N", title="latency predicted"), alt.Tooltip("t_measured:N", title="latency measured"),
       alt.Tooltip("budget_state:N", title="budget")]


def subnet_points(df: pd.DataFrame, y: str, show_candidates: bool) -> pd.DataFrame:
    """Every point of a subnet the chart draws, in drawing order (the pick last, on top): each
    subnet at its predicted place (front / other), measured ones again where measured (diamond when
    both top-1 and latency are measured), the recommendation at its measured (else predicted) place."""
    df = tooltip_columns(df)
    shown = df if show_candidates else df[df["on_front"] | df["pick"]]
    predicted = shown.assign(px=shown["ms"], py=shown[y], shown_at="predicted",
                             series=np.where(shown["on_front"], FRONT_OBJECTIVE if y == "objective" else FRONT, OTHER))
    done = df[df["measured_state"] != "none"]
    measured = done.assign(px=done["x1"], py=done["measured_top1"].fillna(done[y]), shown_at="measured",
                           series=[STATE_SERIES.get(s) or (BOTH_OVER if b == "over budget" else BOTH_IN)
                                   for s, b in zip(done["measured_state"], done["budget_state"])])
    pick = df[df["pick"]]
    pick = pick.assign(px=pick["x1"], py=pick["measured_top1"].fillna(pick[y]),
                       shown_at=np.where(pick["measured_state"] == "both", "measured", "predicted"), series=PICKED)
    keep = ["id", "arch", "px", "py", "series", "shown_at", "t_role", "t_pred", "t_top1", "t_ms", "t_measured",
            "budget_state"]
    parts = [p.reindex(columns=keep) for p in (predicted, measured, pick) if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=keep)


def _intervals(df: pd.DataFrame, y: str) -> pd.DataFrame:
    """Error bars of measured values: top-1 (vertical, Wilson 95 %) and latency (horizontal, ±2 SE)."""
    top1 = df[df["top1_lo"].notna()]
    lat = df[df["ms_lo"].notna()]
    ys = lat["measured_top1"].fillna(lat[y])
    return pd.concat([pd.DataFrame({"x": top1["x1"], "x2": top1["x1"], "y": top1["top1_lo"], "y2": top1["top1_hi"]}),
                      pd.DataFrame({"x": lat["ms_lo"], "x2": lat["ms_hi"], "y": ys, "y2": ys})],
                     ignore_index=True).assign(series=INTERVAL)


def _domains(df: pd.DataFrame, y: str, budget: float | None, refs: pd.DataFrame, mae: float | None,
             baselines: pd.DataFrame | None = None) -> tuple[list[float] | None, list[float] | None]:
    xs = list(df["ms"]) + list(df["x1"]) + list(df["ms_lo"]) + list(df["ms_hi"]) + list(refs["ms"])
    xs += [budget] if budget else []
    ys = list(df[y]) + list(df["measured_top1"]) + list(df["top1_lo"]) + list(df["top1_hi"])
    if baselines is not None and not baselines.empty:
        xs += list(baselines["ms"])
        ys += list(baselines["top1"])
    if y == "top1_pred":
        ys += list(df["top1_pred"] - df["top1_std"]) + list(df["top1_pred"] + df["top1_std"])
    if mae:
        front = df[df["on_front"]]
        ys += list(front[y] + mae) + list(front[y] - mae)
    return data.tight_domain(xs), data.tight_domain(ys, pad=0.08)


def pareto_chart(df: pd.DataFrame, *, device: str, budget: float | None, y: str = "objective",
                 explored: pd.DataFrame | None = None, refs: pd.DataFrame | None = None,
                 acc_error: dict[str, Any] | None = None, show_candidates: bool = True,
                 selected: str | None = None, baselines: pd.DataFrame | None = None
                 ) -> tuple[alt.LayerChart, dict[str, Any]]:
    """The interactive pareto.png. `df`: `data.front_frame`; `y`: "objective" (what the search
    ranked on: the front is a staircase there) or "top1_pred" (the predictor's mean, with ±σ bars);
    `baselines`: `data.baselines` (measured points).
    Returns (chart, what is drawn: series, counts and domains)."""
    refs = refs if refs is not None else pd.DataFrame(columns=["name", "ms"])
    mae = band_mae(acc_error)[0]
    x_dom, y_dom = _domains(df, y, budget, refs, mae, baselines)
    x = lambda f: alt.X(f, title=f"latency on {device} (ms)", scale=alt.Scale(domain=x_dom, zero=False))  # noqa: E731
    y_title = f"top-1 % ({'search objective' if y == 'objective' else 'predicted'}; measured where marked)"
    yy = lambda f: alt.Y(f, title=y_title, scale=alt.Scale(domain=y_dom, zero=False))  # noqa: E731
    front = df[df["on_front"]].sort_values("ms")
    layers: list[tuple[str | None, alt.Chart]] = []
    if explored is not None and not explored.empty and x_dom:
        ex = explored[(explored["ms"] >= x_dom[0]) & (explored["ms"] <= x_dom[1])].assign(series=EXPLORED)
        layers.append((EXPLORED, alt.Chart(ex).mark_circle(size=10, opacity=0.5, clip=True).encode(
            x=x("ms:Q"), y=yy(f"{y}:Q"),
            tooltip=[alt.Tooltip("ms:Q", format=".3f", title="latency predicted (ms)"),
                     alt.Tooltip(f"{y}:Q", format=".2f", title="top-1 predicted (%)")])))
    if mae and not front.empty:
        band = front.assign(lo=front[y] - mae, hi=front[y] + mae, series=BAND)
        layers.append((BAND, alt.Chart(band).mark_area(opacity=0.35, interpolate="step-after", clip=True).encode(
            x=x("ms:Q"), y=yy("lo:Q"), y2="hi:Q")))
    if y == "objective" and not front.empty:
        layers.append((FRONT_OBJECTIVE, alt.Chart(front.assign(series=FRONT_OBJECTIVE)).mark_line(
            interpolate="step-after", clip=True).encode(x=x("ms:Q"), y=yy("objective:Q"))))
    if y == "top1_pred" and not front.empty:
        sig = front[front["top1_std"].notna()]
        sig = sig.assign(lo=sig["top1_pred"] - sig["top1_std"], hi=sig["top1_pred"] + sig["top1_std"], series=SIGMA)
        layers.append((SIGMA, alt.Chart(sig).mark_rule(strokeWidth=1, clip=True).encode(
            x=x("ms:Q"), y=yy("lo:Q"), y2="hi:Q")))
    done = df[df["measured_state"] != "none"]
    if not done.empty:
        links = done.assign(y0=done[y], y1=done["measured_top1"].fillna(done[y]), series=LINK)
        layers.append((LINK, alt.Chart(links).mark_rule(strokeWidth=1.2, clip=True).encode(
            x=x("ms:Q"), y=yy("y0:Q"), x2="x1:Q", y2="y1:Q")))
    bars = _intervals(df, y)
    if not bars.empty:
        layers.append((INTERVAL, alt.Chart(bars).mark_rule(strokeWidth=1.5, clip=True).encode(
            x=x("x:Q"), x2="x2:Q", y=yy("y:Q"), y2="y2:Q")))
    if budget:
        layers.append((BUDGET, alt.Chart(pd.DataFrame({"ms": [budget], "series": [BUDGET]})).mark_rule(
            strokeDash=[6, 4], size=1.5).encode(x=x("ms:Q"), tooltip=[alt.Tooltip("ms:Q", title="budget (ms)")])))
    if not refs.empty:
        r = refs.assign(series=REFERENCE)
        layers.append((REFERENCE, alt.Chart(r).mark_rule(strokeDash=[2, 3], size=1.5).encode(
            x=x("ms:Q"), tooltip=["name:N", alt.Tooltip("ms:Q", format=".3f", title="latency measured (ms)")])))
        layers.append((None, alt.Chart(r).mark_text(align="left", dx=3, dy=8, color=COLOURS[REFERENCE]).encode(
            x=x("ms:Q"), y=alt.value(0), text="name:N")))
    if baselines is not None and not baselines.empty:
        b = baselines.assign(series=BASELINE)
        layers.append((BASELINE, alt.Chart(b).mark_point(shape="cross", filled=True, size=140, clip=True).encode(
            x=x("ms:Q"), y=yy("top1:Q"),
            tooltip=["name:N", alt.Tooltip("ms:Q", format=".3f", title="latency measured (ms)"),
                     alt.Tooltip("top1:Q", format=".2f", title="test top-1 (%)"), "n_test:Q", "beaten_by:N"])))
        layers.append((None, alt.Chart(b).mark_text(align="left", dx=6, dy=-6, color=COLOURS[BASELINE]).encode(
            x=x("ms:Q"), y=yy("top1:Q"), text="name:N")))
    points = subnet_points(df, y, show_candidates)
    ring = points[(points["id"] == selected) & (points["shown_at"] == "predicted")].assign(series=SELECTED)
    present = set(points["series"]) | {name for name, _ in layers} | ({SELECTED} if not ring.empty else set())
    scales = _Scales([s for s in STYLE if s in present])
    encoded = [lay.encode(color=scales.colour()) if name else lay for name, lay in layers]
    pick = alt.selection_point(name=PICK, fields=["id"], on="click", clear=False)
    # one layer for every subnet point, in drawing order (the pick last, on top)
    encoded.append(alt.Chart(_size(points)).mark_point(filled=True, opacity=0.95, clip=True).encode(
        x=x("px:Q"), y=yy("py:Q"), color=scales.colour(), shape=scales.shape(),
        size=alt.Size("size:Q", scale=None), tooltip=TIP).add_params(pick))
    if not ring.empty:
        encoded.append(alt.Chart(_size(ring)).mark_point(filled=False, strokeWidth=2.5, clip=True).encode(
            x=x("px:Q"), y=yy("py:Q"), color=scales.colour(), shape=scales.shape(),
            size=alt.Size("size:Q", scale=None), tooltip=TIP))
    chart = alt.layer(*encoded).properties(height=with_legend(480, len(scales.series)),
                                           title=f"accuracy vs latency on {device}")
    return chart, {"series": scales.series, "x_domain": x_dom, "y_domain": y_dom, "front": len(front),
                   "measured": len(done), "explored": 0 if explored is None else len(explored)}


def star(points: pd.DataFrame, x: alt.X, y: alt.Y, label: str = PICKED) -> alt.Chart:
    """The recommended subnet's mark on any chart: a gold star (legend entry `label`)."""
    return alt.Chart(points.assign(star=label)).mark_point(filled=True, size=STYLE[PICKED][2], opacity=1).encode(
        x=x, y=y, shape=alt.Shape("star:N", title=None, legend=legend(), scale=alt.Scale(range=[STAR])),
        fill=alt.value(COLOURS[PICKED]), stroke=alt.value("#7a5c00"))


def identity_chart(pairs: pd.DataFrame, *, x: str, y: str, x_title: str, y_title: str, colour: str,
                   domain: list[str], band_pct: float | None = 10.0, tooltip: list | None = None,
                   highlight: pd.Series | None = None) -> alt.LayerChart:
    """Predicted vs measured with the y = x line and (optionally) a labelled ±band; points coloured
    by `colour`, whose values are `domain` (first red, then grey, then blue); the rows where
    `highlight` is true (the recommended subnet) starred."""
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
            fill=alt.Fill("what:N", title=None, scale=alt.Scale(range=["#1f77b4"]), legend=legend())))
    layers.append(alt.Chart(line).mark_line(strokeDash=[4, 3], color="#444444", clip=True).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=dom)), y=alt.Y("y:Q", scale=alt.Scale(domain=dom)),
        strokeDash=alt.StrokeDash("what:N", title=None, legend=legend())))
    layers.append(alt.Chart(pairs).mark_point(size=60, filled=True, clip=True).encode(
        x=alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(domain=dom)),
        y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(domain=dom)),
        color=alt.Color(f"{colour}:N", title=None, legend=legend(),
                        scale=alt.Scale(domain=domain, range=["#d62728", "#9e9e9e", "#1f77b4"][:len(domain)])),
        shape=alt.Shape(f"{colour}:N", title=None, legend=legend(),
                        scale=alt.Scale(domain=domain, range=["diamond", "circle", "square"][:len(domain)])),
        tooltip=tooltip or [x, y, colour]))
    if highlight is not None and highlight.any():
        layers.append(star(pairs[highlight.to_numpy()], alt.X(f"{x}:Q", scale=alt.Scale(domain=dom)),
                           alt.Y(f"{y}:Q", scale=alt.Scale(domain=dom))))
    return alt.layer(*layers).resolve_scale(color="independent", shape="independent").properties(height=420)
