"""The `hwnas` command line: one Typer app, each command a thin parse-and-print layer over one
library call, one module per command group (`app` holds the app and what commands share).

User errors (`HwnasError`) print one line to stderr and exit with code 2; `--debug` shows the
traceback instead.
"""

# imported in this order, the commands are listed in it (`hwnas --help`)
from hwnas.cli import (space, devices, latency, agent, profile, supernet, search, accuracy,  # noqa: F401
                       quickstart, finetune, baseline, export, dashboard)
from hwnas.cli.app import app, setting_flag, state
from hwnas.cli.main import main
from hwnas.cli.search import Algo

search_flag = setting_flag  # its name when only `hwnas search` had such settings
_state, _search_flag = state, search_flag  # the names these had when the CLI was one module

__all__ = ["app", "main", "Algo", "search_flag", "setting_flag"]
