"""`hwnas quickstart`: the whole pipeline on the embedded default."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import app, console, err_console, make_table
from hwnas.cli.search import accuracy_checks_text, top1_text
from hwnas.errors import InputError


@app.command("quickstart")
def quickstart_cmd(
    run: Path = typer.Option(Path("runs/quickstart"), "--run", help="Run directory."),
    device: str = typer.Option("cpu-ort", "--device", help="Device to profile, search for and export to."),
    samples: int = typer.Option(60, "--samples", help="Random subnets profiled for the latency predictor."),
    front_samples: int = typer.Option(16, "--front-samples", help="Then subnets along the predicted Pareto front "
                                      "(where the search decides; the latency predictor is refitted). 0: none."),
    accuracy_samples: int = typer.Option(200, "--accuracy-samples", help="Subnets evaluated for the "
                                         "accuracy predictor."),
    latency_ms: Optional[float] = typer.Option(None, "--latency-ms", help="Budget (default: 40% of the "
                                               "way from the fastest to the slowest profiled subnet)."),
    top_k: int = typer.Option(3, "--top-k", help="Candidates measured on the device."),
) -> None:
    """The whole pipeline on the shipped supernet: profile, fit, search, verify, export."""
    from hwnas.accuracy.api import MIN_ROWS
    from hwnas.progress import EventProgress
    from hwnas.quickstart import QuickstartSettings, quickstart

    if latency_ms is not None and latency_ms <= 0:
        raise InputError(f"--latency-ms must be positive, got {latency_ms}")
    if front_samples < 0:
        raise InputError(f"--front-samples must be 0 or more, got {front_samples}")
    if accuracy_samples < MIN_ROWS:  # refused before profiling, not at the accuracy stage
        raise InputError(f"--accuracy-samples must be at least {MIN_ROWS} (the fewest subnets an accuracy "
                         f"predictor is fitted on), got {accuracy_samples}")
    settings = QuickstartSettings(run_dir=run, device=device, samples=samples, front_samples=front_samples,
                                  accuracy_samples=accuracy_samples, budget_ms=latency_ms, top_k=top_k)
    with EventProgress(err_console) as bar:
        res = quickstart(settings, log=lambda m: bar.progress.console.print(m, highlight=False), progress=bar)
    _print_quickstart(res)
    if res.bundle is None:
        raise typer.Exit(1)


def _print_quickstart(res) -> None:
    from rich.markup import escape

    from hwnas.export.budget import bundle_latency
    from hwnas.search.versus import baselines_summary

    s = res.settings
    rep = res.latency_report.get("chosen_metrics", {})
    summary = make_table("", "", title="hwnas quickstart", show_header=False)
    summary.add_row("device", s.device)
    summary.add_row("latency predictor", f"{res.latency_report.get('chosen', 'reused')}"
                    + (f" (CV: {100 * rep['within_10']:.0f}% within ±10%, Kendall tau {rep['kendall_tau']:.2f})"
                       if rep else ""))
    acc = (getattr(res.search, "accuracy_report", None) or {}) if res.search is not None else {}
    if acc.get("oof"):
        summary.add_row("accuracy predictor", escape(f"{acc['chosen']['name']}") + f" (out-of-fold on {acc['table_rows']} subnets: "
                        f"MAE {acc['oof']['mae']:.2f} pts, Kendall tau {acc['oof']['kendall_tau']:.2f})")
    checks = res.search.accuracy_checks if res.search is not None else None
    if checks:
        summary.add_row("accuracy, held-out", accuracy_checks_text(checks))
    from hwnas.latency.trust import order_text, trust_warning

    trust = (res.search.latency_trust or {}).get(s.device) if res.search is not None else None
    if trust:
        summary.add_row("latency, held-out", f"{trust['n']} subnets measured after the fit: median error "
                        f"{100 * trust['median_abs_error']:.0f}% ({100 * trust['median_error']:+.0f}% bias), "
                        f"{100 * trust['within_10']:.0f}% within ±10%, {order_text(trust)}")
        if trust["poor"]:
            summary.add_row("POOR latency predictor", trust_warning(s.device, trust))
    if res.search is not None and res.search.tie:
        summary.add_row("tie", res.search.tie["message"])
    summary.add_row("budget", f"{res.budget_ms} ms (accepted: measured x (1 + margin + 2 SE) within it)")
    if res.search is not None and res.search.best:
        b = res.search.best[min(res.shipped, len(res.search.best) - 1)]
        meas = b["measured_ms"].get(s.device)
        shipped = "shipped subnet" if not res.passed_over else f"shipped subnet (not {', '.join(res.passed_over)}: over budget at export)"
        summary.add_row(shipped, f"{b['id']}  {b['describe']}")
        summary.add_row("top-1 pred / measured", top1_text(b) + " %")
        summary.add_row("latency pred / measured", f"{b['ms_pred'][s.device]:.3f} / "
                        + ("-" if meas is None else f"{meas:.3f}") + " ms (search verification; the bundle records it)")
        summary.add_row("front", f"{int(res.search.front['on_front'].sum())} subnets  ({res.search.paths['pareto_csv']})")
    line = baselines_summary(res.search.baselines) if res.search is not None else None
    if line:
        summary.add_row("baselines", line + " (`hwnas baseline --run " + str(s.run_dir) + "` lists them)")
    if res.bundle is not None:
        m = res.bundle_meta
        within = bundle_latency(m)[1]
        budget = "" if within is None else (", within budget when export re-measured it" if within
                                            else ", OVER the budget when export re-measured it")
        summary.add_row("export", escape(f"{res.bundle}  [{m['status']}{budget}], test top-1 "
                                         f"{m['accuracy']['top1']:.2f}%"))
    summary.add_row("time per stage", ", ".join(f"{k.split()[0].rstrip(':')} {v}s" for k, v in res.stages.items()))
    summary.add_row("dashboard", f"hwnas dashboard --run {s.run_dir}")
    console.print(summary)


# -- export ---------------------------------------------------------------------------------
