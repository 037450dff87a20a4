"""`hwnas agent`: serve this machine's devices, tokens, health."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import DevicesOpt, agent_app, err_console
from hwnas.errors import InputError


@agent_app.command("serve")
def agent_serve(
    token_file: Path = typer.Option(..., "--token-file", help="File holding the shared token "
                                    "(make one with `hwnas agent token FILE`)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 for the network)."),
    port: int = typer.Option(8765, "--port", help="Port to listen on (0: any free port, printed in the banner)."),
    devices_file: Optional[Path] = DevicesOpt,
    state_dir: Optional[Path] = typer.Option(None, "--state-dir", help="Where finished results are kept "
                                             "(default ~/.local/state/hwnas/agent)."),
    max_request_bytes: int = typer.Option(64 * 2**20, "--max-request-bytes", help="Largest request accepted."),
    run_timeout: Optional[float] = typer.Option(None, "--run-timeout", help="Seconds one inference of one "
                                                "model may take; longer: stopped, 422 (default 10)."),
    compile_timeout: Optional[float] = typer.Option(None, "--compile-timeout", help="Seconds building and "
                                                    "loading one model may take (default 45; 900 on TensorRT)."),
    request_timeout: Optional[float] = typer.Option(None, "--request-timeout", help="Seconds one whole "
                                                    "request may take (default 600)."),
    max_queue: Optional[int] = typer.Option(None, "--max-queue", help="Requests that may wait for the "
                                            "device; more are answered 503 busy with Retry-After (default 4)."),
    max_connections: Optional[int] = typer.Option(None, "--max-connections", help="Open connections; a new "
                                                  "one displaces the oldest unauthenticated one (default 64)."),
    header_timeout: Optional[float] = typer.Option(None, "--header-timeout", help="Seconds a connection has "
                                                   "to send its headers (default 10)."),
    receive_timeout: Optional[float] = typer.Option(None, "--receive-timeout", help="Seconds a connection "
                                                    "has to send its whole request (default 120)."),
    stop_grace: Optional[float] = typer.Option(None, "--stop-grace", help="Seconds a measurement may "
                                               "finish after SIGTERM before it is cancelled (default 4)."),
    tls: bool = typer.Option(False, "--tls", help="Speak TLS with a self-signed certificate kept beside the "
                             "token file (made once with openssl); prints the SHA-256 fingerprint clients "
                             "pin as tls_fingerprint."),
) -> None:
    """Serve this machine's devices to remote profilers (ONNX in, latency stats out)."""
    from hwnas.devices.agent import AgentLimits, serve

    if not 0 <= port < 65536:
        raise InputError(f"--port must be within 0..65535 (0: any free port), got {port}")
    given = {"run_timeout_s": run_timeout, "compile_timeout_s": compile_timeout,
             "request_timeout_s": request_timeout, "max_queue": max_queue,
             "max_connections": max_connections, "header_timeout_s": header_timeout,
             "receive_timeout_s": receive_timeout, "stop_grace_s": stop_grace}
    limits = AgentLimits(**{k: v for k, v in given.items() if v is not None})
    serve(host, port, token_file, devices_file, state_dir, max_request_bytes, limits=limits, tls=tls,
          echo=lambda msg: err_console.print(msg, highlight=False))


@agent_app.command("token")
def agent_token(path: Path = typer.Argument(..., help="Where to write the new token (mode 0600).")) -> None:
    """Create a random token file for `hwnas agent serve` and the devices that use it."""
    from hwnas.devices.agent import create_token_file

    create_token_file(path)
    err_console.print(f"wrote a new token to {path}; copy it to the agent machine")


@agent_app.command("health")
def agent_health(device: str = typer.Argument(..., help="A remote device (with host/port) from --devices."),
                 devices_file: Optional[Path] = DevicesOpt) -> None:
    """Ask a remote device's agent how it is: versions, devices, counters."""
    from hwnas.devices import get_backend

    backend = get_backend(device, devices_file)
    if not hasattr(backend, "health"):
        raise InputError(f"device '{device}' is local, not served by an agent")
    typer.echo(json.dumps(backend.health(), indent=2))
