"""The hwnas Streamlit dashboard: `hwnas dashboard --run DIR` (or a folder of runs).

It reads run directories only (see `hwnas.dashboard.data`); each page is a module of
`hwnas.dashboard.views`. A small watcher checks the runs' file times every few seconds and reruns
the page only when a file changed, so a search still running shows up as it writes and nothing is
recomputed while nothing changes. A missing file is shown as the command that makes it, never as a
traceback.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from hwnas.dashboard import data
from hwnas.dashboard.views import compare, devices, overview, pareto, predictors, subnet, training
from hwnas.dashboard.views.common import all_runs, md, runs_root, show_missing

REFRESH_S = 5
RENDER = {"Runs overview": overview.page_overview, "Pareto front": pareto.page_pareto,
          "Compare": compare.page_compare, "Predictor quality": predictors.page_predictors,
          "Device comparison": devices.page_devices, "Subnet detail": subnet.page_subnet,
          "Supernet training": training.page_training}
PAGES = tuple(RENDER)


def _pick_run() -> data.RunFiles | None:
    root = runs_root()
    runs = data.find_runs(root)
    if not runs:
        st.warning(f"No hwnas run under `{root}`.")
        show_missing("run", f"hwnas profile --run {root / 'my-run'} --device cpu-ort --samples 100")
        return None
    choice = st.sidebar.selectbox("Run", [str(r) for r in runs], key="run") if len(runs) > 1 else str(runs[0])
    return data.RunFiles(Path(choice))


def _watch() -> None:
    """Rerun the app when a run file changes; otherwise do nothing (no recomputation)."""
    def stamp() -> tuple:
        return tuple(data.RunFiles(r).mtimes() for r in all_runs())

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
        st.error(f"{page}: {type(err).__name__}: " + md(str(err).splitlines()[0] if str(err) else ""))
    _watch()


main()
