"""The Streamlit dashboard (`hwnas dashboard --run DIR`): reads run directories only."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["APP", "serve_command", "serve"]

APP = Path(__file__).with_name("app.py")


def serve_command(port: int = 8501, address: str = "127.0.0.1") -> list[str]:
    """The `streamlit run` command line for the app (headless, loopback by default)."""
    import sys

    return [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
            "--server.port", str(port), "--server.address", address,
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
            "--client.toolbarMode", "minimal"]  # no "Deploy" (to Streamlit's cloud) in the toolbar


def serve(run_dir: str | Path, port: int = 8501, address: str = "127.0.0.1") -> int:
    """Run the Streamlit server for `run_dir` until it exits or this process gets SIGTERM, SIGINT
    or SIGHUP; then stop the server (SIGTERM, SIGKILL after 10 s) so no child outlives us.
    Returns the server's exit code (0 when stopped by a signal)."""
    import signal
    import subprocess
    import time

    env = {**os.environ, "HWNAS_DASHBOARD_RUN": str(Path(run_dir).resolve())}
    child = subprocess.Popen(serve_command(port, address), env=env)
    stopped: list[int] = []

    def stop(signum, frame) -> None:  # noqa: ARG001
        stopped.append(signum)
        if child.poll() is None:
            child.terminate()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    deadline = None
    try:
        while child.poll() is None:
            if stopped and deadline is None:
                deadline = time.monotonic() + 10
            if deadline is not None and time.monotonic() > deadline:
                child.kill()
            try:
                child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            except KeyboardInterrupt:
                stop(signal.SIGINT, None)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0 if stopped else int(child.returncode or 0)
