"""Benchmark: learning curves of the latency predictors, against FLOPs-only and params-only fits.

Datasets
- ``cpu-ort``: real ONNX Runtime CPU latencies of 300 small OFA subnets (tests/latency/data; see its
  README). Held out: 100 random rows per repeat; training rows drawn from the other 200.
- ``sim-<gpu>-b<batch>``: the synthetic eager-GPU model of `hwnas.latency.simulate` (kernel launch
  cost, occupancy, slow depthwise kernels, per-kernel jitter, 1% noise) on 1500 OFA subnets at
  W=1.0, r=128..224; 500 held out.
Predictors per N: ``auto`` (`fit_best` over every kind), the best of each kind (`fit_best(kinds=[k])`),
and baselines fitted by ordinary least squares on exact counts: ``flops`` (ms ~ a + b*MACs),
``params`` (ms ~ a + b*params), ``simple`` (ms ~ a + b*MACs + c*params + d*blocks).
Few-shot transfer: a source predictor (another simulated GPU, 500 rows; or the CPU's per-block
lookup table) adapted with N target rows, against fitting from scratch on the same N rows.

    .venv/bin/python experiments/bench_latency_predictors.py            # full (~20 min, 2 cores)
    .venv/bin/python experiments/bench_latency_predictors.py --quick    # a few minutes

Prints tables and writes experiments/results/latency_predictors.json.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hwnas.families import NetworkSpec
from hwnas.fileio import atomic_write_json
from hwnas.latency import LookupTablePredictor, TransferPredictor, fit_best
from hwnas.latency.api import read_latency_table
from hwnas.latency.metrics import summary
from hwnas.space import SearchSpace
from hwnas.supernet.stats import stats_frame

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from gpu_simulator import simulate_latency  # noqa: E402  (test support: a synthetic GPU)
DATA = ROOT / "tests" / "latency" / "data"
KINDS = ("analytic", "lut", "hybrid", "mlp")
METRICS = ("within_5", "within_10", "kendall_tau", "spearman_rho", "rmse_log", "mape")


def _ols(x: np.ndarray, y: np.ndarray):
    a = np.concatenate([np.ones((len(x), 1)), x], axis=1)
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    return lambda z: np.concatenate([np.ones((len(z), 1)), z], axis=1) @ coef


def _counts(m: np.ndarray, n_classes: int) -> np.ndarray:
    st = stats_frame(m, n_classes=n_classes)
    return np.stack([st["macs"].to_numpy(float), st["params"].to_numpy(float),
                     m[:, 41:46].sum(axis=1).astype(float)], axis=1)


def _datasets(quick: bool) -> list[dict]:
    m, y, df = read_latency_table(DATA / "ofa_cpu_subnets.csv", "ort_ms", "ofa-mbv3")
    out = [{"name": "cpu-ort", "m": m, "y": y, "n_classes": 10, "test": 100, "real": True,
            "repeat_within_10": float(np.mean(np.abs(df["ort_ms_repeat"] / df["ort_ms"] - 1) <= 0.10))}]
    sm = SearchSpace().sample_matrix(1500, 123)
    sims = [("gpu-a", 1), ("gpu-a", 64), ("gpu-b", 16)] if quick else \
        [("gpu-a", 1), ("gpu-a", 64), ("gpu-b", 1), ("gpu-b", 16), ("gpu-b", 64)]
    for gpu, batch in sims:
        ys = simulate_latency(sm, gpu, batch, noise=0.01, rng=batch)
        rep = simulate_latency(sm, gpu, batch, noise=0.01, rng=batch + 1000)
        out.append({"name": f"sim-{gpu}-b{batch}", "m": sm, "y": ys, "n_classes": 1000, "test": 500,
                    "real": False, "repeat_within_10": float(np.mean(np.abs(rep / ys - 1) <= 0.10))})
    return out


def _split(ds: dict, n: int, rep: int) -> tuple[np.ndarray, np.ndarray]:
    total = len(ds["y"])
    if ds["real"]:
        order = np.random.default_rng(rep).permutation(total)
        return order[:n], order[total - ds["test"]:]
    test = np.arange(total - ds["test"], total)
    start = (rep * 150) % max(1, total - ds["test"] - n + 1)
    return np.arange(start, start + n), test


def learning_curves(datasets: list[dict], sizes: list[int], repeats: int, log) -> list[dict]:
    rows = []
    for ds in datasets:
        m, y, nc = ds["m"], ds["y"], ds["n_classes"]
        counts = _counts(m, nc)
        pool = len(y) - ds["test"]
        for n in [s for s in sizes if s <= pool]:
            reps = repeats if n <= 100 else 1
            acc: dict[str, list[dict]] = {}
            chosen: list[str] = []
            t0 = time.time()
            for rep in range(reps):
                tr, te = _split(ds, n, rep)
                preds = {
                    "flops": _ols(counts[tr, :1], y[tr])(counts[te, :1]),
                    "params": _ols(counts[tr, 1:2], y[tr])(counts[te, 1:2]),
                    "simple": _ols(counts[tr], y[tr])(counts[te]) if n > 5 else None,
                }
                auto, report = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, nc), seed=rep)
                chosen.append(report["chosen"])
                preds["auto"] = auto.predict(m[te])
                for kind in KINDS:
                    if kind == "mlp" and n < 20:
                        continue
                    preds[kind] = fit_best(m[tr], y[tr], kinds=[kind], net=NetworkSpec("ofa-mbv3", 1.0, nc), seed=rep)[0].predict(m[te])
                for name, p in preds.items():
                    if p is not None:
                        acc.setdefault(name, []).append(summary(np.maximum(p, 1e-6), y[te]))
            row = {"dataset": ds["name"], "n_train": n, "repeats": reps, "chosen": chosen,
                   "seconds": round(time.time() - t0, 1),
                   **{name: {k: float(np.mean([r[k] for r in runs])) for k in METRICS}
                      for name, runs in acc.items()}}
            rows.append(row)
            log(f"{ds['name']:>14} N={n:<4} " + "  ".join(
                f"{name}={row[name]['within_10']:.2f}/{row[name]['kendall_tau']:.2f}"
                for name in ("flops", "simple", "auto", *KINDS) if name in row) + f"  ({row['seconds']}s)")
    return rows


def transfer_curves(datasets: list[dict], sizes: list[int], repeats: int, log) -> list[dict]:
    by_name = {d["name"]: d for d in datasets}
    pairs = [(s, t) for s, t in (("sim-gpu-a-b64", "sim-gpu-b-b64"), ("sim-gpu-a-b64", "sim-gpu-b-b16"),
                                 ("sim-gpu-a-b1", "sim-gpu-b-b1")) if s in by_name and t in by_name]
    rows = []
    for src_name, dst_name in pairs:
        src, dst = by_name[src_name], by_name[dst_name]
        source, _ = fit_best(src["m"][:500], src["y"][:500], kinds=["analytic", "hybrid"], net=NetworkSpec("ofa-mbv3", 1.0, 1000))
        rows += _transfer(f"{src_name} -> {dst_name}", source, dst, sizes, repeats, log)
    cpu = by_name["cpu-ort"]
    lut = LookupTablePredictor.from_entries(pd.read_csv(DATA / "ofa_cpu_blocks.csv"), net=NetworkSpec("ofa-mbv3", 1.0, 10))
    rows += _transfer("cpu per-block table -> cpu-ort subnets", lut, cpu, sizes, repeats, log)
    return rows


def _transfer(label: str, source, dst: dict, sizes: list[int], repeats: int, log) -> list[dict]:
    rows = []
    for n in sizes:
        acc: dict[str, list[dict]] = {"transfer": [], "scratch": [], "source_only": []}
        for rep in range(repeats):
            tr, te = _split(dst, n, rep)
            m, y = dst["m"], dst["y"]
            tp = TransferPredictor(source, net=NetworkSpec("ofa-mbv3", 1.0, dst["n_classes"])).fit(m[tr], y[tr])
            sc, _ = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, dst["n_classes"]), seed=rep)
            acc["transfer"].append(summary(tp.predict(m[te]), y[te]))
            acc["scratch"].append(summary(sc.predict(m[te]), y[te]))
            scale = np.exp(np.mean(np.log(y[tr] / source.predict(m[tr]))))  # source, rescaled
            acc["source_only"].append(summary(source.predict(m[te]) * scale, y[te]))
        row = {"pair": label, "n_train": n, **{k: {mk: float(np.mean([r[mk] for r in v])) for mk in METRICS}
                                               for k, v in acc.items()}}
        rows.append(row)
        log(f"{label:>40} N={n:<3} " + "  ".join(
            f"{k}={row[k]['within_10']:.2f}/{row[k]['kendall_tau']:.2f}/{row[k]['rmse_log']:.3f}"
            for k in acc))
    return rows


def prediction_speed(datasets: list[dict], log, n: int = 100_000) -> dict[str, float]:
    """CPU seconds (best of 3) for one call predicting `n` archs, per predictor kind fitted on the
    first dataset's rows; the goal is under a second (what a search's inner loop needs)."""
    ds = datasets[0]
    m = SearchSpace(r_choices=tuple(range(32, 65, 4))).sample_matrix(n, 9)
    out = {}
    for kind in ("analytic", "lut", "hybrid", "mlp"):
        try:
            pred = fit_best(ds["m"], ds["y"], kinds=[kind], net=NetworkSpec("ofa-mbv3", 1.0, ds.get("n_classes", 10)))[0]
        except Exception as err:  # a kind that cannot fit this table is reported, not fatal
            out[kind] = f"not fitted: {err}"
            continue
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            pred.predict(m)
            best = min(best, time.process_time() - t)
        out[kind] = round(best, 3)
        log(f"  predict {n} archs with {kind}: {best:.3f} s CPU")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer datasets, sizes and repeats")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "latency_predictors.json"))
    args = ap.parse_args()
    repeats = args.repeats or (2 if args.quick else 3)
    sizes = [10, 20, 50, 100] if args.quick else [10, 20, 50, 100, 200, 500]

    def log(msg: str) -> None:
        print(msg, flush=True)

    t0 = time.time()
    datasets = _datasets(args.quick)
    log("learning curves: within_10 / kendall_tau on held-out rows (mean over repeats)")
    for ds in datasets:
        log(f"  {ds['name']}: two measurements agree within +-10% on {ds['repeat_within_10']:.0%}")
    curves = learning_curves(datasets, sizes, repeats, log)
    log("few-shot transfer: within_10 / kendall_tau / rmse_log")
    transfer = transfer_curves(datasets, [10, 20, 50], repeats, log)
    log("prediction speed (goal: 100k archs under 1 s)")
    speed = prediction_speed(datasets, log)
    import onnxruntime
    import torch

    atomic_write_json(args.out, ({
        "command": " ".join(["python"] + [Path(sys.argv[0]).as_posix()] + sys.argv[1:]),
        "seconds": round(time.time() - t0, 1), "machine": platform.node(), "cpu": platform.processor(),
        "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "datasets": [{k: v for k, v in d.items() if k not in ("m", "y")} for d in datasets],
        "learning_curves": curves, "transfer": transfer, "predict_100k_cpu_s": speed}))
    log(f"wrote {args.out} in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
