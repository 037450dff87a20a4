"""Benchmark: wall time of one constrained evolutionary search at Once-for-All's default budget.

Population 100, 25 % parents, mutation probability 0.1 / mutation ratio 0.5, 500 generations:
~50,000 accuracy-predictor calls (a 3x400 MLP on the one-hot encoding) under a latency budget from a
lookup-table latency predictor, over OFA's own search space (resolutions 128..224).

Compared, on the same machine at the same moment (these machines are shared; quote the ratio):
- ``hwnas``: `hwnas.search.evolution_search` (vectorised over the int matrix, batched predictors,
  the lookup table tabulated once);
- ``ofa-reference``: a faithful re-implementation of OFA's `EvolutionFinder` loop (dict archs,
  per-sample mutation/crossover redrawn until valid, per-sample latency lookup, per-generation
  batched MLP over per-sample Python encodings, as in OFA's `AccuracyPredictor`).

Timing only: the MLP weights are random (He init) and the lookup table is fitted to synthetic
latencies; neither changes the amount of work.

    .venv/bin/python experiments/bench_search_speed.py [--repeats 5] [--reference-repeats 1]
    .venv/bin/python experiments/bench_search_speed.py --per-kind-only   # just the table below

``per_kind``: the same search with latency predictors `fit_best` fits to the real CPU table
(tests/latency/data/ofa_cpu_subnets.csv), one per kind it can select, each timed on its fast cost
path (``table``: exact additive table; ``vectorised``: the model batched on tabulated analytic
features) and with the model called directly.
"""

from __future__ import annotations

import argparse
import copy
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
from hwnas.supernet.stats import stats_frame


class MLPAccuracyPredictor:
    """Once-for-All's accuracy predictor shape: a 3x400 ReLU MLP on the one-hot encoding (numpy)."""

    def __init__(self, space: SearchSpace, weights: list[np.ndarray], biases: list[np.ndarray],
                 y_mean: float, y_std: float):
        self.space, self.weights, self.biases, self.y_mean, self.y_std = space, weights, biases, y_mean, y_std

    def predict(self, archs) -> np.ndarray:
        h = self.space.encode(archs, "onehot")
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            h = np.maximum(h @ w + b, 0.0)
        return ((h @ self.weights[-1] + self.biases[-1])[:, 0] * self.y_std + self.y_mean).astype(np.float64)


def _mlp(space: SearchSpace, seed: int = 0) -> MLPAccuracyPredictor:
    rng = np.random.default_rng(seed)
    sizes = [len(space.encoding_names("onehot")), 400, 400, 400, 1]
    w = [rng.standard_normal((a, b)).astype(np.float32) * np.sqrt(2 / a) for a, b in zip(sizes[:-1], sizes[1:])]
    return MLPAccuracyPredictor(space, w, [np.zeros(b, np.float32) for b in sizes[1:]], 75.0, 3.0)


def _lut(space: SearchSpace, seed: int = 0) -> LookupTablePredictor:
    rng = np.random.default_rng(seed)
    m = sample_mixed(space, 600, rng)
    macs = stats_frame(m)["macs"].to_numpy(np.float64)
    ms = (2.0 + macs / 2.5e7) * (1 + 0.05 * rng.standard_normal(len(m)))
    return LookupTablePredictor().fit(m, ms)


