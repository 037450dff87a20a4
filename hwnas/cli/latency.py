"""`hwnas latency`: fit, predict and evaluate latency predictors."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import (DEFAULT, DEFAULT_COLUMNS, OTHER_FAMILIES, at_least_one, check_out_file, console,
                           err_console, family_option, latency_app, make_table, seed_option)
from hwnas.errors import InputError
from hwnas.families import DEFAULT_FAMILY


# Below this many rows a latency fit's cross-validation scores a handful of points: the chosen kind
# and its numbers are luck (3 rows measured tau -0.33, 10 rows of the same table 0.73).
FEW_LATENCY_ROWS = 10


def _print_fit(pred, report: dict) -> None:
    m = report["chosen_metrics"]
    console.print(f"chose [bold]{report['chosen']}[/] by {report['folds']}-fold CV over {report['n_rows']} rows: "
                  f"{100 * m['within_10']:.1f}% within ±10%, {100 * m['within_5']:.1f}% within ±5%, "
                  f"MAPE {m['mape']:.1f}%, Kendall tau {m['kendall_tau']:.3f}", highlight=False)
    if report["n_rows"] < FEW_LATENCY_ROWS:
        err_console.print(f"warning: {report['n_rows']} rows are too few to trust this choice or its CV "
                          f"numbers; measure at least {FEW_LATENCY_ROWS} subnets (`hwnas profile --samples "
                          "auto` profiles until the predictor stops improving)", highlight=False)
    err_console.print(f"wrote {report['path']}")


@latency_app.command("fit")
def latency_fit(
    run: Optional[Path] = typer.Option(None, "--run", help="Fit from this run's measurements (with --device)."),
    device: Optional[str] = typer.Option(None, "--device", help="Device whose measurements to fit."),
    table: Optional[Path] = typer.Option(None, "--table", help="Or: a CSV of flat rows + a latency column."),
    target: Optional[str] = typer.Option(None, "--target", help="Latency column in ms (default with --run: "
                                         "corrected_ms)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Predictor JSON (default with --run: "
                                       "RUN/predictors/latency-DEVICE.json)."),
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Width multiplier of the rows' "
                                               "network (default: the run's, or 1.0)."),
    classes: Optional[int] = typer.Option(None, "--classes", help="Classes of the rows' network "
                                          "(default: the run's, or 1000)."),
    base: Optional[Path] = typer.Option(None, "--base", help="Predictor of another device: few-shot transfer."),
    kind: list[str] = typer.Option([], "--kind", help="Restrict to these predictor kinds (repeatable)."),
    entries: Optional[Path] = typer.Option(None, "--entries", help="Per-block entries CSV for a lookup table."),
    seed: int = seed_option(),
    family: Optional[str] = family_option(f"With --table: the rows' search-space family: {DEFAULT_FAMILY} (the "
                                          f"default), {OTHER_FAMILIES}. A run's is its own."),
) -> None:
    """Fit a device's latency predictor, choosing the best kind by cross-validation."""
    from hwnas.latency.api import fit_from_run, fit_from_table

    kinds = kind or None
    if (run is None) == (table is None):
        raise InputError("give either --run DIR --device D, or --table FILE.csv --target COLUMN --out PRED.json")
    if classes is not None and classes < 1:
        raise InputError(f"--classes must be at least 1, got {classes}")
    if width_mult is not None and not 0 < width_mult < float("inf"):
        raise InputError(f"--width-mult must be positive, got {width_mult}")
    check_out_file(out)
    if run is not None:
        from hwnas.run import open_run

        if device is None:
            raise InputError("--run needs --device (the device whose measurements to fit)")
        cfg = open_run(run, create=False)
        if family is not None and family != cfg.family.name:
            raise InputError(f"run {run} is an {cfg.family.name} run; leave out --family {family}")
        pred, report = fit_from_run(run, device, out_json=out, target=target or "corrected_ms",
                                    width_mult=width_mult or cfg.space.width_mult,
                                    n_classes=classes or cfg.n_classes, base=base, kinds=kinds, seed=seed,
                                    family=cfg.family.name)
    else:
        if target is None or out is None:
            raise InputError("--table needs --target COLUMN (latency in ms) and --out PRED.json")
        from hwnas.families import DEFAULT_FAMILY, NetworkSpec, get_family

        fam = get_family(family or DEFAULT_FAMILY)
        net = NetworkSpec(fam.name, width_mult or fam.default_width, classes or 1000)
        pred, report = fit_from_table(table, target, out, net=net, base=base, kinds=kinds, entries=entries,
                                      device=device or "", seed=seed)
        report["path"] = str(out)
    _print_fit(pred, report)


@latency_app.command("predict")
def latency_predict(
    predictor: Path = typer.Option(..., "--predictor", help="Predictor JSON from `hwnas latency fit`."),
    table: Path = typer.Option(..., "--table", help="CSV of flat rows: r and the "
                               f"predictor's family's genes ({DEFAULT_FAMILY}: {DEFAULT_COLUMNS})."),
    out: Path = typer.Option(..., "--out", help="Where to write the rows with a predicted_ms column."),
    column: str = typer.Option("predicted_ms", "--column", help="Name of the added column."),
) -> None:
    """Predict the latency of every row of a table."""
    from hwnas.latency.api import predict_table

    check_out_file(out)
    df = predict_table(predictor, table, out, column=column)
    err_console.print(f"wrote {len(df)} rows to {out}")


