"""The accuracy predictor on a run's accuracy table (default: the quickstart's): every candidate's
out-of-fold error, the chosen one's learning curve, and the table's own measurement noise against
the subnets' spread (a predictor cannot rank subnets whose differences are noise).

    .venv/bin/python experiments/bench_accuracy_predictor.py --run runs/quickstart

What is measured, for each of --seeds fold assignments (5-fold, out-of-fold predictions of every
row pooled, as `hwnas accuracy fit` chooses its predictor):
- the chosen kind and its out-of-fold MAE, bias and Kendall tau, and every candidate's;
- the learning curve: the chosen kind refitted, again out of fold, on the first 10% .. 100% of the
  rows (a random order per seed).
Noise: the binomial standard deviation of one subnet's top-1 on the table's images, beside the
standard deviation and range of top-1 across the table; and --recheck table subnets, spread over
its range, evaluated again on the test split (other images): Kendall tau between the two
measurements and the spread of their difference (the noise any predictor's ranking is up against).

Writes --out (default experiments/results/accuracy_predictor.json).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "accuracy_predictor.json"
CURVE = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


def _noise(df) -> dict:
    """The table's measurement noise against the subnets' spread."""
    y = df["top1"].to_numpy(dtype=np.float64)
    n_images = int(df["n"].median()) if "n" in df else None
    p = float(np.mean(y)) / 100.0
    out = {"rows": int(len(y)), "images_per_subnet": n_images,
           "top1_mean": float(np.mean(y)), "top1_std_across_subnets": float(np.std(y, ddof=1)),
           "top1_range": [float(np.min(y)), float(np.max(y))],
           "binomial_std_one_subnet": (100.0 * float(np.sqrt(p * (1 - p) / n_images))) if n_images else None}
    if out["binomial_std_one_subnet"]:
        out["spread_over_noise"] = out["top1_std_across_subnets"] / out["binomial_std_one_subnet"]
    return out


def _recheck(run, df, m, k: int) -> dict:
    """`k` table subnets spread over its top-1 range (rank quantiles), evaluated again on the test
    split: a second, independent measurement of the same networks on other images. The spread of
    (test - val) around its mean is the two measurements' noise relative to one another (what
    ranking sees; a shift common to every subnet cancels), to set beside the subnets' spread."""
    from hwnas.latency.metrics import kendall_tau
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    order = np.argsort(df["top1"].to_numpy())
    pick = order[np.unique(np.round(np.linspace(0, len(order) - 1, k)).astype(int))]
    model, meta = load_supernet(run.supernet)
    archs = run.space.from_matrix(m[pick])
    t = time.perf_counter()
    rows = evaluate_subnets(model, archs, build_loaders(data_config_of(meta, run.data)), split="test")
    val = df["top1"].to_numpy(float)[pick]
    test = np.asarray([r["top1"] for r in rows], dtype=float)
    diff = test - val
    return {"subnets": int(len(pick)), "test_images": int(rows[0].get("n", 0)) or None,
            "val_top1": val.tolist(), "test_top1": test.tolist(),
            "kendall_tau_val_test": kendall_tau(val, test),
            "mean_test_minus_val": float(np.mean(diff)),
            "std_of_test_minus_val": float(np.std(diff, ddof=1)),
            "val_std_across_these": float(np.std(val, ddof=1)),
            "seconds": round(time.perf_counter() - t, 1)}


def main() -> None:
    from hwnas.accuracy.select import fit_best_accuracy
    from hwnas.accuracy.table import table_codes_top1
    from hwnas.run import open_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=Path("runs/quickstart"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--recheck", type=int, default=12,
                    help="table subnets evaluated again on the test split (0: none)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    run = open_run(args.run, create=False)
    df, m, y = table_codes_top1(run)

    per_seed = []
    for seed in args.seeds:
        t = time.perf_counter()
        _, report = fit_best_accuracy(run.space, m, y, n_classes=run.n_classes, seed=seed, curve=CURVE)
        per_seed.append({"seed": seed, "chosen": report["chosen"]["name"], "oof": report["oof"],
                         "candidates": [{k: c[k] for k in ("kind", "settings", "mae", "bias", "kendall_tau")}
                                        for c in report["candidates"]],
                         "learning_curve": report["learning_curve"],
                         "seconds": round(time.perf_counter() - t, 1)})
        print(f"seed {seed}: {report['chosen']['name']} out-of-fold tau {report['oof']['kendall_tau']:.3f} "
              f"MAE {report['oof']['mae']:.3f}", flush=True)

    def med(key: str) -> float:
        return float(np.median([s["oof"][key] for s in per_seed]))

    result = {
        "command": "python " + " ".join(sys.argv),
        "run": str(args.run), "table_rows": int(len(y)),
        "supernet": str(run.supernet), "split": "val (the accuracy table's)",
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "goal": {"oof_kendall_tau": 0.80, "oof_mae": 0.5},
        "oof_median_over_seeds": {"kendall_tau": med("kendall_tau"), "mae": med("mae"), "bias": med("bias")},
        "noise": {**_noise(df), **({"recheck_on_test": _recheck(run, df, m, args.recheck)} if args.recheck else {})},
        "per_seed": per_seed,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("oof_median_over_seeds", "noise")}, indent=2))


if __name__ == "__main__":
    main()
