"""Benchmark: wall time of one constrained evolutionary search at Once-for-All's default budget,
against Once-for-All's own `EvolutionFinder`, in the same process, interleaved -- on a run of any
family (OFA-MobileNetV3, ProxylessNAS, ResNet50).

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
  with the family's arch encoder (`MobileNetArchEncoder`; for ProxylessNAS its 6-stage "mbv2"
  layout of 21 blocks; `ResNetArchEncoder`) and `AccuracyPredictor` (3x400 MLP on CPU, random
  weights: timing only), and as efficiency predictor a per-block dict lookup table (OFA's
  `LatencyTable` style: one dict lookup per running block, keyed by the block's genes and the
  shared genes and resolution its shapes depend on) fitted to the run's latency predictor, at the
  same budget.

    .venv/bin/python experiments/bench_search_speed.py --run /tmp/qs_copy [--repeats 7 --reference-repeats 7]
    .venv/bin/python experiments/bench_search_speed.py --per-kind-only   # just the table below
    .venv/bin/python experiments/bench_search_speed.py --tiny ofa-proxyless   # (and ofa-resnet50)

``--tiny FAMILY`` first makes a tiny run of the family as a user would (`hwnas train --family F`
for a few steps on MNIST-embedded at r 32-40, `hwnas profile` 8 subnets, `hwnas latency fit`,
`hwnas accuracy build --samples 20`; the settings of tests/e2e/test_family_pipeline.py) and
benchmarks on it at the median measured latency, writing experiments/results/search_speed_<F>.json.

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

from hwnas.families import NetworkSpec
from hwnas.fileio import atomic_write_json
from hwnas.latency import LookupTablePredictor
from hwnas.latency.base import single_thread
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.operators import sample_mixed
from hwnas.search.problem import Problem
from hwnas.space import SearchSpace

# Before issue 28's "fast paths belong to the interface": only OFA-MobileNetV3 searched on tables;
# the other families called their predictors on whole matrices. Measured on tiny runs made as
# `--tiny` makes them, `hwnas search --no-verify` (search_s, median of 5 fresh processes) of the tree
# before the change and after it, interleaved with Once-for-All's finder (this file's setup), one
# session, 2 loaded cores.
BEFORE = {
    "ofa-proxyless": {"source": "issue 28 (2-core machine, training beside it)", "hwnas_cli_median_s_before": 2.136,
                      "hwnas_cli_median_s_after": 0.196, "ofa_finder_median_s": 3.719,
                      "speedup_before": 1.74, "speedup_after": 18.97, "path_before": "generic"},
    "ofa-resnet50": {"source": "issue 28 (2-core machine, training beside it)", "hwnas_cli_median_s_before": 1.095,
                     "hwnas_cli_median_s_after": 0.145, "ofa_finder_median_s": 2.522,
                     "speedup_before": 2.30, "speedup_after": 17.39, "path_before": "generic"},
}

CPU_TABLE = Path(__file__).resolve().parents[1] / "tests" / "latency" / "data" / "ofa_cpu_subnets.csv"


def per_kind(generations: int, population: int, repeats: int = 1) -> dict:
    """The search on latency predictors `fit_best` fits to the real CPU table (300 measured OFA
    subnets, ONNX Runtime, 10 classes), one per kind it can select, plus its unrestricted pick:
    seconds in `Problem.costs` and in the whole evolution, on the fast cost path (table or
    vectorised) and with the model called directly (``use_tables=False``)."""
    from hwnas.accuracy.predictors import RidgePredictor
    from hwnas.latency import fit_best
    from hwnas.latency.api import read_latency_table

    m, y, df = read_latency_table(CPU_TABLE, "ort_ms", "ofa-mbv3")
    space = SearchSpace(r_choices=tuple(sorted({int(r) for r in m[:, 0]})))
    # a ridge on 'compact' features, as `hwnas accuracy fit` picks for small tables; synthetic
    # top-1 (accuracy grows with latency): timing only
    top1 = 60 + 5 * np.log(y) + np.random.default_rng(0).normal(0, 0.5, len(y))
    acc = RidgePredictor(space, 10).fit(m, top1)
    source = fit_best(m, df["ort_median_ms"].to_numpy(np.float64) * 1.5, kinds=["analytic"], net=NetworkSpec("ofa-mbv3", 1.0, 10))[0]
    settings = EvolutionSettings(population=population, generations=generations)
    budget = float(np.median(y))
    out = {}
    for kind in ("analytic", "lut", "hybrid", "mlp", "transfer", "auto"):
        t = time.perf_counter()
        if kind == "transfer":  # few-shot: 30 rows of this device on a "source device" model
            pred, report = fit_best(m[:30], y[:30], kinds=["transfer"], net=NetworkSpec("ofa-mbv3", 1.0, 10), base=source)
        else:
            pred, report = fit_best(m, y, kinds=None if kind == "auto" else [kind], net=NetworkSpec("ofa-mbv3", 1.0, 10))
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
    Python dict lookup (as OFA's `LatencyTable` does), here from an exact additive table of an
    hwnas lookup table (`hwnas.search.tabulate.AdditiveTable`): the fixed part per context (r and
    the shared genes), then one lookup per running slot keyed by its context and genes."""

    def __init__(self, table) -> None:
        import operator

        slots = table.slots
        family = slots.space.family
        # arch dict -> flat row: each group's values, mapped to codes where they are not codes
        self.groups = [(g.name, None if not g.by_index else {v: i for i, v in enumerate(g.choices)})
                       for g in family.gene_groups()]
        pos = slots.ctx_values()
        self.ctx = operator.itemgetter(*slots.context)  # (one column: the value itself, as the keys)
        self.fixed = {self.ctx({c: int(slots.choices[c][pos[ci, j]]) for j, c in enumerate(slots.context)}):
                      float(table.fixed[ci]) for ci in range(slots.n_ctx)}
        self.blocks = []
        for s, slot in enumerate(slots.slots):
            keys = list(slot.context) + list(slot.genes)
            ctx_pos = np.stack(np.unravel_index(np.arange(slots.n_ctx_of[s]), slots.counts[list(slot.context)]), 1)
            lookup = {}
            for ci, cp in enumerate(ctx_pos):
                ctx_vals = tuple(int(slots.choices[c][p]) for c, p in zip(slot.context, cp))
                for o, genes in enumerate(slots.options(s)):
                    lookup[ctx_vals + tuple(int(v) for v in genes)] = float(
                        table.rows[slots.offset[s] + ci * slots.n_opt[s] + o])
            get = operator.itemgetter(*keys)
            self.blocks.append((slot.depth, slot.after, get, lookup))

    def get_efficiency(self, a: dict) -> float:
        row = [a["image_size"]]
        for name, codes in self.groups:
            row += a[name] if codes is None else [codes[v] for v in a[name]]
        ms = self.fixed[self.ctx(row)]
        for depth, after, get, lookup in self.blocks:
            if depth is None or row[depth] > after:
                ms += lookup[get(row)]
        return ms


