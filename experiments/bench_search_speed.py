"""Benchmark: wall time of one constrained evolutionary search at Once-for-All's default budget,
against Once-for-All's own `EvolutionFinder`, in the same process, interleaved.

Population 100, 25 % parents, mutation probability 0.1 / mutation ratio 0.5, 500 generations
(50,100 accuracy-predictor calls) on a real run's fitted predictors (`--run DIR`, e.g. a copy of
runs/quickstart: its latency predictor, whatever `fit_best` picked, and its accuracy predictor, at
the budget of its last search), or, without a run, on the predictors `fit_best` and a ridge pick on
the real CPU table (tests/latency/data/ofa_cpu_subnets.csv).

Compared, repeat by repeat on the same machine at the same moment (shared machines: quote ratios):
- ``hwnas``: `hwnas.search.evolution_search` (fused breeding, one fused gather per batch for every
  cost column, the accuracy predictor from gathered features/pair tables, the tables built before
  the clock starts as `run_search` does); its time split (accuracy predictor, latency predictor,
  bookkeeping) is recorded;
- ``hwnas_cli`` (with ``--run``): `search_s` of ``hwnas search --run <copy> --device D --latency-ms B
  --no-verify``, each in a fresh process (the CLI's only search in its process, as a user and
  issue 19's check time it), after the interleaved repeats; its ratio to OFA's median;
- ``ofa_evolution_finder``: the official `ofa.nas.search_algorithm.EvolutionFinder` (PyPI `ofa`)
  with its `MobileNetArchEncoder` and `AccuracyPredictor` (3x400 MLP on CPU, random weights:
  timing only), and as efficiency predictor a per-block dict lookup table (OFA's `LatencyTable`
  style) fitted to the run's latency predictor, at the same budget.

    .venv/bin/python experiments/bench_search_speed.py --run /tmp/qs_copy [--repeats 7 --reference-repeats 7]
    .venv/bin/python experiments/bench_search_speed.py --per-kind-only   # just the table below

``per_kind``: the same search with latency predictors `fit_best` fits to the real CPU table, one per
kind it can select, each timed on its fast path (``table``: exact additive table; ``vectorised``:
the model's additive parts in the fused gather, the rest batched) and with the model called directly.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hwnas.fileio import atomic_write_json
from hwnas.latency import LookupTablePredictor
from hwnas.latency.base import single_thread
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.operators import sample_mixed
from hwnas.search.problem import Problem
from hwnas.space import MAX_DEPTH, N_SLOTS, SearchSpace

CPU_TABLE = Path(__file__).resolve().parents[1] / "tests" / "latency" / "data" / "ofa_cpu_subnets.csv"


def per_kind(generations: int, population: int, repeats: int = 1) -> dict:
    """The search on latency predictors `fit_best` fits to the real CPU table (300 measured OFA
    subnets, ONNX Runtime, 10 classes), one per kind it can select, plus its unrestricted pick:
    seconds in `Problem.costs` and in the whole evolution, on the fast cost path (table or
    vectorised) and with the model called directly (``use_tables=False``)."""
    from hwnas.accuracy.predictors import RidgePredictor
    from hwnas.latency import fit_best
    from hwnas.latency.api import read_latency_table

    m, y, df = read_latency_table(CPU_TABLE, "ort_ms")
    space = SearchSpace(r_choices=tuple(sorted({int(r) for r in m[:, 0]})))
    # a ridge on 'compact' features, as `hwnas accuracy fit` picks for small tables; synthetic
    # top-1 (accuracy grows with latency): timing only
    top1 = 60 + 5 * np.log(y) + np.random.default_rng(0).normal(0, 0.5, len(y))
    acc = RidgePredictor(space, 10).fit(m, top1)
    source = fit_best(m, df["ort_median_ms"].to_numpy(np.float64) * 1.5, kinds=["analytic"], n_classes=10)[0]
    settings = EvolutionSettings(population=population, generations=generations)
    budget = float(np.median(y))
    out = {}
    for kind in ("analytic", "lut", "hybrid", "mlp", "transfer", "auto"):
        t = time.perf_counter()
        if kind == "transfer":  # few-shot: 30 rows of this device on a "source device" model
            pred, report = fit_best(m[:30], y[:30], kinds=["transfer"], n_classes=10, base=source)
        else:
            pred, report = fit_best(m, y, kinds=None if kind == "auto" else [kind], n_classes=10)
        fit_s = time.perf_counter() - t
        row = {"chosen": report["chosen"], "fit_s": round(fit_s, 3)}
        for label, fast in (("fast", True), ("direct", False)):
            t = time.perf_counter()
            problem = Problem(space, acc, {"cpu": pred}, {"cpu": budget}, n_classes=10, use_tables=fast)
            setup_s = time.perf_counter() - t
            walls, cost_s = [], []
            for i in range(repeats):
                problem.reset()
                t = time.perf_counter()
                evolution_search(problem, settings, seed=i)
                walls.append(time.perf_counter() - t)
                cost_s.append(problem.cost_s)
            row[label] = {"path": problem.cost_paths()["ms:cpu"], "fused_gather": problem.fast_paths()["fused_gather"],
                          "setup_s": round(setup_s, 4),
                          "search_s": round(min(walls), 4), "costs_s": round(min(cost_s), 4),
                          "cost_batches": problem.cost_batches,
                          "ms_per_cost_batch": round(1e3 * min(cost_s) / max(problem.cost_batches, 1), 4)}
        out[kind] = row
        print(f"{kind:<9} {row['chosen']:<38} fast[{row['fast']['path']}] costs {row['fast']['costs_s']:.3f} s "
              f"search {row['fast']['search_s']:.3f} s | direct costs {row['direct']['costs_s']:.3f} s "
              f"search {row['direct']['search_s']:.3f} s", file=sys.stderr)
    return {"table": str(CPU_TABLE.relative_to(CPU_TABLE.parents[3])), "space": space.to_dict(),
            "accuracy_predictor": "ridge[compact] (synthetic top-1)", "latency_budget_ms": budget,
            "population": population, "generations": generations, "repeats": repeats, "kinds": out}


class _OFALatencyLUT:
    """Once-for-All's efficiency predictor shape: `get_efficiency(arch_dict)` sums a per-block
    Python dict lookup (as OFA's `LatencyTable` does), here from an hwnas lookup table."""

    def __init__(self, space: SearchSpace, table) -> None:
        ri = {r: i for i, r in enumerate(space.r_choices)}
        ki = {k: i for i, k in enumerate(space.ks_choices)}
        ei = {e: i for i, e in enumerate(space.e_choices)}
        self.block_ms = {(r, s, k, e): float(table.block[ri[r], s, ki[k], ei[e]])
                         for r in space.r_choices for s in range(N_SLOTS) for k in space.ks_choices
                         for e in space.e_choices}
        self.fixed_ms = {r: float(table.fixed[ri[r]]) for r in space.r_choices}

    def get_efficiency(self, a: dict) -> float:
        r = a["image_size"]
        ms = self.fixed_ms[r]
        for stage, depth in enumerate(a["d"]):
            for j in range(depth):
                slot = stage * MAX_DEPTH + j
                ms += self.block_ms[(r, slot, a["ks"][slot], a["e"][slot])]
        return ms


def _run_problem(run_dir: str | None):
    """(Problem of a real run's fitted predictors at its budget, description). Without a run: the
    predictors `fit_best` and `hwnas accuracy fit` pick on the real CPU table (quickstart-like)."""
    from hwnas.latency import fit_best
    from hwnas.latency.api import read_latency_table

    if run_dir:
        import json

        from hwnas.accuracy import ensure_accuracy_predictor
        from hwnas.run import open_run
        from hwnas.search.problem import load_latency_predictor

        run = open_run(run_dir, create=False)
        doc = json.loads((Path(run_dir) / "search.json").read_text()) if (Path(run_dir) / "search.json").exists() else {}
        budgets = (doc.get("settings") or {}).get("budgets_ms") or {}
        device = next(iter(budgets), None) or sorted(p.stem.removeprefix("latency-")
                                                     for p in (Path(run_dir) / "predictors").glob("latency-*.json"))[0]
        budget = float(budgets.get(device, 0.9))
        lat = load_latency_predictor(run_dir, device, run.space.width_mult)
        acc = ensure_accuracy_predictor(run, 1000, seed=0)
        problem = Problem(run.space, acc, {device: lat}, {device: budget}, n_classes=run.n_classes,
                          accuracy_risk=1.0)
        return problem, {"run": str(run_dir), "device": device, "latency_budget_ms": budget,
                         "latency_predictor": lat.describe(), "accuracy_predictor": getattr(acc, "name", "?")}
    from hwnas.accuracy.predictors import RidgePredictor

    m, y, _ = read_latency_table(CPU_TABLE, "ort_ms")
    space = SearchSpace(r_choices=tuple(sorted({int(r) for r in m[:, 0]})))
    top1 = 60 + 5 * np.log(y) + np.random.default_rng(0).normal(0, 0.5, len(y))
    acc = RidgePredictor(space, 10, features="full").fit(m, top1)
    lat, report = fit_best(m, y, n_classes=10)
    budget = float(np.median(y))
    problem = Problem(space, acc, {"cpu": lat}, {"cpu": budget}, n_classes=10, accuracy_risk=1.0)
    return problem, {"run": None, "table": str(CPU_TABLE.relative_to(CPU_TABLE.parents[3])), "device": "cpu",
                     "latency_budget_ms": budget, "latency_predictor": lat.describe(),
                     "accuracy_predictor": acc.name + " (synthetic top-1)"}


def _ofa_finder(problem: Problem, seed: int):
    """Once-for-All's own EvolutionFinder (the `ofa` package) on the problem's space and budget:
    its MobileNetArchEncoder, its AccuracyPredictor (3x400 MLP, random weights: timing only) on
    CPU, and a per-block lookup table of the problem's latency predictor as efficiency predictor.
    None when the official code is not installed."""
    try:
        from ofa.nas.accuracy_predictor import AccuracyPredictor, MobileNetArchEncoder
        from ofa.nas.search_algorithm import EvolutionFinder
    except ImportError:
        return None
    import torch

    from hwnas.search.tabulate import tabulate

    space = problem.space
    device = problem.devices[0]
    sample = sample_mixed(space, 3000, np.random.default_rng(seed))
    lut = LookupTablePredictor().fit(sample, np.maximum(problem.costs(sample)[0][f"ms:{device}"], 1e-3))
    table = tabulate(lut.predict, space)
    torch.manual_seed(seed)
    enc = MobileNetArchEncoder(image_size_list=list(space.r_choices), ks_list=list(space.ks_choices),
                               expand_list=list(space.e_choices), depth_list=list(space.d_choices))
    acc = AccuracyPredictor(enc, device="cpu").eval()
    return EvolutionFinder(_OFALatencyLUT(space, table), acc), float(problem.budgets[device])


def _cli_search(run_dir: str, device: str, budget: float, repeats: int) -> dict | None:
    """`search_s` of `hwnas search --run <copy> --device D --latency-ms B --no-verify`, each in a
    fresh process (what a user, and issue 19's check, times: the CLI's first and only search in
    its process), on a temporary copy of the run (its search.json and pareto.csv are rewritten)."""
    import json
    import shutil
    import subprocess
    import tempfile

    if repeats <= 0:
        return None
    out: dict = {"search_s": [], "time_split": [], "command": ""}
    with tempfile.TemporaryDirectory(prefix="hwnas-cli-") as tmp:
        copy_dir = Path(tmp) / "run"
        shutil.copytree(run_dir, copy_dir)
        cmd = [sys.executable, "-m", "hwnas", "search", "--run", str(copy_dir), "--device", device,
               "--latency-ms", f"{budget:g}", "--no-verify"]
        out["command"] = "hwnas search --run <copy of the run> " + " ".join(cmd[6:])
        for i in range(repeats):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            metrics = json.loads((copy_dir / "search.json").read_text())["metrics"]
            out["search_s"].append(metrics["search_s"])
            out["time_split"].append(metrics.get("time_split"))
            print(f"hwnas search (CLI) run {i + 1}: search_s {metrics['search_s']:.3f} s", file=sys.stderr)
    out["min_s"], out["median_s"] = min(out["search_s"]), statistics.median(out["search_s"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=None, help="a run directory with fitted predictors (e.g. a copy of "
                    "runs/quickstart); default: predictors fitted on the real CPU table")
    ap.add_argument("--per-kind-only", action="store_true",
                    help="only the per-predictor-kind timings on the real CPU table (updates 'per_kind' "
                         "in an existing results file)")
    ap.add_argument("--per-kind-repeats", type=int, default=1)
    ap.add_argument("--no-per-kind", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--reference-repeats", type=int, default=3)
    ap.add_argument("--cli-repeats", type=int, default=3,
                    help="with --run: also time `hwnas search ... --no-verify` this many times, each in a "
                         "fresh process, on a temporary copy of the run (its search.json's search_s)")
    ap.add_argument("--generations", type=int, default=500)
    ap.add_argument("--population", type=int, default=100)
    ap.add_argument("--out", default="experiments/results/search_speed.json")
    args = ap.parse_args()

    if args.per_kind_only:
        import json

        result = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {"benchmark": "search_speed"}
        with single_thread():
            result["per_kind"] = per_kind(args.generations, args.population, args.per_kind_repeats)
        result["per_kind"]["command"] = " ".join(["python", *sys.argv])
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out, result)
        print(f"wrote {args.out}")
        return

    import optuna
    import torch

    torch.set_num_threads(1)
    load_before = os.getloadavg()
    t = time.perf_counter()
    problem, setup = _run_problem(args.run)
    problem.check_budgets()
    problem.prepare()  # as `run_search` does before its search clock
    setup_s = time.perf_counter() - t
    settings = EvolutionSettings(population=args.population, generations=args.generations)
    ofa = _ofa_finder(problem, 0)
    ours, ref, splits, calls, best = [], [], [], None, None
    # interleaved: each hwnas repeat next to an OFA one, so both see the same machine load
    for i in range(max(args.repeats, args.reference_repeats)):
        if i < args.repeats:
            problem.reset()  # counters and memo: every run starts cold
            t = time.perf_counter()
            out = evolution_search(problem, settings, seed=i)
            ours.append(time.perf_counter() - t)
            splits.append(problem.time_split(ours[-1]))
            calls, best = problem.counters(), out.history[-1]
            print(f"hwnas evolution run {i + 1}: {ours[-1]:.3f} s, best predicted top-1 {best:.2f}",
                  file=sys.stderr)
        if ofa is not None and i < args.reference_repeats:
            finder, budget = ofa
            random.seed(i), np.random.seed(i)
            with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):  # it prints every 100
                t = time.perf_counter()
                finder.run_evolution_search(budget, verbose=False, population_size=args.population,
                                            max_time_budget=args.generations)
                ref.append(time.perf_counter() - t)
            print(f"OFA EvolutionFinder run {i + 1}: {ref[-1]:.3f} s", file=sys.stderr)
    cli = None
    if args.run and args.generations == 500 and args.population == 100:  # (the CLI runs its defaults)
        cli = _cli_search(args.run, setup["device"], setup["latency_budget_ms"], args.cli_repeats)
    load_after = os.getloadavg()
    med_ours = statistics.median(ours)
    ratios = [r / o for r, o in zip(ref, ours)]
    result = {
        "benchmark": "search_speed",
        "command": " ".join(["python", *sys.argv]),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                     "optuna": optuna.__version__},
        "setup": {**setup, "population": args.population, "generations": args.generations,
                  "parent_ratio": settings.parent_ratio, "mutation_ratio": settings.mutation_ratio,
                  "mutate_prob": settings.mutate_prob, "setup_s": round(setup_s, 3),
                  "fast_paths": problem.fast_paths(), "torch_threads": 1},
        "hwnas": {"wall_s": ours, "min_s": min(ours), "median_s": med_ours,
                  "time_split_median": {k: statistics.median(s[k] for s in splits) for k in splits[0]},
                  **(calls or {})},
        "ofa_evolution_finder": ({"wall_s": ref, "min_s": min(ref), "median_s": statistics.median(ref),
                                  "code": "ofa.nas.search_algorithm.EvolutionFinder (official, PyPI `ofa`)",
                                  "accuracy_predictor": "ofa AccuracyPredictor 3x400 MLP, CPU, random weights",
                                  "efficiency_predictor": "per-block dict lookup table of the run's latency "
                                                          "predictor (OFA's LatencyTable style)"}
                                 if ref else None),
        "hwnas_cli": ({**cli, "speedup_median_vs_ofa": statistics.median(ref) / cli["median_s"] if ref else None}
                      if cli else None),
        "speedup_median": (statistics.median(ref) / med_ours) if ref else None,
        "speedup_paired_median": statistics.median(ratios) if ratios else None,
        "goal_speedup": 10.0,
    }
    if not args.no_per_kind:
        with single_thread():
            result["per_kind"] = per_kind(args.generations, args.population, args.per_kind_repeats)
    print(f"\n{'finder':<22}{'min s':>9}{'median s':>10}")
    print(f"{'hwnas':<22}{min(ours):>9.3f}{med_ours:>10.3f}   split {result['hwnas']['time_split_median']}")
    if ref:
        print(f"{'OFA EvolutionFinder':<22}{min(ref):>9.3f}{statistics.median(ref):>10.3f}")
        print(f"speed-up (median/median) {result['speedup_median']:.1f}x, paired median "
              f"{result['speedup_paired_median']:.1f}x; load {load_before[0]:.1f} -> {load_after[0]:.1f}")
    if cli:
        print(f"{'hwnas search (CLI)':<22}{cli['min_s']:>9.3f}{cli['median_s']:>10.3f}   search_s, fresh process each"
              + (f"; {result['hwnas_cli']['speedup_median_vs_ofa']:.1f}x OFA's median" if ref else ""))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
