"""`hwnas accuracy`: the accuracy table and its predictor."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import (DataOpt, accuracy_app, at_least_one, check_out_file, console, data_config,
                           err_console, make_table, seed_option)


@accuracy_app.command("build")
def accuracy_build(
    run: Path = typer.Option(..., "--run", "--run-dir", help="Run directory (created with the shipped supernet "
                             "if new). Under torchrun write --run-dir: torchrun takes --run for its own --run-path."),
    samples: int = typer.Option(1000, "--samples", help="Subnets in the table (a larger number extends it)."),
    bn_images: Optional[int] = typer.Option(None, "--bn-images", help="Training images for each subnet's BN "
                                            "recalibration (default: 2000, what every other evaluation in "
                                            "hwnas uses)."),
    seed: int = seed_option(),
    data: Optional[str] = DataOpt,
) -> None:
    """Evaluate sampled subnets on the validation split into <run>/accuracy.csv (resumable;
    under `torchrun --nproc_per_node N -m hwnas accuracy build ...` the ranks share the work)."""
    import os

    from hwnas.accuracy import build_accuracy_table, read_accuracy_table
    from hwnas.progress import EventProgress
    from hwnas.run import open_run

    at_least_one(("--samples", samples), ("--bn-images", bn_images))
    cfg = open_run(run, data=data_config(data))
    quiet = int(os.environ.get("RANK", 0)) != 0
    with EventProgress(err_console, disable=quiet) as bar:
        table = build_accuracy_table(cfg, samples, seed=seed, bn_images=bn_images, progress=bar)
    if not quiet:
        top1 = table["top1"]  # the rows of the `samples` asked for; the file may hold more
        held = len(read_accuracy_table(cfg.run_dir, cfg.files.accuracy.name, cfg.space))
        err_console.print(f"{cfg.files.accuracy}: {held} subnets; val top-1 of the {len(table)} asked for "
                          f"{top1.min():.2f}"
                          f"..{top1.max():.2f}% (median {top1.median():.2f}%)", highlight=False)


def _accuracy_report_table(report: dict) -> None:
    from rich.markup import escape  # names like ridge[compact] are not markup

    cands = make_table("predictor", "MAE (pts)", "RMSE", "bias", "Kendall tau", "fit s",
                   title=f"out-of-fold ({report['folds']}-fold) on {report['table_rows']} subnets")
    for c in report["candidates"]:
        name = c["kind"] + (f"[{c['settings']['features']}]" if c["settings"].get("features") else "")
        mark = " *" if c["kind"] == report["chosen"]["kind"] and c["settings"] == report["chosen"]["settings"] else ""
        cands.add_row(escape(name + mark), f"{c['mae']:.3f}", f"{c['rmse']:.3f}", f"{c['bias']:+.3f}",
                      f"{c['kendall_tau']:.3f}", f"{c['seconds']:.1f}")
    console.print(cands)
    curve = make_table("rows", "MAE", "Kendall tau", title=escape(f"learning curve of {report['chosen']['name']}"))
    for row in report["learning_curve"]:
        curve.add_row(str(row["rows"]), f"{row['mae']:.3f}", f"{row['kendall_tau']:.3f}")
    console.print(curve)
    oof = report["oof"]
    err_console.print(f"chosen: {escape(report['chosen']['name'])}: out-of-fold MAE {oof['mae']:.3f} pts, Kendall tau "
                      f"{oof['kendall_tau']:.3f}, {100 * oof['within_1_sigma']:.0f}% within one sigma; "
                      f"predictions clipped to {report['clip'][0]:.2f}..{report['clip'][1]:.2f}%", highlight=False)


@accuracy_app.command("fit")
def accuracy_fit(run: Path = typer.Option(..., "--run", help="Run directory with an accuracy table."),
                 seed: int = seed_option()) -> None:
    """Choose the accuracy predictor by out-of-fold error and save it to <run>/predictors/accuracy.json."""
    from hwnas.accuracy import ACCURACY_PREDICTOR, fit_accuracy_predictor
    from hwnas.run import open_run

    _, report = fit_accuracy_predictor(open_run(run, create=False), seed=seed)
    _accuracy_report_table(report)
    err_console.print(f"saved {run / ACCURACY_PREDICTOR}", highlight=False)


@accuracy_app.command("eval")
def accuracy_eval(run: Path = typer.Option(..., "--run", help="Run directory with an accuracy table."),
                  seed: int = seed_option(),
                  out: Optional[Path] = typer.Option(None, "--out", help="Write the report as JSON.")) -> None:
    """Out-of-fold MAE, bias and Kendall tau of every predictor kind, and the learning curve
    (nothing is saved in the run)."""
    from hwnas.accuracy import fit_accuracy_predictor
    from hwnas.fileio import atomic_write_json
    from hwnas.run import open_run

    check_out_file(out)
    _, report = fit_accuracy_predictor(open_run(run, create=False), seed=seed, save=False)
    _accuracy_report_table(report)
    if out:
        atomic_write_json(out, report)


# -- quickstart -----------------------------------------------------------------------------
