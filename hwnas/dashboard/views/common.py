"""Helpers every page uses: how a missing file is shown, cached loaders, number formatting."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import streamlit as st

from hwnas.dashboard import data
from hwnas.search.record import SearchRecord

MISSING = "—"  # what a table shows for a value that does not exist (never "None")
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md(value: object) -> str:
    """A string from a run file, safe inside Markdown: every Markdown character escaped, one
    line (run folders come from other people: no links, images or HTML of theirs)."""
    return _MARKDOWN.sub(r"\\\1", " ".join(str(value).split()))


def md_code(value: object) -> str:
    """A string from a run file as an inline code span it cannot leave (backticks removed)."""
    return "`" + " ".join(str(value).replace("`", "'").split()) + "`"


def show_missing(what: str, command: str) -> None:
    st.info(f"No {what} in this run yet. Make it with:")
    st.code(command, language="bash")


def table(df: pd.DataFrame, **kw) -> object:
    """`st.dataframe` without an index and with a dash, not "None", where a value is missing."""
    kw.setdefault("hide_index", True)
    kw.setdefault("width", "stretch")
    return st.dataframe(df, placeholder=MISSING, **kw)


def metrics(*items: tuple) -> None:
    """A row of `st.metric`s, (label, value) or (label, value, help) each, that wraps onto more rows
    where the page is narrow instead of cutting labels and values."""
    with st.container(horizontal=True, gap="medium"):
        for label, value, *help_ in items:
            st.metric(label, value, help=help_[0] if help_ else None, width="content")


def goto_subnet(arch_id: str) -> None:
    """Open Subnet detail on `arch_id` (the app applies it at the start of the next run)."""
    st.session_state["goto"] = ("Subnet detail", arch_id)
    st.rerun()


@st.cache_data(show_spinner=False, max_entries=16)
def cached_explored(root: str, device: str, key: tuple) -> pd.DataFrame:  # noqa: ARG001 (key: cache on mtimes)
    return data.explored_points(data.RunFiles(Path(root)), device)


@st.cache_data(show_spinner="Recomputing the latency predictor's out-of-fold predictions…", max_entries=8)
def cached_latency_quality(root: str, device: str, key: tuple) -> dict:  # noqa: ARG001
    from hwnas.dashboard.quality import latency_quality

    return latency_quality(data.RunFiles(Path(root)), device)


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_zip(folder: str, signature: tuple) -> bytes:  # noqa: ARG001 (signature: rebuilt when files change)
    return data.zip_folder(Path(folder))


def fmt_num(v, fmt: str = ".2f", unit: str = "") -> str:
    try:
        if v is None or pd.isna(v):
            return MISSING
    except (TypeError, ValueError):
        return MISSING
    return f"{float(v):{fmt}}{unit}"


def runs_root() -> Path:
    return Path(os.environ.get("HWNAS_DASHBOARD_RUN", "runs"))


def all_runs() -> list[Path]:
    """The runs under the root, or the run itself and the runs beside it (for Compare)."""
    root = runs_root()
    runs = data.find_runs(root)
    if runs == [root]:
        runs = [root] + [r for r in data.find_runs(root.parent) if r != root]
    return runs


def trust_warnings(files: data.RunFiles, search: SearchRecord | None, devices=None) -> None:
    """A warning per device whose latency predictor is poor on held-out subnets (search.json's
    `latency_trust`), with the commands that fix it: where a user decides on its predictions."""
    from hwnas.latency.trust import trust_warning

    for device, q in data.latency_trust(files, search).items():
        if q["poor"] and (devices is None or device in devices):
            line = trust_warning(device, q)
            st.warning(md(line[0].upper() + line[1:]) + ".")