@latency_app.command("eval")
def latency_eval(
    table: Optional[Path] = typer.Option(None, "--table", help="Measured table (flat rows + latency column)."),
    target: Optional[str] = typer.Option(None, "--target", help="Latency column in ms."),
    run: Optional[Path] = typer.Option(None, "--run", help="Or: a run's measurements (with --device)."),
    device: Optional[str] = typer.Option(None, "--device", help="With --run: the device whose measurements "
                                         "to evaluate on."),
    predictor: Optional[Path] = typer.Option(None, "--predictor", help="Also score this predictor on every row."),
    kind: Optional[str] = typer.Option(None, "--kind", help="Learning curve of one kind (default: CV choice)."),
    sizes: str = typer.Option("10,20,50,100,200,500", "--sizes", help="Training rows of the learning curve."),
    test_fraction: float = typer.Option(0.25, "--test-fraction", help="Share of the rows held out to "
                                        "score the learning curve on."),
    repeats: int = typer.Option(1, "--repeats", help="Average the curve over reshuffles."),
    repeat_column: Optional[str] = typer.Option(None, "--repeat-column", help="A second measurement of the "
                                                "same rows: the repeatability to compare with."),
    base: Optional[Path] = typer.Option(None, "--base", help="Few-shot transfer from this predictor."),
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Default: the run's, else "
                                               f"the family's ({DEFAULT_FAMILY}: {DEFAULT.default_width})."),
    classes: int = typer.Option(1000, "--classes", help="With --table: classes of the rows' network."),
    seed: int = seed_option(),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the full report as JSON."),
    family: Optional[str] = family_option(f"With --table: the rows' search-space family: {DEFAULT_FAMILY} (the "
                                          f"default), {OTHER_FAMILIES}. A run's is its own."),
) -> None:
    """Held-out accuracy of latency prediction: within ±5/10%, RMSE, MAPE, Kendall, Spearman, learning curve."""
    from hwnas.families import DEFAULT_FAMILY, NetworkSpec, get_family
    from hwnas.latency.api import evaluate_predictor, evaluate_run

    try:
        size_list = [int(v) for v in sizes.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
    if not 0 < test_fraction < 1:
        raise InputError(f"--test-fraction must be in (0, 1), got {test_fraction}")
    at_least_one(("--repeats", repeats))
    check_out_file(out)
    settings = dict(predictor_json=predictor, kind=kind, sizes=size_list, test_fraction=test_fraction,
                    repeats=repeats, repeat_column=repeat_column, base=base, seed=seed, out_json=out)
    if run is not None:
        if device is None:
            raise InputError("--run needs --device")
        if family is not None or width_mult is not None:
            raise InputError("--family and --width-mult describe --table rows; a run has its own, leave them out")
        report = evaluate_run(run, device, target or "corrected_ms", **settings)
    elif table is None or target is None:
        raise InputError("give --table FILE.csv --target COLUMN, or --run DIR --device D")
    else:
        fam = get_family(family or DEFAULT_FAMILY)
        width = width_mult if width_mult is not None else fam.default_width
        report = evaluate_predictor(table, target, net=NetworkSpec(fam.name, width, classes), **settings)
    metrics = ("within_5", "within_10", "rmse_ms", "mape", "kendall_tau", "spearman_rho")
    if "heldout" in report:
        h = report["heldout"]
        console.print("predictor on every row: " + ", ".join(f"{k} {h[k]:.3f}" for k in metrics), highlight=False)
    if "repeatability" in report:
        r = report["repeatability"]
        console.print(f"repeatability ({r['column']}): {100 * r['within_5']:.1f}% within ±5%, "
                      f"{100 * r['within_10']:.1f}% within ±10%", highlight=False)
    held_out = f" ({report['learning_curve'][0]['n_test']} held out)" if report["learning_curve"] else ""
    curve = make_table("train rows", "within ±5%", "within ±10%", "RMSE ms", "MAPE %", "Kendall", "Spearman",
                   "FLOPs-only ±5/10%", "FLOPs-only Kendall", "before priors ±5/10%", "before priors Kendall",
                   title="learning curve" + held_out)
    for row in report["learning_curve"]:
        f, t = row["flops_baseline"], row["today_baseline"]
        curve.add_row(str(row["n_train"]), f"{100 * row['within_5']:.1f}", f"{100 * row['within_10']:.1f}",
                      f"{row['rmse_ms']:.4f}", f"{row['mape']:.1f}", f"{row['kendall_tau']:.3f}",
                      f"{row['spearman_rho']:.3f}", f"{100 * f['within_5']:.0f}/{100 * f['within_10']:.0f}",
                      f"{f['kendall_tau']:.3f}", f"{100 * t['within_5']:.0f}/{100 * t['within_10']:.0f}",
                      f"{t['kendall_tau']:.3f}")
    console.print(curve)


# -- agent ----------------------------------------------------------------------------------
