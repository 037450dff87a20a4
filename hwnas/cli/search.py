"""`hwnas search`: flags into `SearchSettings`, `run_search`, the table."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import (DevicesOpt, app, console, err_console, make_table, name_flag, seed_option,
                           setting_option)
from hwnas.errors import InputError
from hwnas.search.settings import SearchSettings
from hwnas.settings import field_default, field_help


def _algo_enum() -> type[Enum]:
    """--algo's choices: the search-algorithm registry (no second list to keep)."""
    from hwnas.search.algorithms import algorithm_names

    return Enum("Algo", {name.replace("-", "_"): name for name in algorithm_names()}, type=str)


Algo = _algo_enum()
@app.command("search")
def search_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory (from `hwnas profile`)."),
    device: list[str] = setting_option(SearchSettings, "device"),
    latency_ms: list[float] = setting_option(SearchSettings, "latency_ms"),
    algo: Algo = typer.Option(Algo(field_default(SearchSettings, "algo")), "--algo",
                              help=field_help(SearchSettings, "algo")),
    pareto: bool = setting_option(SearchSettings, "pareto"),
    workers: int = setting_option(SearchSettings, "workers"),
    storage: Optional[str] = setting_option(SearchSettings, "storage"),
    top_k: int = setting_option(SearchSettings, "top_k"),
    seed: int = seed_option(),
    verify: bool = setting_option(SearchSettings, "verify", "--verify/--no-verify"),
    devices_file: Optional[Path] = DevicesOpt,
    generations: Optional[int] = setting_option(SearchSettings, "generations"),
    population: Optional[int] = setting_option(SearchSettings, "population"),
    trials: Optional[int] = setting_option(SearchSettings, "n_trials", "--trials"),
    objective: list[str] = typer.Option([], name_flag("objectives", "--objective"),
                                        help=field_help(SearchSettings, "objectives")),
    max_macs: Optional[float] = setting_option(SearchSettings, "max_macs"),
    max_params: Optional[float] = setting_option(SearchSettings, "max_params"),
    max_ram_kb: Optional[float] = setting_option(SearchSettings, "max_ram_kb"),
    max_flash_kb: Optional[float] = setting_option(SearchSettings, "max_flash_kb"),
    accuracy_samples: Optional[int] = setting_option(SearchSettings, "accuracy_samples"),
    accuracy_checks: Optional[int] = setting_option(SearchSettings, "accuracy_checks"),
    latency_margin: float = setting_option(SearchSettings, "latency_margin"),
    latency_confidence: float = setting_option(SearchSettings, "latency_confidence"),
    ties_fastest_first: bool = setting_option(SearchSettings, "ties_fastest_first",
                                              "--ties-fastest-first/--best-predicted-first"),
    accuracy_risk: float = setting_option(SearchSettings, "accuracy_risk"),
    plot: bool = setting_option(SearchSettings, "plot", "--plot/--no-plot"),
    precision: str = setting_option(SearchSettings, "precision"),
    int8_samples: int = setting_option(SearchSettings, "int8_samples"),
    baselines: bool = setting_option(SearchSettings, "baselines", "--baselines/--no-baselines"),
    refit_rounds: int = setting_option(SearchSettings, "refit_rounds"),
    finetune_epochs: int = typer.Option(0, "--finetune-epochs", help="Then fine-tune each returned subnet "
                                        "for this many epochs (as `hwnas finetune`; `hwnas export` ships the "
                                        "weights) and report top-1 before and after. 0: no fine-tuning."),
) -> None:
    """Search the accuracy/latency Pareto front under a latency budget, then verify on the device:
    top-1 on the test split and latency with margin for measurement noise. The accuracy predictor
    is fitted on the run's accuracy table as it is (`hwnas accuracy build` grows it, or
    --accuracy-samples)."""
    from hwnas.progress import EventProgress
    from hwnas.run import open_run
    from hwnas.search import run_search
    from hwnas.search.goals import objectives_beyond

    # the library checks the settings; `main` spells their names in its lines as flags
    settings = SearchSettings(
        tuple(device), tuple(latency_ms), algo=algo.value, pareto=pareto, workers=workers, storage=storage,
        top_k=top_k, seed=seed, verify=verify, devices_file=devices_file,
        objectives=objectives_beyond(device, objective), max_macs=max_macs, max_params=max_params,
        max_ram_kb=max_ram_kb, max_flash_kb=max_flash_kb,
        population=population, generations=generations, n_trials=trials, accuracy_samples=accuracy_samples,
        accuracy_checks=accuracy_checks, latency_margin=latency_margin, accuracy_risk=accuracy_risk,
        latency_confidence=latency_confidence, ties_fastest_first=ties_fastest_first,
        plot=plot, precision=precision, int8_samples=int8_samples, baselines=baselines, refit_rounds=refit_rounds)
    finetune = _finetune_settings(finetune_epochs, seed)
    with EventProgress(err_console) as bar:
        res = run_search(run, settings, progress=bar)
    _print_best(res)
    if finetune is not None and res.best:
        _finetune_best(open_run(run, create=False), res, finetune)
    if not res.ok:
        raise typer.Exit(1)


def _finetune_settings(epochs: int, seed: int):
    """--finetune-epochs checked before the search runs (None: no fine-tuning)."""
    if epochs < 0:
        raise InputError(f"--finetune-epochs must be 0 (no fine-tuning) or more, got {epochs}")
    if epochs == 0:
        return None
    from hwnas.supernet.finetune import FinetuneSettings

    return FinetuneSettings(epochs=epochs, seed=seed)


