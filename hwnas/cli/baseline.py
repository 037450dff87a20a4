"""`hwnas baseline`: a hand-designed network trained alone on the run's data, timed on its devices."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import DevicesOpt, app, console, data_config, err_console, make_table, seed_option


@app.command("baseline")
def baseline_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory."),
    model: list[str] = typer.Option([], "--model", help="A timm model, e.g. timm:mobilenetv3_small_100 "
                                    "(repeat for several; any name in timm's registry, trained from scratch)."),
    resolution: Optional[int] = typer.Option(None, "--resolution", min=8, max=1024,
                                             help="Input size it trains and runs at (default: the space's largest)."),
    epochs: int = typer.Option(30, "--epochs", min=1, max=10_000, help="Passes over the training split."),
    data: Optional[str] = typer.Option(None, "--data", help="Training data (default: the run's)."),
    device: list[str] = typer.Option([], "--device", help="Also time it on this device (repeat for several)."),
    devices_file: Optional[Path] = DevicesOpt,
    seed: int = seed_option(help="Seed of the weights, the data order and dropout."),
) -> None:
    """Train timm models alone on the run's training split with the supernet's recipe (resumable:
    the same command continues), score them on the test split and time them on devices, so search
    and the dashboard show the front against what you would otherwise ship. Without --model: list
    the run's baselines (its own and the shipped accuracies for the embedded default)."""
    from hwnas.baselines import BaselineRecipe, profile_key, run_baselines, train_run_baseline
    from hwnas.baselines.stage import parse_model
    from hwnas.errors import InputError
    from hwnas.progress import make_progress
    from hwnas.run import open_run

    names = [parse_model(m) for m in model]  # every spec checked before anything slow
    cfg = open_run(run, create=False)
    data_cfg = data_config(data)
    recipe = BaselineRecipe(epochs=epochs, seed=seed)
    if device:
        from hwnas.profiling.stage import check_devices

        check_devices(device, devices_file)
    for name in names:
        with make_progress(err_console) as bar:
            task = bar.add_task(f"baseline {name}", total=None, info="")
            record = train_run_baseline(cfg, name, resolution, recipe, data=data_cfg,
                                        progress=lambda done, total, msg: bar.update(task, completed=done,
                                                                                     total=total, info=msg))
        err_console.print(f"{name} r{record['resolution']}: test top-1 {record['top1']:.2f}% "
                          f"(n={record['n_test']}, {record['epochs']} epochs)", highlight=False)
    rows = run_baselines(cfg)
    if not rows:
        raise InputError(f"run {run} has no baselines yet; train one: hwnas baseline --run {run} "
                         "--model timm:mobilenetv3_small_100")
    if device:
        from hwnas.profiling.stage import profile

        profile(cfg, device, 0, devices_file=devices_file,
                references=[profile_key(r["name"], r["resolution"]) for r in rows])
    from hwnas.profiling.store import read_measurements

    measured = read_measurements(cfg.run_dir, kind="model")
    table = make_table("baseline", "r", "epochs", "test top-1 %", "n", "source", "latency ms (device)")
    for r in rows:
        key = profile_key(r["name"], r["resolution"])
        times = ([] if measured.empty else
                 [f"{m.corrected_ms:.3f} ({m.device})" for m in measured[measured["key"] == key].itertuples()])
        table.add_row(r["name"], str(r["resolution"]), str(r["epochs"]), f"{r['top1']:.2f}", str(r["n_test"]),
                      r["source"], ", ".join(times) or "-")
    console.print(table)