class OFAReferenceFinder:
    """OFA's EvolutionFinder (ofa/nas/search_algorithm/evolution.py), same control flow."""

    def __init__(self, space: SearchSpace, table, mlp: MLPAccuracyPredictor, constraint: float,
                 population_size: int = 100, max_time_budget: int = 500, parent_ratio: float = 0.25,
                 mutation_ratio: float = 0.5, mutate_prob: float = 0.1, seed: int = 0):
        import torch

        self.space, self.constraint = space, constraint
        self.population_size, self.max_time_budget = population_size, max_time_budget
        self.parent_ratio, self.mutation_ratio, self.mutate_prob = parent_ratio, mutation_ratio, mutate_prob
        random.seed(seed)
        ri = {r: i for i, r in enumerate(space.r_choices)}
        ki = {k: i for i, k in enumerate(space.ks_choices)}
        ei = {e: i for i, e in enumerate(space.e_choices)}
        # the latency table as OFA keeps it: a dict per block key, looked up in Python
        self.block_ms = {(r, s, k, e): float(table.block[ri[r], s, ki[k], ei[e]])
                         for r in space.r_choices for s in range(N_SLOTS) for k in space.ks_choices
                         for e in space.e_choices}
        self.fixed_ms = {r: float(table.fixed[ri[r]]) for r in space.r_choices}
        self.d0 = min(space.d_choices)
        layers = []
        for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases)):
            lin = torch.nn.Linear(*w.shape)
            lin.weight.data = torch.from_numpy(w.T.copy())
            lin.bias.data = torch.from_numpy(b.copy())
            layers += [lin] + ([torch.nn.ReLU()] if i < len(mlp.weights) - 1 else [])
        self.net = torch.nn.Sequential(*layers).eval()
        self.y = (mlp.y_mean, mlp.y_std)
        self.n_feat = len(space.encoding_names("onehot"))
        self.ki, self.ei = ki, ei
        self.di = {d: i for i, d in enumerate(space.d_choices)}
        self.ri = ri

    # arch manager
    def random_sample_arch(self) -> dict:
        s = self.space
        return {"ks": [random.choice(s.ks_choices) for _ in range(N_SLOTS)],
                "e": [random.choice(s.e_choices) for _ in range(N_SLOTS)],
                "d": [random.choice(s.d_choices) for _ in range(5)], "r": [random.choice(s.r_choices)]}

    def efficiency(self, a: dict) -> float:
        r = a["r"][0]
        ms = self.fixed_ms[r]
        for stage, depth in enumerate(a["d"]):
            for j in range(depth):
                slot = stage * MAX_DEPTH + j
                ms += self.block_ms[(r, slot, a["ks"][slot], a["e"][slot])]
        return ms

    def arch2feature(self, a: dict) -> np.ndarray:
        f = np.zeros(self.n_feat, dtype=np.float32)
        nk, ne = len(self.ki), len(self.ei)
        for stage, depth in enumerate(a["d"]):
            for j in range(depth):
                slot = stage * MAX_DEPTH + j
                f[slot * (nk + ne) + self.ki[a["ks"][slot]]] = 1
                f[slot * (nk + ne) + nk + self.ei[a["e"][slot]]] = 1
        base = N_SLOTS * (nk + ne)
        for stage, depth in enumerate(a["d"]):
            f[base + stage * len(self.di) + self.di[depth]] = 1
        f[base + 5 * len(self.di) + self.ri[a["r"][0]]] = 1
        return f

    def predict_accuracy(self, population: list[dict]) -> np.ndarray:
        import torch

        feats = torch.from_numpy(np.stack([self.arch2feature(a) for a in population]))
        with torch.no_grad():
            return self.net(feats)[:, 0].numpy() * self.y[1] + self.y[0]

    def random_valid_sample(self):
        while True:
            sample = self.random_sample_arch()
            eff = self.efficiency(sample)
            if eff <= self.constraint:
                return sample, eff

    def mutate_sample(self, sample: dict):
        s = self.space
        while True:
            new = copy.deepcopy(sample)
            if random.random() < self.mutate_prob:
                new["r"][0] = random.choice(s.r_choices)
            for i in range(N_SLOTS):
                if random.random() < self.mutate_prob:
                    new["ks"][i] = random.choice(s.ks_choices)
                if random.random() < self.mutate_prob:
                    new["e"][i] = random.choice(s.e_choices)
            for i in range(5):
                if random.random() < self.mutate_prob:
                    new["d"][i] = random.choice(s.d_choices)
            eff = self.efficiency(new)
            if eff <= self.constraint:
                return new, eff

    def crossover_sample(self, a: dict, b: dict):
        while True:
            new = copy.deepcopy(a)
            for key in new:
                for i in range(len(new[key])):
                    new[key][i] = random.choice([a[key][i], b[key][i]])
            eff = self.efficiency(new)
            if eff <= self.constraint:
                return new, eff

    def run_evolution_search(self) -> tuple[float, dict]:
        n_mut = int(round(self.mutation_ratio * self.population_size))
        n_par = int(round(self.parent_ratio * self.population_size))
        pool = [self.random_valid_sample() for _ in range(self.population_size)]
        accs = self.predict_accuracy([p[0] for p in pool])
        population = [(float(accs[i]), pool[i][0], pool[i][1]) for i in range(self.population_size)]
        best = (-1.0, None)
        for _ in range(self.max_time_budget):
            parents = sorted(population, key=lambda x: x[0])[::-1][:n_par]
            if parents[0][0] > best[0]:
                best = (parents[0][0], parents[0][1])
            population = parents
            children = []
            for _ in range(n_mut):
                children.append(self.mutate_sample(population[random.randrange(n_par)][1]))
            for _ in range(self.population_size - n_mut):
                children.append(self.crossover_sample(population[random.randrange(n_par)][1],
                                                      population[random.randrange(n_par)][1]))
            accs = self.predict_accuracy([c[0] for c in children])
            population += [(float(accs[j]), children[j][0], children[j][1]) for j in range(len(children))]
        return best


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
            spent = [0.0]
            costs = problem.costs

            def timed(rows, costs=costs, spent=spent):
                t0 = time.perf_counter()
                got = costs(rows)
                spent[0] += time.perf_counter() - t0
                return got

            problem.costs = timed
            walls, cost_s = [], []
            for i in range(repeats):
                problem.reset()
                spent[0] = 0.0
                t = time.perf_counter()
                evolution_search(problem, settings, seed=i)
                walls.append(time.perf_counter() - t)
                cost_s.append(spent[0])
            row[label] = {"path": problem.cost_paths()["ms:cpu"], "setup_s": round(setup_s, 4),
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-kind-only", action="store_true",
                    help="only the per-predictor-kind timings on the real CPU table (updates 'per_kind' "
                         "in an existing results file)")
    ap.add_argument("--per-kind-repeats", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--reference-repeats", type=int, default=1)
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
    space = SearchSpace()
    mlp, lut = _mlp(space), _lut(space)
    budget = float(np.median(lut.predict(space.sample_matrix(2000, 0))))
    t = time.perf_counter()
    problem = Problem(space, mlp, {"cpu": lut}, {"cpu": budget})
    setup_s = time.perf_counter() - t
    settings = EvolutionSettings(population=args.population, generations=args.generations)

    x = space.sample_matrix(args.population, 1)
    with single_thread():
        t = time.perf_counter()
        for _ in range(args.generations):
            mlp.predict(x)
        mlp_floor_s = time.perf_counter() - t

    ours, calls, best = [], None, None
    for i in range(args.repeats):
        problem.reset()  # counters and memo: every run starts cold
        t = time.perf_counter()
        out = evolution_search(problem, settings, seed=i)
        ours.append(time.perf_counter() - t)
        calls, best = problem.counters(), out.history[-1]
        print(f"hwnas evolution run {i + 1}: {ours[-1]:.3f} s, best predicted top-1 {best:.2f}",
              file=sys.stderr)

    ref = []
    table = problem._costs["ms:cpu"].table  # the same lookup table, as OFA's per-block dict
    for i in range(args.reference_repeats):
        finder = OFAReferenceFinder(space, table, mlp, budget, args.population, args.generations, seed=i)
        with single_thread():
            t = time.perf_counter()
            ref_best, _ = finder.run_evolution_search()
            ref.append(time.perf_counter() - t)
        print(f"OFA reference run {i + 1}: {ref[-1]:.2f} s, best predicted top-1 {ref_best:.2f}",
              file=sys.stderr)

    load_after = os.getloadavg()
    result = {
        "benchmark": "search_speed",
        "command": " ".join(["python", *sys.argv]),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                     "optuna": optuna.__version__},
        "setup": {"space": space.to_dict(), "population": args.population, "generations": args.generations,
                  "parent_ratio": settings.parent_ratio, "mutation_ratio": settings.mutation_ratio,
                  "mutate_prob": settings.mutate_prob,
                  "accuracy_predictor": "MLP 3x400 one-hot (random weights)",
                  "latency_predictor": "LookupTablePredictor (nnls), tabulated once",
                  "latency_budget_ms": budget},
        "hwnas": {"wall_s": ours, "min_s": min(ours), "median_s": statistics.median(ours),
                  "setup_s": setup_s, "mlp_only_s": mlp_floor_s, **(calls or {})},
        "ofa_reference": {"wall_s": ref, "min_s": min(ref) if ref else None},
        "speedup_min_over_min": (min(ref) / min(ours)) if ref else None,
        "goal_s": 0.5,
    }
    with single_thread():
        result["per_kind"] = per_kind(args.generations, args.population, args.per_kind_repeats)
    print(f"\n{'finder':<16}{'min s':>9}{'median s':>10}{'acc. calls':>12}")
    print(f"{'hwnas':<16}{min(ours):>9.3f}{statistics.median(ours):>10.3f}{calls['predictor_calls']:>12}")
    if ref:
        print(f"{'OFA reference':<16}{min(ref):>9.3f}{statistics.median(ref):>10.3f}"
              f"{args.population * (args.generations + 1):>12}")
        print(f"speed-up {result['speedup_min_over_min']:.1f}x; MLP alone {mlp_floor_s:.3f} s; "
              f"tabulation {setup_s:.3f} s; load {load_before[0]:.1f} -> {load_after[0]:.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
