"""The served dashboard in a real browser: Playwright driving Debian's Chromium, on real runs
made here (two runs, two devices, a verified search, an export left orphaned by a later search),
at 1400x1000 and 800x900. The driver (serving, opening pages, waiting) is
`hwnas.dashboard.screenshots`, which also makes the README's pictures.

Screenshots go to $HWNAS_SCREENSHOT_DIR (a temporary folder by default).
$HWNAS_DASHBOARD_TEST_RUNS: a folder of runs made earlier by tests/dashboard/runs.py, to skip
making them (development only)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hwnas.dashboard.screenshots import (ARGS, CHROMIUM, NARROW, WIDE, free_port, open_page, settle, shoot,
                                         start, stop)

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (apt-get install chromium)"),
    # one pytest-xdist worker (README's `--dist loadgroup`) builds the runs and serves them once
    pytest.mark.xdist_group("browser"),
]


def children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.fixture(scope="session")
def runs(tmp_path_factory, tiny_supernet):
    given = os.environ.get("HWNAS_DASHBOARD_TEST_RUNS")
    if given:
        return Path(given)
    sys.path.insert(0, str(Path(__file__).parent))
    from runs import make_runs

    root = tmp_path_factory.mktemp("dashruns")
    make_runs(root, tiny_supernet, log=lambda m: None)
    return root


@pytest.fixture(scope="session")
def pick(runs) -> str:
    """The alpha run's recommended subnet: its search's pick."""
    return json.loads((runs / "alpha" / "search.json").read_text())["best"][0]["id"]


@pytest.fixture(scope="session")
def served(runs):
    port = free_port()
    proc = start(runs, port)
    yield f"http://127.0.0.1:{port}"
    stop(proc)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _page(browser, served, view):
    context = browser.new_context(viewport=view)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(served)
    page.get_by_text("Runs overview", exact=True).first.wait_for()
    return context, page


@pytest.fixture
def page(browser, served):
    context, page = _page(browser, served, WIDE)
    yield page
    context.close()


@pytest.fixture
def narrow(browser, served):
    context, page = _page(browser, served, NARROW)
    yield page
    context.close()


def screenshot(page, name: str, tmp_path: Path) -> None:
    path = shoot(page, Path(os.environ.get("HWNAS_SCREENSHOT_DIR", tmp_path)) / f"{name}.png")
    assert path.stat().st_size > 10_000


def no_errors(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0, \
        page.locator('[data-testid="stAlertContentError"]').first.inner_text()


def nothing_cut(page) -> None:
    """No chart wider than its column, no legend or axis label shortened with "…", no metric or
    caption overflowing its box."""
    for chart in page.locator(".vega-embed").all():
        svg, box = chart.locator("svg").first.bounding_box(), chart.bounding_box()
        assert svg["x"] + svg["width"] <= box["x"] + box["width"] + 1, "a chart is wider than its column"
        assert "…" not in chart.locator("svg").first.text_content(), "a chart label is cut"
    overflowing = page.evaluate("""() => [...document.querySelectorAll(
        '[data-testid="stMetricLabel"], [data-testid="stMetricValue"], [data-testid="stCaptionContainer"]')]
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)""")
    assert not overflowing, overflowing


def test_pareto_page_is_at_least_pareto_png(page, pick, tmp_path):
    open_page(page, "Pareto front", "alpha")
    page.wait_for_selector(".vega-embed svg .mark-symbol path")
    no_errors(page)
    text = page.locator(".vega-embed").first.inner_html()
    for label in ("Pareto front (predicted top-1 − σ)", "measured top-1 and latency, within budget",
                  "latency budget",
                  "reference model (measured latency)", "accuracy predictor's MAE (held-out where measured)",
                  "recommended: the search's pick",
                  "95 % interval of a measurement", "latency on cpu-ort (ms)",
                  "top-1 % (search objective; measured where marked)", "mobilenetv3_small_050"):
        assert label in text, label
    assert page.locator(".vega-embed svg .mark-line path").count() >= 1  # the front, a staircase
    assert page.locator(".vega-embed svg .mark-rule line").count() >= 6  # links, intervals, budget, reference
    assert page.get_by_text("What is drawn.").count() == 1
    assert page.get_by_text(f"Recommended (the search's pick): {pick}").count() == 1
    screenshot(page, "pareto", tmp_path)
    page.get_by_text("predicted top-1 ± σ (the predictor's mean)").click()  # the explored cloud is of predictions
    settle(page)
    no_errors(page)
    assert "predicted top-1 ± σ" in page.locator(".vega-embed").first.inner_html()  # the σ bars
    symbols = page.locator(".vega-embed svg .mark-symbol path")
    deadline = time.time() + 60  # the explored layer renders after the front on a busy machine
    while symbols.count() <= 100 and time.time() < deadline:
        page.wait_for_timeout(500)
    assert symbols.count() > 100
    assert "explored subnets (predicted)" in page.locator(".vega-embed").first.inner_html()


def test_clicking_the_recommended_subnet_opens_it(page, pick):
    open_page(page, "Pareto front", "alpha")
    star = page.locator('.vega-embed svg .mark-symbol.role-mark path[fill="#e6ab02"]')  # the pick's star, on top
    star.first.wait_for()
    assert star.count() == 1
    star.first.click(force=True)
    page.get_by_role("heading").filter(has_text="Subnet detail").first.wait_for()
    settle(page)
    page.get_by_text("★ The search's pick: the subnet this run recommends.").wait_for()
    assert f"--subnet {pick}" in page.locator('[data-testid="stCode"]').nth(1).inner_text()


def test_a_table_row_rings_its_point(page):
    open_page(page, "Pareto front", "alpha")
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for()
    before = page.locator(".vega-embed svg .mark-symbol.role-mark path").count()
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    page.mouse.click(box["x"] + 17, box["y"] + 53)  # the first row's selection cell: the recommendation
    settle(page)
    assert page.get_by_text("is ringed on the chart").count() == 1
    # the chart re-renders after the text on a slow machine: wait for the ring, up to 30 s
    from playwright.sync_api import expect

    expect(page.locator(".vega-embed svg .mark-symbol.role-mark path")).to_have_count(before + 1, timeout=30_000)


def test_subnet_detail_settles_and_offers_the_orphaned_export(page, tmp_path):
    open_page(page, "Subnet detail", "alpha")
    page.get_by_text("exports first").click()
    settle(page)
    no_errors(page)
    assert page.get_by_text("From export only (not in the current pareto.csv)").count() == 1
    page.get_by_text("orphaned").first.wait_for(state="attached")  # waits: still drawing under load
    page.get_by_text("verification: verified").wait_for()
    button = page.locator('[data-testid="stDownloadButton"] button').first
    assert button.is_enabled()
    # nothing changes on disk: no rerun for two refresh periods, so the page never shows "running"
    busy = 0
    for _ in range(40):
        page.wait_for_timeout(250)
        busy += page.locator('[data-testid="stStatusWidget"]').is_visible()
    assert busy <= 2, f"the page was running {busy} of 40 samples"
    assert button.is_enabled()
    screenshot(page, "subnet", tmp_path)


def test_subnet_detail_copies_the_ofa_json_and_names_the_runs_device(page, runs, pick):
    from hwnas.run import open_run

    open_page(page, "Subnet detail", "alpha")
    no_errors(page)
    block = page.locator('[data-testid="stCode"]').first
    block.hover()
    block.locator("button").first.click()
    copied = page.evaluate("navigator.clipboard.readText()")
    run = open_run(runs / "alpha", create=False)
    assert run.family.arch_from_json(copied, run.space.width_mult).id == pick  # what `export --subnet` parses
    command = page.locator('[data-testid="stCode"]').nth(1).inner_text()
    assert f"--device cpu-ort --subnet {pick}" in command
    for label in ("MACs", "Parameters"):
        assert page.locator('[data-testid="stMetricLabel"]').filter(has_text=label).count() == 1
    page.get_by_text("p90 ms").first.wait_for(state="attached")  # waits: still drawing under load


def test_overview_cards_runs_and_export_flags(page, pick, tmp_path):
    open_page(page, "Runs overview", "alpha")
    no_errors(page)
    labels = " | ".join(page.locator('[data-testid="stMetric"]').all_inner_texts())
    for label in ("Device (searched)", "Latency budget", "Hypervolume", "★ Recommended subnet",
                  "Accuracy MAE held-out / out-of-fold", "Exports (current / all)"):
        assert label in labels, label
    assert pick in labels and "0 / 1" in labels and "points" in labels  # the only bundle is orphaned
    page.get_by_text("orphaned: not in the current pareto.csv").first.wait_for(state="attached")
    assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
    assert page.get_by_text("Deploy", exact=True).count() == 0
    screenshot(page, "overview", tmp_path)


def test_compare_two_runs_with_a_budget_slider(page, runs, tmp_path):
    open_page(page, "Compare", "alpha")
    no_errors(page)
    select = page.locator('[data-testid="stMultiSelect"]').first
    assert "alpha · cpu-ort" in select.inner_text() and "beta · cpu-ort" in select.inner_text()
    select.click()
    page.get_by_role("option").filter(has_text="alpha · cpu-openvino").first.click()
    page.keyboard.press("Escape")
    settle(page)
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    slider = page.get_by_role("slider").first
    top = page.locator('[data-testid="stSlider"] input[type="range"]').first.get_attribute("max")
    budgets = [json.loads((runs / r / "search.json").read_text())["settings"]["budgets_ms"]["cpu-ort"]
               for r in ("alpha", "beta")]
    assert float(top) >= max(budgets)

    def x_ticks() -> list[str]:
        return page.locator(".vega-embed svg .role-axis-label text").all_inner_texts()

    ticks, before = x_ticks(), page.locator('[data-testid="stSlider"]').first.inner_text()
    slider.focus()
    for _ in range(30):
        page.keyboard.press("ArrowLeft")
    settle(page)
    assert page.locator('[data-testid="stSlider"]').first.inner_text() != before
    assert x_ticks() == ticks, "the axes moved while the budget changed"
    assert page.locator(".vega-embed svg .mark-line path").count() >= 3  # three fronts overlaid
    strokes = {p.get_attribute("stroke") for p in page.locator(".vega-embed svg .mark-line path").all()}
    assert len(strokes) >= 3, "two fronts share a colour"
    assert "None" not in page.locator('[data-testid="stDataFrame"]').first.inner_text()
    no_errors(page)
    screenshot(page, "compare", tmp_path)


def test_predictor_quality_separates_held_out_points(page, tmp_path):
    open_page(page, "Predictor quality", "alpha")
    page.get_by_text("Out-of-fold MAE").first.wait_for()  # the accuracy section comes last
    no_errors(page)
    labels = " | ".join(page.locator('[data-testid="stMetric"]').all_inner_texts())
    assert "Held-out: within ±10 %" in labels and "Cross-validation" in labels and "Training fit" in labels
    assert "Out-of-fold MAE" in labels and "points" in labels
    html = page.locator(".vega-embed").first.inner_html()
    assert "y = x (perfect prediction)" in html and "±10 % of measured" in html and "out-of-fold" in html
    assert "training fit (in-sample)" not in html  # never plotted
    assert "Count of Records" not in page.content()
    screenshot(page, "predictors", tmp_path)


@pytest.mark.parametrize("name", ["Pareto front", "Runs overview", "Compare", "Subnet detail", "Predictor quality"])
def test_nothing_is_cut_at_800_px(narrow, name):
    open_page(narrow, name, "alpha")
    narrow.wait_for_timeout(2000)  # charts draw after the page settles
    no_errors(narrow)
    nothing_cut(narrow)


def test_device_comparison_shows_n(page, tmp_path):
    open_page(page, "Device comparison", "alpha")
    no_errors(page)
    page.get_by_text("subnets measured on both").first.wait_for(state="attached")  # waits: still drawing under load
    screenshot(page, "devices", tmp_path)


def test_training_page(page, tmp_path):
    open_page(page, "Supernet training", "alpha")
    no_errors(page)
    page.get_by_text("Checkpoint:").first.wait_for(state="attached")  # waits: still drawing under load
    screenshot(page, "training", tmp_path)


def test_sigterm_stops_the_streamlit_child(runs):
    port = free_port()
    proc = start(runs, port)
    kids = children(proc.pid)
    assert kids, "serve() started no child"
    os.kill(proc.pid, signal.SIGTERM)  # the parent only, as a service manager would
    proc.wait(timeout=30)
    deadline = time.time() + 15
    while time.time() < deadline and any(alive(k) for k in kids):
        time.sleep(0.2)
    assert not any(alive(k) for k in kids), "the streamlit child outlived `hwnas dashboard`"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
