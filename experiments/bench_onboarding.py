"""Benchmark (issue 31): onboarding a device from few measurements.

Held-out error of the latency predictor fitted on N = 5, 10, 20, 50, 100 random rows (scored on
every other row of the table; median over seeds), for three fits:

- ``flops``: FLOPs-only line (``ms = a + b * MACs``);
- ``today``: hwnas before issue 31 (`fit_best(priors=(), criterion="within-10")`);
- ``new``: the default now (runtime priors + the one-standard-error choice).

Tables
- ``cpu-ort``: real ONNX Runtime CPU latencies (1 thread) of 300 OFA-MobileNetV3 subnets
  (tests/latency/data), the mean of the two drift-corrected passes. The shipped ``cpu-ort`` prior
  was fitted on these rows, so here it is *cross-fitted*: a prior refitted on 150 rows (half A)
  is the only prior, and every fit and score uses the other 150 (half B).
- ``sim-<gpu>-b<batch>``: the synthetic eager-GPU model (tests/gpu_simulator.py; 3% noise) for
  2 GPUs x 3 batch sizes on 1000 subnets (r=128..224, 1000 classes); the shipped CPU prior is a
  candidate there as it would be for a user's GPU table.
Few-shot transfer: N = 10 rows + a predictor of the other simulated GPU (500 rows), 6 pairs.
``--samples auto`` replay: `auto_profile` choosing from half B's measured rows, against a
100-row random profile, both scored on the same held-out rows.

``--table CSV``: only the learning curve of a cpu-ort table measured on another machine (by
``experiments/make_latency_fixture.py --devices cpu-ort --no-blocks --seed S``), with the shipped
prior as it ships (not refitted): a user onboarding a new host, scored against what that table's
two passes agree on.

    .venv/bin/python experiments/bench_onboarding.py [--seeds 5] [--quick]
    .venv/bin/python experiments/bench_onboarding.py --table T.csv --out experiments/results/onboarding_<host>.json
    .venv/bin/python experiments/bench_onboarding.py --write-prior   # print the cpu-ort prior (for hwnas/families/ofa_mbv3/latency_priors.json)

Writes experiments/results/onboarding.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from hwnas.families import NetworkSpec
from hwnas.fileio import atomic_write_json
from hwnas.latency.analytic import AnalyticPredictor
from hwnas.latency.api import read_latency_table
from hwnas.latency.metrics import summary
from hwnas.latency.priors import prior_document, runtime_priors
from hwnas.latency.select import fit_best
from hwnas.space import SearchSpace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from gpu_simulator import simulate_latency  # noqa: E402  (test support: a synthetic GPU)
from machine import cpu_model  # noqa: E402  (experiments/machine.py; a script's folder is on sys.path)

SUBNETS = ROOT / "tests" / "latency" / "data" / "ofa_cpu_subnets.csv"
SIZES = (5, 10, 20, 50, 100)
METRICS = ("within_5", "within_10", "kendall_tau")
PAIRS = (("gpu-a", "gpu-b"), ("gpu-b", "gpu-a"))
BATCHES = (1, 16, 64)


def cpu_table() -> tuple[np.ndarray, np.ndarray]:
    m, _, df = read_latency_table(SUBNETS, "ort_ms", "ofa-mbv3")
    return m, 0.5 * (df["ort_ms"].to_numpy() + df["ort_ms_repeat"].to_numpy())


def new_host(path: Path, seeds: int, log) -> dict:
    """The learning curve of a table from another host with the shipped priors, and how far its
    two passes agree (the noise a predictor is scored against)."""
    m, _, df = read_latency_table(path, "ort_ms", "ofa-mbv3")
    first, second = df["ort_ms"].to_numpy(), df["ort_ms_repeat"].to_numpy()
    agree = summary(first, second)
    passes = {k: round(float(agree[k]), 4) for k in METRICS}
    log(f"{path}: its two passes agree {passes}")
    table = {"name": f"cpu-ort ({path.name})", "m": m, "y": 0.5 * (first + second), "n_classes": 10,
             "priors": None}
    return {"table": str(path), "rows": len(m), "passes_agree": passes,
            "learning_curve": learning_curves([table], SIZES, seeds, log)}


def cpu_prior(m: np.ndarray, y: np.ndarray, name: str = "cpu-ort") -> AnalyticPredictor:
    """The runtime prior's model (`hwnas.latency.priors`): a compact power law."""
    pred = AnalyticPredictor("compact", "log", 1e-3, net=NetworkSpec("ofa-mbv3", 1.0, 10)).fit(m, y)
    pred.meta.notes.prior = name
    return pred


