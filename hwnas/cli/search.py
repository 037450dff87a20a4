"""`hwnas search`: flags into `SearchSettings`, `run_search`, the table."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import DevicesOpt, app, console, err_console, make_table, seed_option
from hwnas.errors import InputError
from hwnas.search.risk import DEFAULT_CONFIDENCE, DEFAULT_MARGIN


def _algo_enum() -> type[Enum]:
    """--algo's choices: the search-algorithm registry (no second list to keep)."""
    from hwnas.search.algorithms import algorithm_names

    return Enum("Algo", {name.replace("-", "_"): name for name in algorithm_names()}, type=str)


Algo = _algo_enum()
_SEARCH_FLAGS = {"n_trials": "--trials", "objectives": "--objective"}  # settings whose flag is not their name


def search_flag(setting: str) -> str:
    """The `hwnas search` flag of a `SearchSettings` field, for the library's error lines."""
    return _SEARCH_FLAGS.get(setting, "--" + setting.replace("_", "-"))


@app.command("search")
def search_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory (from `hwnas profile`)."),
    device: list[str] = typer.Option(..., "--device", help="Target device (repeat for several)."),
    latency_ms: list[float] = typer.Option(..., "--latency-ms", help="Budget in ms: one for all devices "
                                           "or one per --device."),
    algo: Algo = typer.Option(Algo.evolution, "--algo", help="Search algorithm."),
    pareto: bool = typer.Option(False, "--pareto", help="Return and verify the whole Pareto front."),
    workers: int = typer.Option(1, "--workers", help="Processes for the optuna-* algorithms."),
    storage: Optional[str] = typer.Option(None, "--storage", help="Optuna storage URL (postgresql://...) "
                                          "or journal file; default RUN/optuna.journal."),
    top_k: int = typer.Option(5, "--top-k", help="Candidates measured on the device."),
    seed: int = seed_option(),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Measure the winners on the device."),
    devices_file: Optional[Path] = DevicesOpt,
    generations: Optional[int] = typer.Option(None, "--generations", help="evolution/nsga2: generations "
                                              "(default 500; optuna-*: sets --trials with --population)."),
    population: Optional[int] = typer.Option(None, "--population", help="evolution/nsga2/optuna-nsga2: "
                                             "subnets per generation (default 100)."),
    trials: Optional[int] = typer.Option(None, "--trials", help="optuna-*/random: predictor calls."),
    objective: list[str] = typer.Option([], "--objective", help="Extra objectives: ms:<device>, macs, params, "
                                        "ram (ram_kb), flash (flash_kb)."),
    max_macs: Optional[float] = typer.Option(None, "--max-macs", help="Accept only subnets with at most "
                                             "this many multiply-accumulates (e.g. 3e8)."),
    max_params: Optional[float] = typer.Option(None, "--max-params", help="Accept only subnets with at most "
                                               "this many parameters (e.g. 5e6)."),
    max_ram_kb: Optional[float] = typer.Option(None, "--max-ram-kb", help="Accept only subnets whose activation "
                                               "arena (what a memory-planned ExecuTorch program reserves at batch "
                                               "1, at --precision) is at most this many kB (1 kB = 1024 bytes)."),
    max_flash_kb: Optional[float] = typer.Option(None, "--max-flash-kb", help="Accept only subnets whose weights "
                                                 "take at most this many kB at --precision."),
    accuracy_samples: Optional[int] = typer.Option(None, "--accuracy-samples", help="Grow the run's accuracy "
                                                   "table to this many subnets first (each one evaluated on "
                                                   "the validation split: seconds to minutes apiece). Default: "
                                                   "search with the table as it is."),
    accuracy_checks: Optional[int] = typer.Option(None, "--accuracy-checks", help="Candidates that must fit the "
                                                  "budget on the device; their top-1 is evaluated on the test "
                                                  "split and the best --top-k returned (default: 3 x --top-k)."),
    latency_margin: float = typer.Option(DEFAULT_MARGIN, "--latency-margin", help="Accept a subnet only if measured ms x "
                                         "(1 + margin + 2 x its standard error) is within the budget."),
    latency_confidence: float = typer.Option(DEFAULT_CONFIDENCE, "--latency-confidence", help="Search under an "
                                             "upper bound of the predicted latency at this confidence (the "
                                             "predictor's out-of-fold errors, split-conformal), so picks hold the "
                                             "budget when first measured; 0: the point prediction."),
    accuracy_risk: float = typer.Option(1.0, "--accuracy-risk", help="Search on predicted top-1 minus this many "
                                        "sigmas of the predictor's uncertainty (0: the prediction alone)."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write pareto.png (about 0.3-0.7 s)."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, bf16 or int8 (each device's <device>-bf16 / "
                                  "<device>-int8 variant; top-1 minus a drop measured on --int8-samples subnets) "
                                  "or auto (every precision the device has a variant for; the front says which "
                                  "precision each point uses)."),
    int8_samples: int = typer.Option(8, "--int8-samples", help="Subnets in the INT8 accuracy table (measured "
                                     "when it has fewer): the drop model of int8/auto."),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="With --verify: put the run's "
                                   "baselines (`hwnas baseline`) against the front: for each, the fastest subnet "
                                   "at most as slow (measured) with a test top-1 at least its own."),
    refit_rounds: int = typer.Option(1, "--refit-rounds", help="When fewer than --top-k fit on the device: "
                                     "refit the latency predictors on the verification measurements and search "
                                     "again, at most this many times (0: never)."),
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
    from hwnas.search import SearchSettings, run_search
    from hwnas.search.goals import objectives_beyond

    # the library checks the settings; `main` spells their names in its lines as flags
    settings = SearchSettings(
        tuple(device), tuple(latency_ms), algo=algo.value, pareto=pareto, workers=workers, storage=storage,
        top_k=top_k, seed=seed, verify=verify, devices_file=devices_file,
        objectives=objectives_beyond(device, objective), max_macs=max_macs, max_params=max_params,
        max_ram_kb=max_ram_kb, max_flash_kb=max_flash_kb,
        population=population, generations=generations, n_trials=trials, accuracy_samples=accuracy_samples,
        accuracy_checks=accuracy_checks, latency_margin=latency_margin, accuracy_risk=accuracy_risk,
        latency_confidence=latency_confidence,
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
                       title="the front against hand-designed baselines (measured)")
    for b in res.baselines:
        ms = b["measured_ms"].get(device)
        table.add_row(b["name"], str(b["resolution"]), f"{b['top1']:.2f} (n={b['n_test']})",
                      "-" if ms is None else f"{ms:.3f}", b["dominated_by"] or b.get("note", "-"),
                      "-" if b["dominated_by"] is None else f"{b['dominated_by_top1']:.2f}",
                      "-" if b["dominated_by"] is None else f"{b['dominated_by_ms']:.3f}")
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