def finetune_arch(cfg, arch, settings, data_cfg=None) -> dict:
    """Fine-tune one subnet with a progress bar; its record (top-1 before and after, seconds)."""
    from hwnas.progress import make_progress
    from hwnas.supernet.finetune import finetune_subnet

    with make_progress(err_console) as bar:
        task = bar.add_task(f"finetune {arch.id}", total=None, info="")
        return finetune_subnet(cfg, arch, settings, data=data_cfg,
                               progress=lambda done, total, msg: bar.update(task, completed=done,
                                                                             total=total, info=msg))


def _finetune_best(cfg, res, settings) -> None:
    """search --finetune-epochs: fine-tune the search's returned subnets one after the other."""
    from hwnas.export.resolve import resolve_subnet

    ids = list(dict.fromkeys(b["id"] for b in res.best))  # --precision auto may return an id twice
    err_console.print(f"fine-tuning {len(ids)} subnet(s) for {settings.epochs} epoch(s) each: every epoch is a "
                      "pass over the training split, distilled from the largest subnet; this takes a while "
                      "(the first subnet's time is the estimate for the others)", highlight=False)
    table = make_table("id", "val top-1 before → after %", "test top-1 before → after %", "seconds",
                   title=f"fine-tuned ({settings.epochs} epoch(s) each)")
    for i, sid in enumerate(ids):
        started = time.monotonic()
        record = finetune_arch(cfg, resolve_subnet(cfg, sid).arch, settings)
        seconds = time.monotonic() - started  # with loading and evaluation: what the next one costs
        if i == 0 and len(ids) > 1:
            err_console.print(f"{sid} took {seconds:.0f} s; the other {len(ids) - 1}: about "
                              f"{seconds * (len(ids) - 1) / 60:.1f} minutes", highlight=False)
        before, after = record["top1_before"], record["top1_after"]
        table.add_row(sid, *(f"{before[s]:.2f} → {after[s]:.2f}" for s in ("val", "test")), f"{seconds:.0f}")
    console.print(table)
    err_console.print(f"weights in {cfg.files.finetuned('<id>')}; `hwnas export --run {cfg.run_dir} --subnet ID "
                      "--device D` ships them", highlight=False, soft_wrap=True)


def accuracy_checks_text(checks: dict) -> str:
    """The accuracy predictor against the search's test-split checks, in one line."""
    return (f"predicted vs test top-1 of the {checks['n']} subnets verification evaluated: MAE "
            f"{checks['mae']:.2f} pts, bias {checks['bias']:+.2f} (positive: predicted too high), Kendall tau "
            + ("-" if checks.get("kendall_tau") is None else f"{checks['kendall_tau']:.2f}"))


def top1_text(best: dict) -> str:
    meas = best.get("measured_top1")
    return f"{best['top1_pred']:.2f} / " + ("-" if meas is None else f"{meas:.2f} (test)")


def print_baselines(res) -> None:
    """The front against the run's baselines: a table and the one-line summary."""
    from hwnas.search.versus import baselines_summary

    if not res.baselines:
        return
    device = res.devices[0]
    table = make_table("baseline", "r", "test top-1 %", f"{device} ms", "beaten by", "its top-1 %", "its ms",
                       "its ms / baseline's (together)", title="the front against hand-designed baselines (measured)")
    for b in res.baselines:
        ms, paired = b["measured_ms"].get(device), b.get("latency_ratio")
        table.add_row(b["name"], str(b["resolution"]), f"{b['top1']:.2f} (n={b['n_test']})",
                      "-" if ms is None else f"{ms:.3f}", b["dominated_by"] or b.get("note", "-"),
                      "-" if b["dominated_by"] is None else f"{b['dominated_by_top1']:.2f}",
                      "-" if b["dominated_by"] is None else f"{b['dominated_by_ms']:.3f}",
                      "-" if not paired else f"{paired['ratio']:.3f} ± {paired['ratio'] * paired['rel_se']:.3f}")
    console.print(table)
    line = baselines_summary(res.baselines)
    if line:
        err_console.print(line[0].upper() + line[1:] + ".", highlight=False)


def _memory_text(b: dict, key: str) -> str:
    """``pred / measured`` kB of a best entry's RAM arena or flash (measured: on the artifact)."""
    meas = b.get(f"measured_{key}")
    return f"{b[key]:.1f} / " + ("-" if meas is None else f"{meas:.1f}")


def _print_best(res) -> None:
    mixed = getattr(res, "precision", "fp32") != "fp32"
    memory = any("measured_ram_kb" in b for b in res.best)  # shown when the search had a memory limit
    table = make_table("id", *(["precision"] if mixed else []), "arch", "top-1 % pred / measured",
                   *[f"{d} ms pred / measured" for d in res.devices], "MMACs",
                   *(["RAM kB pred / measured", "flash kB pred / measured"] if memory else []),
                   title=f"best subnets ({res.algo})")
    for b in res.best:
        lat = []
        for d in res.devices:
            meas = b["measured_ms"].get(d)
            on = b.get("latency_devices", {}).get(d, d)
            lat.append(f"{b['ms_pred'][d]:.3f} / " + ("-" if meas is None else f"{meas:.3f}")
                       + (f" ({on})" if on != d else ""))
        table.add_row(b["id"], *([b.get("precision", "fp32")] if mixed else []), b["describe"], top1_text(b),
                      *lat, f"{b['macs'] / 1e6:.1f}",
                      *([_memory_text(b, "ram_kb"), _memory_text(b, "flash_kb")] if memory else []))
    console.print(table)
    if getattr(res, "accuracy_checks", None):
        err_console.print("accuracy, held-out: " + accuracy_checks_text(res.accuracy_checks), highlight=False)
    print_baselines(res)
    if res.message:
        err_console.print(res.message, highlight=False)
    for name, path in res.paths.items():
        err_console.print(f"{name}: {path}", highlight=False)


# -- accuracy -------------------------------------------------------------------------------
