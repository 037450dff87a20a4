"""Benchmark: search quality on a small real run -- hypervolume at equal predictor calls, and
constraint satisfaction when the winners are measured on the device.

The run: the MNIST supernet (a snapshot of the checkpoint given by --supernet), ~40 subnets
profiled on `cpu-ort` (ONNX Runtime, 1 thread) with the drift-corrected protocol, the latency
predictor `hwnas latency fit` chooses from them, and an accuracy table of --accuracy-samples
subnets evaluated on the held-out validation split (BN recalibrated) with the predictor chosen on it
by out-of-fold error.
Every stage resumes from what the run directory already holds.

(b) Hypervolume (top-1 vs latency on cpu-ort, reference point top-1 0 % / the latency budget) of
    the feasible front found with N predictor calls, N in --calls, seeds in --seeds: hwnas NSGA-II,
    hwnas constrained evolution (single objective), random search, Optuna NSGA-II, Optuna TPE.
(c) `run_search` with verification at budgets spread over the measured latency range: the share of
    the first top-k candidates that met the budget when measured (the predictor alone), and the
    share of returned subnets that did (must be 100 %: over-budget ones are dropped).

    .venv/bin/python experiments/bench_search_quality.py --supernet runs/supernet-mnist/supernet
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hwnas.fileio import atomic_write_json
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.stage import profile
from hwnas.profiling.store import read_measurements
from hwnas.run import open_run
from hwnas.accuracy import (ACCURACY_PREDICTOR, build_accuracy_table, fit_accuracy_predictor,
                            load_accuracy_predictor)
from hwnas.search.api import run_search
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.nsga2 import NSGA2Settings, nsga2_search
from hwnas.search.optuna_search import optuna_search
from hwnas.search.pareto import front_mask, hypervolume
from hwnas.search.problem import Problem, latency_predictor_path, load_latency_predictor
from hwnas.search.random_search import random_search

DEVICE = "cpu-ort"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def prepare(args) -> tuple:
    run_dir = Path(args.run)
    stem = run_dir / "supernet"
    if not Path(f"{stem}.json").exists():
        src = Path(args.supernet)
        for suffix in (".json", ".safetensors"):
            run_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(f"{src}{suffix}", f"{stem}{suffix}")  # a fixed snapshot: training may go on
    run = open_run(run_dir, supernet=str(stem))
    meta = json.loads(Path(f"{stem}.json").read_text())
    t = time.perf_counter()
    log(f"profiling {args.profile} subnets on {DEVICE}")
    profile(run, [DEVICE], args.profile, protocol=ProtocolSettings(rounds=3, runs=10))
    profile_s = time.perf_counter() - t
    lat_path = latency_predictor_path(run_dir, DEVICE)
    if not lat_path.exists():
        from hwnas.latency.api import fit_from_run

        log("fitting the latency predictor (`hwnas latency fit`)")
        fit_from_run(run_dir, DEVICE, n_classes=run.n_classes)
    t = time.perf_counter()
    log(f"accuracy table: {args.accuracy_samples} subnets")
    build_accuracy_table(run, args.accuracy_samples, bn_images=args.bn_images,
                         progress=lambda ev, done=0, total=0, **_: log(f"  evaluated {done}/{total}")
                         if done % 25 == 0 or done == total else None)
    table_s = time.perf_counter() - t
    if not (run_dir / ACCURACY_PREDICTOR).exists():
        log("choosing and fitting the accuracy predictor (out-of-fold)")
        fit_accuracy_predictor(run)
    acc = load_accuracy_predictor(run_dir)
    lat = load_latency_predictor(run_dir, DEVICE, run.space.width_mult)
    measured = read_measurements(run_dir, device=DEVICE, kind="subnet")["corrected_ms"].to_numpy()
    info = {"supernet": {"source": str(args.supernet), "phase": meta.get("phase"), "epoch": meta.get("epoch")},
            "profiled_subnets": int(len(measured)), "profile_s": round(profile_s, 1),
            "accuracy_table_s": round(table_s, 1),
            "measured_ms_range": [float(measured.min()), float(measured.max())],
            "latency_predictor": {"describe": lat.describe(), "n_train": lat.meta.n_train,
                                  "cv_chosen": lat.meta.cv.chosen_metrics},
            "accuracy_predictor": acc.meta.get("metrics")}
    return run, acc, lat, measured, info


def hv_of(problem: Problem, batch) -> tuple[float, int]:
    loss = problem.loss(batch)
    on = front_mask(loss, batch.feasible)
    return hypervolume(loss[on], problem.reference_point()), int(on.sum())


def compare(run, acc, lat, budget: float, calls: list[int], seeds: list[int], tpe_max: int, work: Path) -> dict:
    out: dict = {}
    for n in calls:
        gens = max(1, n // 100 - 1)
        algos = {
            "hwnas-nsga2": lambda p, s: nsga2_search(p, NSGA2Settings(100, gens), seed=s),
            "hwnas-evolution": lambda p, s: evolution_search(p, EvolutionSettings(100, gens), seed=s),
            "random": lambda p, s: random_search(p, n, seed=s),
            "optuna-nsga2": lambda p, s: optuna_search(p, "nsga2", n, work / f"q{n}-{s}.journal", "nsga2",
                                                       population=100, seed=s),
        }
        if n <= tpe_max:
            algos["optuna-tpe"] = lambda p, s: optuna_search(p, "tpe", n, work / f"q{n}-{s}.journal", "tpe",
                                                             population=100, batch=10, seed=s)
        res: dict = {}
        for name, fn in algos.items():
            hvs, sizes, walls, ncalls = [], [], [], []
            for s in seeds:
                p = Problem(run.space, acc, {DEVICE: lat}, {DEVICE: budget}, n_classes=run.n_classes)
                t = time.perf_counter()
                o = fn(p, s)
                walls.append(time.perf_counter() - t)
                hv, size = hv_of(p, o.archive)
                hvs.append(hv), sizes.append(size), ncalls.append(p.counters()["predictor_calls"])
            res[name] = {"hypervolume": hvs, "hv_mean": statistics.mean(hvs),
                         "hv_std": statistics.pstdev(hvs), "front_size": sizes, "wall_s": walls,
                         "predictor_calls": ncalls}
            log(f"N={n} {name:<16} HV {statistics.mean(hvs):9.4f} +- {statistics.pstdev(hvs):.4f}  "
                f"front {statistics.mean(sizes):6.1f}  {statistics.mean(walls):6.2f} s")
        out[str(n)] = res
    return out


def satisfaction(run, measured: np.ndarray, quantiles: list[float], top_k: int) -> list[dict]:
    rows = []
    for q in quantiles:
        budget = float(np.quantile(measured, q))
        for algo, pareto in (("evolution", False), ("nsga2", True)):
            t = time.perf_counter()
            res = run_search(run.run_dir, DEVICE, budget, algo=algo, pareto=pareto, top_k=top_k,
                             protocol=ProtocolSettings(rounds=3, runs=10))
            ok = [b["measured_ms"][DEVICE] <= budget for b in res.best]
            errs = [r["error_pct"] for r in res.verification]
            rows.append({"budget_quantile": q, "budget_ms": budget, "algo": algo, "pareto": pareto,
                         "returned": len(res.best), "returned_within_budget": sum(ok),
                         "share_returned_within_budget": (sum(ok) / len(ok)) if ok else None,
                         "measured": res.metrics["measured"],
                         "first_try_within_budget": res.metrics["first_try_within_budget"],
                         "latency_error_pct": errs,
                         "mean_abs_error_pct": float(np.mean(np.abs(errs))) if errs else None,
                         "wall_s": time.perf_counter() - t, "message": res.message})
            log(f"budget {budget:.3f} ms (q{q}) {algo:<9}: {sum(ok)}/{len(ok)} returned within budget, "
                f"first try {res.metrics['first_try_within_budget']}, |err| "
                f"{rows[-1]['mean_abs_error_pct']}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--supernet", default="runs/supernet-mnist/supernet")
    ap.add_argument("--run", default="runs/bench-search")
    ap.add_argument("--profile", type=int, default=40)
    ap.add_argument("--accuracy-samples", type=int, default=200)
    ap.add_argument("--bn-images", type=int, default=500)
    ap.add_argument("--calls", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--tpe-max", type=int, default=1000, help="largest N Optuna TPE runs at (it is slow)")
    ap.add_argument("--quantiles", type=float, nargs="+", default=[0.2, 0.35, 0.5, 0.65, 0.8])
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--out", default="experiments/results/search_quality.json")
    args = ap.parse_args()

    import optuna
    import torch

    torch.set_num_threads(1)
    load_before = os.getloadavg()
    run, acc, lat, measured, info = prepare(args)
    budget = float(np.median(measured))
    work = Path(args.run) / "bench-studies"
    shutil.rmtree(work, ignore_errors=True)
    log(f"(b) hypervolume at equal predictor calls, budget {budget:.3f} ms (median measured)")
    hv = compare(run, acc, lat, budget, args.calls, args.seeds, args.tpe_max, work)
    log("(c) constraint satisfaction on the device")
    sat = satisfaction(run, measured, args.quantiles, args.top_k)
    returned = sum(r["returned"] for r in sat)
    within = sum(r["returned_within_budget"] for r in sat)
    first = [r["first_try_within_budget"] for r in sat if r["first_try_within_budget"] is not None]
    result = {
        "benchmark": "search_quality",
        "command": " ".join(["python", *sys.argv]),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                     "optuna": optuna.__version__},
        "run": info, "hv_budget_ms": budget, "reference_point": [0.0, budget],
        "hypervolume": hv,
        "constraint_satisfaction": {"runs": sat, "returned": returned, "returned_within_budget": within,
                                    "share": within / returned if returned else None,
                                    "first_try_mean": float(np.mean(first)) if first else None},
    }
    print(f"\n(b) hypervolume (mean over seeds {args.seeds}), budget {budget:.3f} ms")
    print(f"{'N calls':>8} " + " ".join(f"{k:>16}" for k in next(iter(hv.values()))))
    for n, res in hv.items():
        print(f"{n:>8} " + " ".join(f"{r['hv_mean']:>16.4f}" for r in res.values()))
    print(f"\n(c) returned subnets within budget when measured: {within}/{returned}; "
          f"first-try share (predictor alone): {result['constraint_satisfaction']['first_try_mean']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, json.loads(json.dumps(
        result, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
