"""The served dashboard in a real browser: Playwright driving Debian's Chromium, on real runs
made here (two runs, two devices, a verified search, an export left orphaned by a later search).

Screenshots (1400x1000) go to $HWNAS_SCREENSHOT_DIR (experiments/results/dashboard/ when set so).
$HWNAS_DASHBOARD_TEST_RUNS: a folder of runs made earlier by tests/dashboard/runs.py, to skip
making them (development only)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEW = {"width": 1400, "height": 1000}

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian chromium not installed (apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(run: Path, port: int) -> subprocess.Popen:
    """`serve()` in its own process (what `hwnas dashboard` calls), waiting for the port."""
    env = {**os.environ, "HWNAS_NO_PROGRESS": "1"}
    code = f"from hwnas.dashboard import serve; raise SystemExit(serve({str(run)!r}, {port}))"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.3)
    raise AssertionError("the dashboard did not start within 60 s")


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
def served(runs):
    port = free_port()
    proc = start(runs, port)
    yield f"http://127.0.0.1:{port}"
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, served):
    page = browser.new_page(viewport=VIEW)
    page.set_default_timeout(60_000)
    page.goto(served)
    page.get_by_text("Runs overview", exact=True).first.wait_for()
    yield page
    page.close()


def shoot(page, name: str, tmp_path: Path) -> None:
    shots = Path(os.environ.get("HWNAS_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(800)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=False)
    assert (shots / f"{name}.png").stat().st_size > 10_000


def open_page(page, name: str, run: str = "alpha") -> None:
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    if run and box.count() and run not in box.inner_text():
        box.click()
        page.get_by_role("option").filter(has_text=f"/{run}").first.click()
    page.locator('[data-testid="stSidebar"]').get_by_text(name, exact=True).first.click()
    heading = {"Runs overview": f"Run {run}", "Compare": "Compare runs",
               "Device comparison": "across devices"}.get(name, name)
    page.get_by_role("heading").filter(has_text=heading).first.wait_for()
    page.wait_for_timeout(500)
    settle(page)


def settle(page, quiet_ms: int = 1500) -> None:
    """Wait until Streamlit has not been running for `quiet_ms`."""
    status = page.locator('[data-testid="stStatusWidget"]')
    deadline = time.time() + 60
    quiet_since = time.time()
    while time.time() < deadline:
        if status.count() and status.is_visible():
            quiet_since = time.time()
        elif (time.time() - quiet_since) * 1000 > quiet_ms:
            return
        page.wait_for_timeout(100)


def no_errors(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0, \
        page.locator('[data-testid="stAlertContentError"]').first.inner_text()


def test_pareto_page_is_at_least_pareto_png(page, tmp_path):
    open_page(page, "Pareto front")
    page.wait_for_selector(".vega-embed svg .mark-symbol path")
    no_errors(page)
    text = page.locator(".vega-embed").first.inner_html()
    for label in ("Pareto front (predicted)", "explored subnets (predicted)", "measured, within budget",
                  "latency budget", "reference model (measured latency)", "held-out MAE",
                  "latency on cpu-ort (ms)", "top-1 accuracy (%): predicted, or measured on the test split",
                  "mobilenetv3_small_050"):
        assert label in text, label
    assert page.locator(".vega-embed svg .mark-line path").count() >= 1  # the connected front
    assert page.locator(".vega-embed svg .mark-rule line").count() >= 3  # links, budget, reference
    symbols = page.locator(".vega-embed svg .mark-symbol path")  # explored + front + measured
    deadline = time.time() + 60  # the explored layer renders after the front on a busy machine
    while symbols.count() <= 100 and time.time() < deadline:
        page.wait_for_timeout(500)
    assert symbols.count() > 100
    assert "Click a point" in page.locator('[data-testid="stCaptionContainer"]').first.inner_text()
    shoot(page, "pareto", tmp_path)


def test_clicking_a_point_opens_its_subnet(page):
    open_page(page, "Pareto front")
    page.wait_for_selector(".vega-embed svg .mark-symbol path")
    # the front's points: the layer whose symbols are filled blue
    points = page.locator('.vega-embed svg .mark-symbol path[fill="#1f77b4"]')
    assert points.count() >= 1
    points.first.click(force=True)
    page.get_by_role("heading").filter(has_text="Subnet detail").first.wait_for()
    settle(page)
    assert page.get_by_text("From pareto.csv").count() == 1


def test_subnet_detail_settles_and_offers_the_orphaned_export(page, tmp_path):
    open_page(page, "Subnet detail")
    page.get_by_text("exports first").click()
    settle(page)
    no_errors(page)
    assert page.get_by_text("From export only (not in the current pareto.csv)").count() == 1
    page.get_by_text("verification: verified").wait_for()
    assert page.get_by_text("orphaned").count() >= 1
    button = page.locator('[data-testid="stDownloadButton"] button').first
    assert button.is_enabled()
    # nothing changes on disk: no rerun for two refresh periods, so the page never shows "running"
    busy = 0
    for _ in range(40):
        page.wait_for_timeout(250)
        busy += page.locator('[data-testid="stStatusWidget"]').is_visible()
    assert busy <= 2, f"the page was running {busy} of 40 samples"
    assert button.is_enabled()
    shoot(page, "subnet", tmp_path)


def test_overview_cards_and_export_flags(page, tmp_path):
    open_page(page, "Runs overview")
    no_errors(page)
    metrics = page.locator('[data-testid="stMetric"]')
    labels = " | ".join(metrics.all_inner_texts())
    for label in ("Device (searched)", "Latency budget", "Hypervolume", "Best: top-1 predicted", "Best: top-1 measured (test)",
                  "Accuracy predictor, held-out MAE", "Exports (verified / all)"):
        assert label in labels, label
    assert "cpu-ort" in labels and "1 / 1" in labels
    assert page.get_by_text("orphaned: not in the current pareto.csv").count() >= 1
    shoot(page, "overview", tmp_path)


def test_compare_two_runs_with_a_budget_slider(page, tmp_path):
    open_page(page, "Compare")
    no_errors(page)
    select = page.locator('[data-testid="stMultiSelect"]').first
    assert "alpha · cpu-ort" in select.inner_text() and "beta · cpu-ort" in select.inner_text()
    select.click()
    page.get_by_role("option").filter(has_text="alpha · cpu-openvino").first.click()
    page.keyboard.press("Escape")
    settle(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for()
    before = page.locator('[data-testid="stSlider"]').first.inner_text()
    slider = page.get_by_role("slider").first
    slider.focus()
    for _ in range(30):
        page.keyboard.press("ArrowLeft")
    settle(page)
    assert page.locator('[data-testid="stSlider"]').first.inner_text() != before
    assert page.locator(".vega-embed svg .mark-line path").count() >= 3  # three fronts overlaid
    no_errors(page)
    shoot(page, "compare", tmp_path)


def test_predictor_quality_separates_held_out_points(page, tmp_path):
    open_page(page, "Predictor quality")
    no_errors(page)
    labels = " | ".join(page.locator('[data-testid="stMetric"]').all_inner_texts())
    assert "Held-out: within ±10 %" in labels and "Cross-validation" in labels and "Training fit" in labels
    assert "Held-out MAE" in labels
    html = page.locator(".vega-embed").first.inner_html()
    assert "y = x (perfect prediction)" in html and "±10 % of measured" in html
    assert "Count of Records" not in page.content()
    shoot(page, "predictors", tmp_path)


def test_device_comparison_shows_n(page, tmp_path):
    open_page(page, "Device comparison")
    no_errors(page)
    assert page.get_by_text("subnets measured on both").count() >= 1
    shoot(page, "devices", tmp_path)


def test_training_page(page, tmp_path):
    open_page(page, "Supernet training")
    no_errors(page)
    assert page.get_by_text("Checkpoint:").count() >= 1
    shoot(page, "training", tmp_path)


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
