"""The served dashboard in a real browser: Playwright driving Debian's Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="Debian chromium not installed (apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(demo_run):
    port = free_port()
    env = {**os.environ, "HWNAS_NO_PROGRESS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hwnas", "dashboard", "--run", str(demo_run),
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.3)
    yield url
    os.killpg(proc.pid, 15)
    proc.wait(timeout=20)


def test_pareto_chart_has_points_in_a_real_browser(served, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(served)
        page.get_by_text("Pareto front", exact=True).first.click()
        page.wait_for_selector(".vega-embed svg .mark-symbol path", timeout=60_000)
        points = page.locator(".vega-embed svg .mark-symbol path").count()
        assert points >= 6  # 6 front members (plus measured diamonds)
        shots = Path(os.environ.get("HWNAS_SCREENSHOT_DIR", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "pareto.png"), full_page=True)
        assert (shots / "pareto.png").stat().st_size > 10_000
        browser.close()
