"""Which rule should choose the accuracy predictor: the lowest out-of-fold MAE, or the latency side's
one-standard-error rule (the simplest candidate within one paired SE of the lowest)?

Nested, so neither rule is judged on rows it chose with: for each repeat, the run's accuracy table
is split at random into a training part of --rows rows and the rest (held out); each rule chooses
(5-fold, `fit_best_accuracy`) and refits on the training part only, then predicts the held-out
rows. Reported per table size: the held-out MAE and Kendall tau of each rule's pick (medians over
repeats) and how often the rules pick differently.

    .venv/bin/python experiments/bench_accuracy_selection.py --run runs/quickstart

Writes experiments/results/accuracy_selection.json (or --out).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from hwnas.fileio import atomic_write_json

ROOT = Path(__file__).resolve().parent


def main() -> None:
    from hwnas.accuracy.select import CRITERIA, fit_best_accuracy, regression_metrics
    from hwnas.accuracy.table import table_codes_top1
    from hwnas.run import open_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=Path("runs/quickstart"))
    ap.add_argument("--rows", type=int, nargs="+", default=[40, 80, 140])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "accuracy_selection.json")
    args = ap.parse_args()

    run = open_run(args.run, create=False)
    df, m, y = table_codes_top1(run)
    sizes = []
    for n in args.rows:
        if n >= len(y) - 10:
            continue
        reps = []
        for rep in range(args.repeats):
            order = np.random.default_rng(1000 + rep).permutation(len(y))
            train, held = order[:n], order[n:]
            out = {"repeat": rep}
            for criterion in CRITERIA:
                t = time.perf_counter()
                pred, report = fit_best_accuracy(run.space, m[train], y[train], n_classes=run.n_classes,
                                                 seed=rep, curve=(), criterion=criterion)
                got = regression_metrics(pred.predict(m[held]), y[held])
                out[criterion] = {"chosen": report["chosen"]["name"], "held_mae": got["mae"],
                                  "held_tau": got["kendall_tau"], "oof_mae": report["oof"]["mae"],
                                  "seconds": round(time.perf_counter() - t, 1)}
            reps.append(out)
            print(f"rows {n} repeat {rep}: " + "; ".join(
                f"{c} {out[c]['chosen']} MAE {out[c]['held_mae']:.3f} tau {out[c]['held_tau']:.3f}"
                for c in CRITERIA), flush=True)
        summary = {c: {"held_mae_median": float(np.median([r[c]["held_mae"] for r in reps])),
                       "held_tau_median": float(np.median([r[c]["held_tau"] for r in reps]))} for c in CRITERIA}
        diff = [r["one-se"]["held_mae"] - r["lowest"]["held_mae"] for r in reps]
        summary["one_se_minus_lowest_mae"] = {"median": float(np.median(diff)), "mean": float(np.mean(diff)),
                                              "se": float(np.std(diff, ddof=1) / np.sqrt(len(diff)))}
        summary["picked_differently"] = sum(r["one-se"]["chosen"] != r["lowest"]["chosen"] for r in reps)
        sizes.append({"rows": n, "held_out_rows": int(len(y) - n), "repeats": reps, "summary": summary})
    atomic_write_json(args.out, {
        "benchmark": "accuracy predictor choice, lowest out-of-fold MAE vs one-SE rule, judged on held-out rows",
        "command": "python " + " ".join(sys.argv), "run": str(args.run), "table_rows": int(len(y)),
        "split": "val (the accuracy table's)", "sizes": sizes})
    for s in sizes:
        print(s["rows"], s["summary"])


if __name__ == "__main__":
    main()
