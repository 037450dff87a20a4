"""Helpers every page uses: how a missing file is shown, cached loaders, number formatting."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from hwnas.dashboard import data


def show_missing(what: str, command: str) -> None:
    st.info(f"No {what} in this run yet. Make it with:")
    st.code(command, language="bash")


@st.cache_data(show_spinner=False, max_entries=16)
def cached_explored(root: str, device: str, key: tuple) -> pd.DataFrame:  # noqa: ARG001 (key: cache on mtimes)
    return data.explored_points(data.RunFiles(Path(root)), device)


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_zip(folder: str, signature: tuple) -> bytes:  # noqa: ARG001 (signature: rebuilt when files change)
    return data.zip_folder(Path(folder))


def fmt_num(v, fmt: str = ".2f", unit: str = "") -> str:
    try:
        if v is None or pd.isna(v):
            return "—"
    except (TypeError, ValueError):
        return "—"
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
