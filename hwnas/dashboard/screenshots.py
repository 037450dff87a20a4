"""Screenshots of every dashboard page, from a real browser: the README's pictures and the browser
tests' driver (Playwright over Debian's Chromium; `pip install playwright`, `apt-get install chromium`).

    python -m hwnas.dashboard.screenshots runs/quickstart --out experiments/results/dashboard

serves the run (or folder of runs) like `hwnas dashboard`, opens each page at 1400x1000 (and, with
``--narrow``, 800x900 too) and writes ``<page>.png`` (``<page>-800.png``)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDE = {"width": 1400, "height": 1000}
NARROW = {"width": 800, "height": 900}
SHOTS = {"overview": "Runs overview", "pareto": "Pareto front", "compare": "Compare",
         "predictors": "Predictor quality", "devices": "Device comparison", "subnet": "Subnet detail",
         "training": "Supernet training"}
HEADINGS = {"Runs overview": "Run ", "Compare": "Compare runs", "Device comparison": "across devices"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(run: Path, port: int, timeout_s: float = 60) -> subprocess.Popen:
    """`serve()` in its own process (what `hwnas dashboard` calls), once its port answers."""
    env = {**os.environ, "HWNAS_NO_PROGRESS": "1"}
    code = f"from hwnas.dashboard import serve; raise SystemExit(serve({str(run)!r}, {port}))"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"the dashboard exited: {proc.stderr.read().decode()}")
            time.sleep(0.3)
    stop(proc)
    raise RuntimeError(f"the dashboard did not start within {timeout_s:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server (serve() stops its Streamlit child) and wait for it."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def settle(page, quiet_ms: int = 1500, timeout_s: float = 60) -> None:
    """Wait until Streamlit has not been running, and the page has not changed, for `quiet_ms`.
    The page too: on a loaded machine the browser can still be drawing a finished run's output
    while the status widget is already hidden."""
    status = page.locator('[data-testid="stStatusWidget"]')
    deadline = time.time() + timeout_s
    quiet_since, size = time.time(), -1
    while time.time() < deadline:
        now = page.evaluate("() => document.body.innerHTML.length")
        if now != size or (status.count() and status.is_visible()):
            quiet_since, size = time.time(), now
        elif (time.time() - quiet_since) * 1000 > quiet_ms:
            return
        page.wait_for_timeout(100)


def open_page(page, name: str, run: str | None = None) -> None:
    """Pick `run` (a path suffix, when the folder has several) and the page `name`; wait for it."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    if run and box.count() and run not in box.inner_text():
        box.click()
        page.get_by_role("option").filter(has_text=f"/{run}").first.click()
    page.locator('[data-testid="stSidebar"]').get_by_text(name, exact=True).first.click()
    heading = HEADINGS.get(name, name) + (run if name == "Runs overview" and run else "")
    page.get_by_role("heading").filter(has_text=heading).first.wait_for()
    page.wait_for_timeout(500)
    settle(page)


def shoot(page, path: Path) -> Path:
    """The viewport as a PNG, once the charts have drawn."""
    path.parent.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(800)
    page.screenshot(path=str(path), full_page=False)
    return path


def screenshots(run: Path, out: Path, narrow: bool = False, run_name: str | None = None) -> list[Path]:
    """Every page of the dashboard on `run`, as PNGs in `out`."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    proc = start(run, port)
    written = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for view, suffix in [(WIDE, "")] + ([(NARROW, "-800")] if narrow else []):
                page = browser.new_page(viewport=view)
                page.set_default_timeout(120_000)
                page.goto(f"http://127.0.0.1:{port}")
                page.get_by_text("Runs overview", exact=True).first.wait_for()
                for stem, name in SHOTS.items():
                    open_page(page, name, run_name)
                    written.append(shoot(page, out / f"{stem}{suffix}.png"))
                page.close()
            browser.close()
    finally:
        stop(proc)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory (or a folder of runs)")
    parser.add_argument("--out", type=Path, default=Path("experiments/results/dashboard"))
    parser.add_argument("--narrow", action="store_true", help="also at 800x900")
    parser.add_argument("--run-name", help="in a folder of runs, the run to show (its folder name)")
    args = parser.parse_args(argv)
    for path in screenshots(args.run, args.out, args.narrow, args.run_name):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
