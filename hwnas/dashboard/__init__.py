"""The Streamlit dashboard (`hwnas dashboard --run DIR`): reads run directories only."""

from __future__ import annotations

from pathlib import Path

__all__ = ["APP", "serve_command"]

APP = Path(__file__).with_name("app.py")


def serve_command(port: int = 8501, address: str = "127.0.0.1") -> list[str]:
    """The `streamlit run` command line for the app (headless, loopback by default)."""
    import sys

    return [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
            "--server.port", str(port), "--server.address", address,
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