def datasets(quick: bool) -> list[dict]:
    m, y = cpu_table()
    half = np.random.default_rng(7).permutation(len(y))
    a, b = half[:150], half[150:]
    out = [{"name": "cpu-ort", "m": m[b], "y": y[b], "n_classes": 10,
            "priors": [cpu_prior(m[a], y[a], "cpu-ort (half A)")]}]
    sm = SearchSpace().sample_matrix(1000, 123)
    for gpu in ("gpu-a", "gpu-b"):
        for batch in (BATCHES[::2] if quick else BATCHES):
            out.append({"name": f"sim-{gpu}-b{batch}", "m": sm, "y": simulate_latency(sm, gpu, batch, noise=0.03,
                                                                                      rng=batch),
                        "n_classes": 1000, "priors": None, "gpu": gpu, "batch": batch})
    return out


def _median(runs: list[dict]) -> dict[str, float]:
    return {k: round(float(np.median([r[k] for r in runs])), 4) for k in METRICS}


def learning_curves(tables: list[dict], sizes, seeds: int, log) -> list[dict]:
    rows = []
    for ds in tables:
        m, y, nc = ds["m"], ds["y"], ds["n_classes"]
        for n in sizes:
            runs: dict[str, list] = {"flops": [], "today": [], "new": []}
            chosen, t0 = [], time.time()
            for s in range(seeds if n <= 20 else max(2, seeds // 2)):
                order = np.random.default_rng(1000 + s).permutation(len(y))
                tr, te = order[:n], order[n:]
                flops = AnalyticPredictor("macs", "linear", 0.0, net=NetworkSpec("ofa-mbv3", 1.0, nc)).fit(m[tr], y[tr])
                today = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, nc), seed=s, priors=(), criterion="within-10")[0]
                new, report = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, nc), seed=s, priors=ds["priors"])
                chosen.append(report["chosen"])
                for name, pred in (("flops", flops), ("today", today), ("new", new)):
                    runs[name].append(summary(pred.predict(m[te]), y[te]))
            row = {"table": ds["name"], "n_train": n, "seeds": len(chosen), "chosen": chosen,
                   "seconds": round(time.time() - t0, 1), **{k: _median(v) for k, v in runs.items()}}
            rows.append(row)
            log(f"{ds['name']:>14} N={n:<4}" + "".join(
                f"  {k} {row[k]['within_5']:.3f}/{row[k]['within_10']:.3f}/{row[k]['kendall_tau']:.3f}"
                for k in runs) + f"  ({row['seconds']}s)")
    return rows


def transfer(tables: list[dict], n: int, seeds: int, log) -> list[dict]:
    sims = {(d["gpu"], d["batch"]): d for d in tables if "gpu" in d}
    rows = []
    for src, dst in PAIRS:
        for batch in BATCHES:
            if (src, batch) not in sims or (dst, batch) not in sims:
                continue
            s_ds, d_ds = sims[(src, batch)], sims[(dst, batch)]
            base = fit_best(s_ds["m"][:500], s_ds["y"][:500], net=NetworkSpec("ofa-mbv3", 1.0, 1000), kinds=["analytic", "hybrid"])[0]
            m, y = d_ds["m"], d_ds["y"]
            runs: dict[str, list] = {"today": [], "new": []}
            for s in range(seeds):
                order = 500 + np.random.default_rng(1000 + s).permutation(len(y) - 500)
                tr, te = order[:n], order[n:]
                today = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, 1000), base=base, seed=s, priors=(), criterion="within-10")[0]
                new = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, 1000), base=base, seed=s)[0]
                runs["today"].append(summary(today.predict(m[te]), y[te]))
                runs["new"].append(summary(new.predict(m[te]), y[te]))
            row = {"pair": f"sim-{src}-b{batch} -> sim-{dst}-b{batch}", "n_train": n,
                   **{k: _median(v) for k, v in runs.items()}}
            rows.append(row)
            log(f"{row['pair']:>32} N={n}" + "".join(
                f"  {k} {row[k]['within_10']:.3f}/{row[k]['kendall_tau']:.3f}" for k in runs))
    return rows


