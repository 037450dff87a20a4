"""Every dashboard page on a run the tests create, through Streamlit's AppTest."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from hwnas.dashboard import APP
from hwnas.dashboard.app import PAGES


def open_page(monkeypatch, run, page: str) -> AppTest:
    monkeypatch.setenv("HWNAS_DASHBOARD_RUN", str(run))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.sidebar.radio[0].set_value(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def test_overview_lists_each_stage(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Runs overview")
    table = at.dataframe[0].value
    status = dict(zip(table["stage"], table["status"]))
    assert status["measurements"] == "done" and status["pareto front"] == "done"
    assert status["latency predictors"] == "missing"
    assert any("hwnas latency fit" in c for c in table["command"])


def test_pareto_page_plots_the_front(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Pareto front")
    assert charts(at), "no chart on the Pareto page"
    assert "6 subnets on the front" in at.caption[0].value
    assert len(at.dataframe[0].value) == 6


def test_device_comparison_has_rank_correlation(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Device comparison")
    corr = at.dataframe[0].value
    assert set(corr.columns) == {"cpu-ort", "cpu-openvino"}
    assert corr.loc["cpu-ort", "cpu-openvino"] > 0.5
    assert charts(at)


def test_subnet_detail_shows_the_arch_and_how_to_export(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Subnet detail")
    assert at.code[0].value.startswith("r")
    assert any("hwnas export" in c.value for c in at.code)


def test_training_curves(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Supernet training")
    assert len(charts(at)) == 2 and len(at.dataframe[0].value) == 6


def test_predictor_page_says_what_is_missing(monkeypatch, demo_run):
    at = open_page(monkeypatch, demo_run, "Predictor quality")
    assert any("hwnas latency fit" in c.value for c in at.code)


@pytest.mark.parametrize("page", PAGES)
def test_an_empty_run_shows_commands_not_tracebacks(monkeypatch, tmp_path, tiny_supernet, page):
    from hwnas.run import open_run

    run = open_run(tmp_path / "empty", tiny_supernet).run_dir
    at = open_page(monkeypatch, run, page)
    assert at.code or at.dataframe  # overview shows the status table; others the command


def test_no_run_at_all(monkeypatch, tmp_path):
    monkeypatch.setenv("HWNAS_DASHBOARD_RUN", str(tmp_path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception and "No hwnas run" in at.warning[0].value
