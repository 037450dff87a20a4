"""Device comparison: the same subnets across devices, with the number they share."""

from __future__ import annotations


import altair as alt
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import md, show_missing, table


def page_devices(files: data.RunFiles) -> None:
    st.header("The same subnets across devices")
    matrix = data.device_matrix_all(files)
    if matrix.empty:
        show_missing("subnets measured on two or more devices",
                     f"hwnas profile --run {files.root} --device {data.run_device(files)} --device OTHER --samples 100")
        return
    pairs = data.device_pairs(matrix)
    for _, p in pairs.iterrows():
        if p["shared subnets"] < data.MIN_SHARED:
            st.warning(f"{md(p['device A'])} vs {md(p['device B'])}: {md(p['note'])}.")
    st.write("Kendall τ of the latency rankings, over the subnets both devices measured (n per pair):")
    table(pairs, width="content")
    devs = list(matrix.columns)
    c = st.columns(2)
    a = c[0].selectbox("x", devs, index=0, key="dev_x")
    b = c[1].selectbox("y", devs, index=min(1, len(devs) - 1), key="dev_y")
    both = matrix[[a, b]].dropna().reset_index()
    x = alt.X(f"{a}:Q", title=f"latency measured on {a} (ms)", scale=alt.Scale(zero=False))
    y = alt.Y(f"{b}:Q", title=f"latency measured on {b} (ms)", scale=alt.Scale(zero=False))
    chart = alt.Chart(both).mark_circle(size=60).encode(x=x, y=y, tooltip=["key", a, b])
    pick_entry = data.search_pick(data.load_search(files))
    pick = both["key"].eq(pick_entry["id"] if pick_entry else None)
    if pick.any():
        chart = chart + charts.star(both[pick], x, y)
    st.altair_chart(charts.svg(chart.properties(height=420)), width="stretch")
    st.caption(f"{len(both)} subnets measured on both {md(a)} and {md(b)}" + (" (★: the recommended subnet)." if pick.any()
                                                                     else "."))