def _run_problem(run_dir: str | None, accuracy_samples: int | None = None, budget_ms: float | None = None):
    """(Problem of a real run's fitted predictors at its budget, description). Without a run: the
    predictors `fit_best` and `hwnas accuracy fit` pick on the real CPU table (quickstart-like).
    A run's budget: `budget_ms`, else its last search's, else the median measured latency."""
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
        budget = budget_ms or budgets.get(device) or _median_measured_ms(run_dir, device)
        lat = load_latency_predictor(run_dir, device, run.space.width_mult)
        acc = ensure_accuracy_predictor(run, accuracy_samples, seed=0)
        problem = Problem(run.space, acc, {device: lat}, {device: float(budget)}, n_classes=run.n_classes,
                          accuracy_risk=1.0)
        return problem, {"run": str(run_dir), "family": run.family.name, "device": device,
                         "latency_budget_ms": float(budget),
                         "latency_predictor": lat.describe(), "accuracy_predictor": getattr(acc, "name", "?")}
    from hwnas.accuracy.predictors import RidgePredictor

    m, y, _ = read_latency_table(CPU_TABLE, "ort_ms", "ofa-mbv3")
    space = SearchSpace(r_choices=tuple(sorted({int(r) for r in m[:, 0]})))
    top1 = 60 + 5 * np.log(y) + np.random.default_rng(0).normal(0, 0.5, len(y))
    acc = RidgePredictor(space, 10, features="full").fit(m, top1)
    lat, report = fit_best(m, y, net=NetworkSpec("ofa-mbv3", 1.0, 10))
    budget = float(np.median(y))
    problem = Problem(space, acc, {"cpu": lat}, {"cpu": budget}, n_classes=10, accuracy_risk=1.0)
    return problem, {"run": None, "family": space.family.name,
                     "table": str(CPU_TABLE.relative_to(CPU_TABLE.parents[3])), "device": "cpu",
                     "latency_budget_ms": budget, "latency_predictor": lat.describe(),
                     "accuracy_predictor": acc.name + " (synthetic top-1)"}


