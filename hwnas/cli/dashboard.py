"""`hwnas dashboard`: serve the Streamlit dashboard."""

from __future__ import annotations

import errno
from pathlib import Path

import typer

from hwnas.cli.app import app, err_console
from hwnas.errors import InputError
from hwnas.extras import need


def _check_bindable(address: str, port: int) -> None:
    """One line for an address this machine does not have or a port already taken, instead of the
    server's traceback (the port is free again when this returns: a race is the server's to say)."""
    import socket

    try:
        family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server: TIME_WAIT is no refusal
            probe.bind((address, port))
    except socket.gaierror:
        raise InputError(f"--address {address!r} is not an address or host name of this machine; "
                         "use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
    except OSError as err:
        taken = err.errno == errno.EADDRINUSE
        raise InputError(f"--port {port} is already in use on {address}; pick another with --port" if taken else
                         f"cannot serve on {address}:{port} ({err.strerror}); check --address and --port") from None


@app.command("dashboard")
def dashboard(
    run: Path = typer.Option(Path("runs"), "--run", help="A run directory, or a folder of runs."),
    port: int = typer.Option(8501, "--port", help="Port to serve on."),
    address: str = typer.Option("127.0.0.1", "--address", help="Address to bind (loopback by default)."),
) -> None:
    """Serve the Streamlit Pareto dashboard for a run (Ctrl-C stops it)."""
    from hwnas.dashboard import serve
    from hwnas.dashboard.data import find_runs

    if not run.exists():
        raise InputError(f"{run} does not exist; pass a run directory made by `hwnas profile --run DIR`")
    if not find_runs(run):
        raise InputError(f"{run} holds no hwnas run (no config.yaml); pass a run directory or a folder of runs")
    if not 0 < port < 65536:
        raise InputError(f"--port must be within 1..65535, got {port}")
    _check_bindable(address, port)
    need("streamlit")  # the server is a child process: name the extra here, not in its traceback
    err_console.print(f"dashboard for {run} at http://{address}:{port}  (Ctrl-C to stop)")
    raise typer.Exit(serve(run, port, address))
