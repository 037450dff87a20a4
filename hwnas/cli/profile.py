"""`hwnas profile`: measure subnets on devices."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from hwnas.cli.app import (DataOpt, DevicesOpt, app, at_least_one, console, data_config, err_console,
                           make_table, seed_option)
from hwnas.errors import InputError


# -- profile --------------------------------------------------------------------------------
@app.command("profile")
def profile_cmd(
    device: list[str] = typer.Option(..., "--device", help="Device to profile (repeat for several)."),
    run: Path = typer.Option(..., "--run", help="Run directory (created if new)."),
    samples: str = typer.Option("100", "--samples", help="Subnets to measure, spread over the MACs range; or "
                                "'auto': measure where the latency predictor is least sure until its "
                                "cross-validated error stops improving."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="With --samples auto: stop "
                                                "after this many minutes per device."),
    reference: list[str] = typer.Option([], "--reference", help="Also time a timm model, e.g. "
                                        "timm:mobilenetv3_large_100 (no weights needed)."),
    supernet: Optional[Path] = typer.Option(None, "--supernet", help="Supernet checkpoint stem "
                                            "(default: the shipped one)."),
    devices_file: Optional[Path] = DevicesOpt,
    rounds: int = typer.Option(15, "--rounds", help="Rounds per subnet, each beside the reference "
                               "(drift correction)."),
    runs: int = typer.Option(10, "--runs", help="Timed runs per round."),
    seed: int = seed_option(help="Seed of the subnet selection."),
    blocks: bool = typer.Option(False, "--blocks", help="Also time every stem/block/head variant at 3 "
                                "resolutions (entries of a lookup-table predictor)."),
    recalibrate: bool = typer.Option(False, "--recalibrate", help="Measure a fresh anchor (the reference's "
                                     "latency) for devices new to this run instead of reusing this "
                                     "host's."),
    data: Optional[str] = DataOpt,
    front: int = typer.Option(0, "--front", help="Then this many subnets along the predicted Pareto front "
                              "(needs the run's accuracy predictor), and refit each device's latency "
                              "predictor: training rows where a search decides."),
) -> None:
    """Measure subnets on devices into the run's measurement store (reruns skip what exists)."""
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import check_devices, profile
    from hwnas.progress import make_progress
    from hwnas.run import open_run

    from hwnas.latency.auto_profile import AutoSettings, profile_auto
    from hwnas.search.front_profile import profile_front

    if samples.strip().lower() == "auto":
        if time_budget is not None and not time_budget > 0:
            raise InputError(f"--time-budget is in minutes and must be positive, got {time_budget}")
        chosen: Any = AutoSettings(seed=seed, budget_s=None if time_budget is None else 60 * time_budget)
        chosen.check()
    elif time_budget is not None:
        raise InputError("--time-budget goes with --samples auto")
    else:
        try:
            chosen = int(samples)
        except ValueError:
            raise InputError(f"--samples must be a number of subnets or 'auto', got {samples!r}") from None
    at_least_one(("--rounds", rounds), ("--runs", runs))
    if front < 0:
        raise InputError(f"--front must be 0 or more, got {front}")
    check_devices(device, devices_file, reference)  # before the run folder is made
    cfg = open_run(run, supernet, data=data_config(data))
    protocol = ProtocolSettings(rounds=rounds, runs=runs, seed=seed)
    with make_progress(err_console) as bar:
        tasks: dict[str, Any] = {}

        def update(dev: str, done: int, total: int, key: str) -> None:
            if dev not in tasks:
                tasks[dev] = bar.add_task(f"profile {dev}", total=total, info="")
            bar.update(tasks[dev], completed=done, total=total, info=key)

        common = dict(devices_file=devices_file, references=reference, protocol=protocol, progress=update,
                      blocks=blocks, recalibrate=recalibrate)
        results = (profile_auto(cfg, device, chosen, **common,
                                log=lambda msg: err_console.print(msg, highlight=False))
                   if isinstance(chosen, AutoSettings) else profile(cfg, device, chosen, **common))
        fronts = {dev: profile_front(cfg, dev, front, seed=seed, devices_file=devices_file, protocol=protocol,
                                     progress=update) for dev in device} if front else {}
    table = make_table("device", "measured now", "already there")
    for r in results:
        table.add_row(r["device"], str(r["measured"]), str(r["skipped"]))
    console.print(table)
    for r in results:
        if "auto" in r:
            a, last = r["auto"], r["auto"]["history"][-1]
            console.print(f"{r['device']}: took {a['samples']} subnets ({a['stopped']}); predictor "
                          f"{a['chosen']}, CV RMS log error {last['cv_rmse_log']:.4f}, "
                          f"{100 * last['cv_within_10']:.1f}% within ±10%", highlight=False)
    for dev, rep in fronts.items():
        console.print(f"{dev}: {len(rep['front'])} subnets along the predicted front; refitted {rep['chosen']}",
                      highlight=False)
    console.print(f"measurements: {cfg.files.measurements}")


# -- supernet -------------------------------------------------------------------------------