def auto_replay(seeds: int, log) -> list[dict]:
    """`auto_profile` on the measured CPU table (half B, cross-fitted prior from half A): 110
    rows to choose from, 40 held out; against `fit_best` on 100 random rows of the same 110."""
    from hwnas.families import get_family
    from hwnas.latency.auto_profile import AutoSettings, auto_profile

    m, y = cpu_table()
    half = np.random.default_rng(7).permutation(len(y))
    a, b = half[:150], half[150:]
    prior = cpu_prior(m[a], y[a], "cpu-ort (half A)")
    space = SearchSpace(r_choices=tuple(range(32, 65, 4)))
    macs = get_family("ofa-mbv3").count_params_macs(m, 1.0, 10)[1]
    rows = []
    for s in range(seeds):
        order = np.random.default_rng(2000 + s).permutation(b)
        pool, held = order[:110], order[110:]
        truth = {a_.id: float(v) for a_, v in zip(space.from_matrix(m[pool]), y[pool])}
        spread = pool[np.argsort(macs[pool])][np.linspace(0, len(pool) - 1, 10).round().astype(int)]
        result = auto_profile(space, lambda archs: np.array([truth[x.id] for x in archs]),
                              AutoSettings(seed=s), n_classes=10, first=space.from_matrix(m[spread]),
                              candidates=m[pool], priors=[prior])
        measured = result.samples
        auto_rows = _auto_rows(result, space, m, pool)  # refit exactly what auto measured
        pa = fit_best(m[auto_rows], y[auto_rows], net=NetworkSpec("ofa-mbv3", 1.0, 10), priors=[prior])[0]
        hundred = order[:100]
        p100 = fit_best(m[hundred], y[hundred], net=NetworkSpec("ofa-mbv3", 1.0, 10), priors=(), criterion="within-10")[0]
        row = {"seed": s, "samples": measured, "stopped": result.stopped,
               "auto": _median([summary(pa.predict(m[held]), y[held])]),
               "profile_100_today": _median([summary(p100.predict(m[held]), y[held])]),
               "history": result.history}
        rows.append(row)
        log(f"  auto seed {s}: {measured} subnets ({result.stopped}) -> {row['auto']}; "
            f"100 random, today's fit -> {row['profile_100_today']}")
    return rows


def _auto_rows(result, space, m, pool) -> np.ndarray:
    measured = set(result.measured_ids)
    return np.asarray([i for i, a_ in zip(pool, space.from_matrix(m[pool])) if a_.id in measured])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="4 tables (batch 1 and 64) instead of 7")
    ap.add_argument("--write-prior", action="store_true", help="print the cpu-ort prior's document")
    ap.add_argument("--table", type=Path, help="only the learning curve of this cpu-ort table from another host")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "onboarding.json"))
    args = ap.parse_args()
    if args.write_prior:
        print(json.dumps(prior_document(cpu_prior(*cpu_table()), "cpu-ort"), indent=1))
        return

    def log(msg: str) -> None:
        print(msg, flush=True)

    t0 = time.time()
    if args.table:
        atomic_write_json(args.out, {
            "command": "python experiments/bench_onboarding.py " + " ".join(sys.argv[1:]),
            "machine": platform.machine(), "cpu": cpu_model(),
            **new_host(args.table, args.seeds, log), "seconds": round(time.time() - t0)})
        log(f"wrote {args.out} ({time.time() - t0:.0f} s)")
        return
    tables = datasets(args.quick)
    sizes = SIZES
    log("held-out within_5 / within_10 / Kendall tau (median over seeds): flops, today, new")
    curves = learning_curves(tables, sizes, args.seeds, log)
    log("few-shot transfer, 10 rows + another GPU's predictor (--base): within_10 / tau")
    pairs = transfer(tables, 10, args.seeds, log)
    log("--samples auto replay on cpu-ort")
    auto = auto_replay(args.seeds, log)
    import onnxruntime  # noqa: F401  (only its version is recorded)

    atomic_write_json(args.out, {
        "command": "python experiments/bench_onboarding.py " + " ".join(sys.argv[1:]),
        "seconds": round(time.time() - t0), "machine": platform.machine(), "python": platform.python_version(),
        "numpy": np.__version__, "shipped_priors": [p.meta.device for p in runtime_priors(NetworkSpec("ofa-mbv3", 1.0, 1000))],
        "metrics": list(METRICS), "learning_curves": curves, "transfer_10_rows": pairs, "auto_samples": auto})
    log(f"wrote {args.out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