def _median_measured_ms(run_dir: str, device: str) -> float:
    import pandas as pd

    ms = pd.read_parquet(Path(run_dir) / "measurements.parquet")
    ms = ms[(ms["kind"] == "subnet") & (ms["device"] == device)] if "device" in ms else ms[ms["kind"] == "subnet"]
    return round(float(ms["corrected_ms"].median()), 3)


def _ofa_encoder(space):
    """Once-for-All's arch encoder of the space's family (its own code, the `ofa` package)."""
    from ofa.nas.accuracy_predictor import MobileNetArchEncoder, ResNetArchEncoder

    family = space.family.name
    if family == "ofa-resnet50":
        e, w = (g.choices for g in space.groups() if g.name in ("e", "w"))
        return ResNetArchEncoder(image_size_list=list(space.r_choices), depth_list=list(space.choices[0]),
                                 expand_list=list(e), width_mult_list=[0.65, 0.8, 1.0][:len(w)])
    ks, e, d = ((space.ks_choices, space.e_choices, space.d_choices) if family == "ofa-mbv3"
                else space.choices)

    class ProxylessEncoder(MobileNetArchEncoder):
        SPACE_TYPE = "mbv2"  # Once-for-All's layout of 6 stages: 5 x 4 blocks, then 1

    cls = {"ofa-mbv3": MobileNetArchEncoder, "ofa-proxyless": ProxylessEncoder}[family]
    return cls(image_size_list=list(space.r_choices), ks_list=list(ks), expand_list=list(e),
               depth_list=list(d), n_stage=6 if family == "ofa-proxyless" else None)


def _ofa_finder(problem: Problem, seed: int):
    """Once-for-All's own EvolutionFinder (the `ofa` package) on the problem's space and budget:
    the family's arch encoder, its AccuracyPredictor (3x400 MLP, random weights: timing only) on
    CPU, and a per-block lookup table of the problem's latency predictor as efficiency predictor.
    None when the official code is not installed."""
    try:
        from ofa.nas.accuracy_predictor import AccuracyPredictor
        from ofa.nas.search_algorithm import EvolutionFinder
    except ImportError:
        return None
    import torch

    from hwnas.search.tabulate import tabulate

    space = problem.space
    device = problem.devices[0]
    sample = sample_mixed(space, 3000, np.random.default_rng(seed))
    lut = LookupTablePredictor(net=NetworkSpec(space.family.name, space.width_mult, problem.n_classes))
    lut.fit(sample, np.maximum(problem.costs(sample)[0][f"ms:{device}"], 1e-3))
    table = tabulate(lut.predict, space)
    torch.manual_seed(seed)
    acc = AccuracyPredictor(_ofa_encoder(space), device="cpu").eval()
    return EvolutionFinder(_OFALatencyLUT(table), acc), float(problem.budgets[device])


def _cli_search(run_dir: str, device: str, budget: float, repeats: int, accuracy_samples: int | None = None,
                reference=None) -> dict | None:
    """`search_s` of `hwnas search --run <copy> --device D --latency-ms B --no-verify`, each in a
    fresh process (what a user, and issue 19's check, times: the CLI's first and only search in
    its process), on a temporary copy of the run (its search.json and pareto.csv are rewritten).
    `reference()`: one more timed run of Once-for-All's finder after each (seconds), so the CLI's
    ratio is paired too, under the same load."""
    import json
    import shutil
    import subprocess
    import tempfile

    if repeats <= 0:
        return None
    out: dict = {"search_s": [], "time_split": [], "command": "", "ofa_paired_s": []}
    with tempfile.TemporaryDirectory(prefix="hwnas-cli-") as tmp:
        copy_dir = Path(tmp) / "run"
        shutil.copytree(run_dir, copy_dir)
        cmd = [sys.executable, "-m", "hwnas", "search", "--run", str(copy_dir), "--device", device,
               "--latency-ms", f"{budget:g}", "--no-verify"]
        if accuracy_samples is not None:  # grow the copy's table first (the run's own is never grown)
            cmd += ["--accuracy-samples", str(accuracy_samples)]
        out["command"] = "hwnas search --run <copy of the run> " + " ".join(cmd[6:])
        for i in range(repeats):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            metrics = json.loads((copy_dir / "search.json").read_text())["metrics"]
            out["search_s"].append(metrics["search_s"])
            out["time_split"].append(metrics.get("time_split"))
            print(f"hwnas search (CLI) run {i + 1}: search_s {metrics['search_s']:.3f} s", file=sys.stderr)
            if reference is not None:
                out["ofa_paired_s"].append(reference(100 + i))
    out["min_s"], out["median_s"] = min(out["search_s"]), statistics.median(out["search_s"])
    if out["ofa_paired_s"]:
        out["speedup_paired_median_vs_ofa"] = statistics.median(
            r / c for r, c in zip(out["ofa_paired_s"], out["search_s"]))
    return out


