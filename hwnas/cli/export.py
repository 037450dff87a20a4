"""`hwnas export`: deployable bundles, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import DevicesOpt, app, console, err_console, make_table, setting_option
from hwnas.errors import InputError
from hwnas.export.settings import ExportSettings


@app.command("export")
def export_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory."),
    device: str = typer.Option(..., "--device", help="Device to compile for (see `hwnas devices list`)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet id from the run's pareto.csv "
                                         "(a unique prefix works), or the arch as OFA JSON."),
    pareto: bool = typer.Option(False, "--pareto", help="Export every member of the run's pareto.csv."),
    out: Optional[Path] = typer.Option(None, "--out", help="Bundle folder (with --pareto: where the "
                                       "bundles go). Default: RUN/exports/ID-DEVICE."),
    devices_file: Optional[Path] = DevicesOpt,
    calib_batches: Optional[int] = setting_option(ExportSettings, "calib_batches"),
    verify_images: int = setting_option(ExportSettings, "verify_images"),
    measure: bool = setting_option(ExportSettings, "measure", "--measure/--no-measure"),
    max_int8_drop: float = setting_option(ExportSettings, "max_int8_drop"),
) -> None:
    """Export subnets as verified deploy bundles, compiled by the device's own backend."""
    from rich.markup import escape

    from hwnas.export import export_pareto, export_subnet, read_meta
    from hwnas.export.budget import bundle_latency
    from hwnas.export.bundle import bundle_fingerprint
    from hwnas.progress import make_progress

    if (subnet is None) == (not pareto):
        raise InputError("give exactly one of --subnet ID or --pareto")
    # the library checks them (`ExportSettings`) before anything is read; `main` spells them as these flags
    kw = dict(devices_file=devices_file, calib_batches=calib_batches, verify_images=verify_images,
              measure=measure, max_int8_drop=max_int8_drop)
    with make_progress(err_console) as bar:
        task = bar.add_task(f"export {device}", total=None, info="")

        def update(done: int, total: int, message: str) -> None:
            bar.update(task, completed=done, total=total, info=message)

        paths = (export_pareto(run, device, out, progress=update, **kw) if pareto
                 else [export_subnet(run, subnet, device, out, progress=update, **kw)])
    table = make_table("bundle", "status", "test top-1 %", "latency ms", "fingerprint (load(..., fingerprint=))")
    for path in paths:
        meta = read_meta(path)
        ms, within = bundle_latency(meta)
        top1 = f"{meta['accuracy']['top1']:.2f}"
        for precision in ("int8", "bf16"):  # a reduced-precision bundle: its own top-1 first
            record = meta["accuracy"].get(precision) or {}
            if record.get(f"top1_{precision}") is not None:
                top1 = f"{record[f'top1_{precision}']:.2f} {precision} ({top1} fp32)"
        status = meta["status"] + ("" if within is not False else ", over the search's budget")
        table.add_row(escape(str(path)), escape(status), top1, "-" if ms is None else f"{ms:.3f}",
                      bundle_fingerprint(path))
        if meta["status"].startswith("onnx-only"):
            err_console.print(f"[yellow]notice:[/] {path.name}: no engine built here ({escape(meta['status'])}); "
                              f"build it on the target: sh {path}/build.sh  or  python3 {path}/build_engine.py",
                              highlight=False, soft_wrap=True)
    console.print(table)
