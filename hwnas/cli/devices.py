"""`hwnas devices`: the built-in and user devices, and whether they run here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import DevicesOpt, ListFormat, devices_app, format_option, make_table, print_rows, renamed


@devices_app.command("list")
def devices_list(devices_file: Optional[Path] = DevicesOpt,
                 fmt: Optional[ListFormat] = format_option(),
                 as_json: bool = typer.Option(False, "--json", hidden=True, help="Old name of --format json."),
                 check: bool = typer.Option(False, "--check", help="Also ask each remote device's agent "
                                            "(sends its token); without it no host is contacted."),
                 ) -> None:
    """Every device, its backend and options, and whether it can run here (and why not).
    json and csv give every field (`available`: empty when the device runs here, else why not)."""
    from rich.markup import escape

    from hwnas.devices import list_devices

    fmt = renamed("--format", fmt, "--json", ListFormat.json if as_json else None, ListFormat.table)
    rows = list_devices(devices_file, check_remote=check)
    table = make_table("device", "backend", "options", "status", "source")
    for r in rows:
        status = "[green]ok[/]" if r["available"] is None else f"[yellow]unavailable:[/] {escape(r['available'])}"
        table.add_row(escape(r["name"]), r["backend"], escape(str(r["options"])), status, r["source"])
    print_rows(rows, fmt, table)


@devices_app.command("show")
def devices_show(name: str = typer.Argument(..., help="Device name."),
                 devices_file: Optional[Path] = DevicesOpt) -> None:
    """One device's settings, availability, runtime versions and this host's anchors, as JSON."""
    from hwnas.devices import get_backend, get_device
    from hwnas.profiling.anchors import AnchorBook

    device = get_device(name, devices_file)
    backend = get_backend(name, devices_file)
    reason = backend.available()
    book = AnchorBook()
    info = {**device.model_dump(mode="json"), "available": reason is None, "reason": reason,
            "versions": backend.versions() if reason is None else {},
            "anchors": {"book": str(book.path), "entries": book.entries(device.name)}}
    typer.echo(json.dumps(info, indent=2))


# -- latency --------------------------------------------------------------------------------