TINY = ["phases.full.epochs=1", "phases.kernel.epochs=1", "phases.depth.epochs=1",
        "phases.expand.epochs=1", "phases.width={epochs: 1, lr: 0.01}", "max_steps_per_epoch=1",
        "data.batch_size=8", "eval_batches=1", "bn_batches=1", "threads=1", "space.r=32:40:4"]
TINY_ACCURACY_SAMPLES = 20


def _make_tiny_run(family: str, folder: Path, device: str = "cpu-ort") -> Path:
    """A tiny run of `family` made as a user would (the settings of tests/e2e/test_family_pipeline.py):
    train a few steps, profile 8 subnets, fit the latency predictor, build a 20-row accuracy table."""
    import subprocess

    def hwnas(*args: str) -> None:
        print("hwnas " + " ".join(args), file=sys.stderr)
        subprocess.run([sys.executable, "-m", "hwnas", *args], check=True, stdout=subprocess.DEVNULL)

    sets = [x for item in TINY for x in ("--set", item)]
    hwnas("train", "--family", family, "--out", str(folder / "sn"), *sets)
    run = folder / "run"
    hwnas("profile", "--run", str(run), "--supernet", str(folder / "sn" / "supernet"), "--device", device,
          "--samples", "8", "--rounds", "3", "--runs", "3")
    hwnas("latency", "fit", "--run", str(run), "--device", device)
    hwnas("accuracy", "build", "--run", str(run), "--samples", str(TINY_ACCURACY_SAMPLES), "--bn-images", "64")
    return run


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
    ap.add_argument("--tiny", default=None, metavar="FAMILY",
                    help="make a tiny run of FAMILY first (train a few steps, profile, fit, 20-row accuracy "
                         "table) and benchmark on it")
    ap.add_argument("--accuracy-samples", type=int, default=None,
                    help="grow the run's accuracy table to this many subnets first (as `hwnas search "
                         "--accuracy-samples`; default: the table as it is; with --tiny 20)")
    ap.add_argument("--budget-ms", type=float, default=None,
                    help="the latency budget (default: the run's last search's, else its median measured latency)")
    ap.add_argument("--out", default=None, help="results file (default experiments/results/search_speed.json, "
                    "for another family's run search_speed_<family>.json)")
    args = ap.parse_args()
    if args.tiny:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="hwnas-tiny-") as tmp:
            args.run = str(_make_tiny_run(args.tiny, Path(tmp)))
            args.accuracy_samples = args.accuracy_samples or TINY_ACCURACY_SAMPLES
            return _benchmark(args)
    return _benchmark(args)


def _benchmark(args) -> None:
    samples = args.accuracy_samples
    if args.per_kind_only and args.out is None:
        args.out = "experiments/results/search_speed.json"
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
    problem, setup = _run_problem(args.run, samples, args.budget_ms)
    family = setup["family"]
    if args.out is None:
        args.out = ("experiments/results/search_speed.json" if family == "ofa-mbv3"
                    else f"experiments/results/search_speed_{family}.json")
    problem.check_budgets()
    problem.prepare()  # as `run_search` does before its search clock
    setup_s = time.perf_counter() - t
    settings = EvolutionSettings(population=args.population, generations=args.generations)
    ofa = _ofa_finder(problem, 0)
    ours, ref, splits, calls, best = [], [], [], None, None

    def reference(seed: int) -> float:
        finder, budget = ofa
        random.seed(seed), np.random.seed(seed)
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):  # it prints every 100
            t = time.perf_counter()
            finder.run_evolution_search(budget, verbose=False, population_size=args.population,
                                        max_time_budget=args.generations)
            took = time.perf_counter() - t
        print(f"OFA EvolutionFinder run (seed {seed}): {took:.3f} s", file=sys.stderr)
        return took

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
            ref.append(reference(i))
    cli = None
    if args.run and args.generations == 500 and args.population == 100:  # (the CLI runs its defaults)
        cli = _cli_search(args.run, setup["device"], setup["latency_budget_ms"], args.cli_repeats, samples,
                          reference if ofa is not None else None)
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
        **({"before": BEFORE[family]} if family in BEFORE else {}),
    }
    if not args.no_per_kind and family == "ofa-mbv3":  # (the real CPU table is OFA-MobileNetV3's)
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
              + (f"; {result['hwnas_cli']['speedup_median_vs_ofa']:.1f}x OFA's median" if ref else "")
              + (f", paired median {cli['speedup_paired_median_vs_ofa']:.1f}x"
                 if cli.get("speedup_paired_median_vs_ofa") else ""))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
