"""Bring your own data, measured (issue 27): a supernet carried to another dataset, and the gain of
fine-tuning one subnet alone.

(a) transfer: `hwnas train --init-from SOURCE --data TARGET` with the default transfer recipe
    (exactly the command a user runs, timed as a whole), then the same 8 subnets (smallest,
    largest, 6 spread by MACs over the resolutions both spaces share) evaluated on the target's
    test split in the transferred supernet and in the target's supernet trained from scratch (its
    training time from its own log); and 8 more spread over the source's whole space (resolutions
    the from-scratch supernet lacks included), transferred only.
(b) finetune: 5 subnets of SOURCE (smallest, largest, 3 spread by MACs) fine-tuned alone on
    SOURCE's data for each of --epochs (default 1 and 3), top-1 on the test split before and after
    with the binomial standard error of that split beside it.

    .venv/bin/python experiments/bench_transfer.py --part transfer [--run runs/transfer-mnist]
    .venv/bin/python experiments/bench_transfer.py --part finetune [--data fashion-mnist:/usr/share/datasets/fashion-mnist]
    .venv/bin/python experiments/bench_transfer.py --part recipes --runs runs/a runs/b   # recipe choice

Writes experiments/results/transfer.json (each part under its own key, fine-tuning on --data under
"finetune <data>"; a part rerun replaces it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "transfer.json"
ASSETS = ROOT.parent / "hwnas" / "assets"
SCRATCH = {"mnist-embedded": ASSETS / "supernet_mnist", "fashion-mnist": ASSETS / "supernet_fashion"}


def binomial_se(top1: float, n: int) -> float:
    p = top1 / 100
    return round(100 * float(np.sqrt(p * (1 - p) / n)), 2)


def spread_archs(space, n: int, seed: int = 0, r_choices=None) -> list:
    """smallest, largest and n-2 archs at evenly spaced MACs quantiles of a uniform sample."""
    from hwnas.supernet.stats import count_params_macs

    rng = np.random.default_rng(seed)
    pool = space.sample(2000, rng)
    if r_choices is not None:
        pool = [dataclasses.replace(a, r=int(rng.choice(r_choices))) for a in pool]
    macs = np.array([count_params_macs(a, 10)[1] for a in pool])
    order = np.argsort(macs)
    r_lo, r_hi = (min(r_choices), max(r_choices)) if r_choices else (None, None)
    picks = [space.min_arch(r_lo) if r_lo else space.min_arch()]
    picks += [pool[order[int(q * (len(pool) - 1))]] for q in np.linspace(0.05, 0.95, n - 2)]
    return picks + [space.max_arch(r_hi) if r_hi else space.max_arch()]


def evaluate(stem: Path, archs: list, data) -> list[dict]:
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import load_supernet

    model, _ = load_supernet(stem)
    return evaluate_subnets(model, archs, build_loaders(data), split="test")


def part_transfer(args) -> dict:
    from hwnas.space import SearchSpace
    from hwnas.supernet.checkpoint import load_checkpoint_meta
    from hwnas.supernet.data import DataConfig
    from hwnas.supernet.transfer import TRANSFER_RECIPE, source_stem

    target = DataConfig.from_spec(args.target)
    out = Path(args.run or Path(args.work) / "transfer")
    cmd = [sys.executable, "-m", "hwnas", "train", "--init-from", args.source, "--data", args.target,
           "--out", str(out)]
    load_before = os.getloadavg()
    if args.run:  # trained earlier by exactly this command: its time from its own log, as scratch's
        seconds = _logged_seconds(out / "train_log.jsonl")
    else:
        started = time.time()
        subprocess.run(cmd, check=True, env={**os.environ, "HWNAS_NO_PROGRESS": "1"})
        seconds = time.time() - started

    scratch = SCRATCH[target.name]
    src_space = SearchSpace.from_dict(load_checkpoint_meta(source_stem(args.source))["space"])
    scratch_meta = load_checkpoint_meta(scratch)
    common_r = sorted(set(src_space.r_choices) & set(scratch_meta["space"]["r"]))
    archs = spread_archs(src_space, 8, r_choices=common_r)
    transferred = evaluate(out / "supernet", archs, target)
    from_scratch = evaluate(scratch, archs, target)
    scratch_s = _logged_seconds(Path(f"{scratch}_train_log.jsonl"))
    rows = [{"arch": a.describe(), "r": a.r, "transferred": t["top1"], "scratch": s["top1"], "n": t["n"]}
            for a, t, s in zip(archs, transferred, from_scratch)]
    # the whole space too (the resolutions below the from-scratch supernet's have no baseline)
    whole = spread_archs(src_space, 8, seed=1)
    whole_rows = [{"arch": a.describe(), "r": a.r, "transferred": t["top1"], "n": t["n"]}
                  for a, t in zip(whole, evaluate(out / "supernet", whole, target))]
    mean_t = float(np.mean([r["transferred"] for r in rows]))
    mean_s = float(np.mean([r["scratch"] for r in rows]))
    return {"command": " ".join(cmd[2:]), "source": args.source, "target": args.target,
            "recipe": TRANSFER_RECIPE, "transfer_s": round(seconds, 1),
            "scratch_s": round(scratch_s, 1), "time_ratio": round(seconds / scratch_s, 3),
            "mean_transferred": round(mean_t, 2), "mean_scratch": round(mean_s, 2),
            "gap": round(mean_t - mean_s, 2), "min_transferred": min(r["transferred"] for r in rows),
            "timed": "its own train log (--run)" if args.run else "this script, the whole command",
            "loadavg_before": [round(v, 2) for v in load_before],
            "test_images": rows[0]["n"], "se_at_mean": binomial_se(mean_t, rows[0]["n"]), "subnets": rows,
            "whole_space": {"mean": round(float(np.mean([r["transferred"] for r in whole_rows])), 2),
                            "min": min(r["transferred"] for r in whole_rows), "subnets": whole_rows}}


def part_recipes(args) -> dict:
    """Finished transfer runs (--runs, e.g. one per candidate recipe) on the same 12 subnets of the
    source's whole space: smallest, largest, 10 uniform (seed 1), target's test split."""
    from hwnas.space import SearchSpace
    from hwnas.supernet.checkpoint import load_checkpoint_meta
    from hwnas.supernet.data import DataConfig
    from hwnas.supernet.transfer import source_stem

    space = SearchSpace.from_dict(load_checkpoint_meta(source_stem(args.source))["space"])
    archs = [space.min_arch(), space.max_arch()] + space.sample(10, np.random.default_rng(1))
    target = DataConfig.from_spec(args.target)
    runs = {}
    for run in args.runs:
        meta = load_checkpoint_meta(Path(run) / "supernet")
        top1 = [t["top1"] for t in evaluate(Path(run) / "supernet", archs, target)]
        runs[run] = {"recipe": meta.get("extra", {}).get("config", {}).get("phases"),
                     "seconds": round(_logged_seconds(Path(run) / "train_log.jsonl"), 1),
                     "mean": round(float(np.mean(top1)), 2), "min": min(top1), "top1": top1}
        print(run, runs[run]["mean"], runs[run]["min"], flush=True)
    return {"target": args.target, "archs": [a.describe() for a in archs], "runs": runs}


def _logged_seconds(log: Path) -> float:
    """A run's training time as its log says: the last epoch's elapsed_s (counted from the start of
    the process that wrote it, so only for runs trained in one go, as both sides here were)."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return float(lines[-1]["elapsed_s"])


def part_finetune(args) -> dict:
    from hwnas.run import open_run
    from hwnas.supernet.data import DataConfig
    from hwnas.supernet.finetune import FinetuneSettings, finetune_subnet
    from hwnas.supernet.transfer import source_stem

    stem = source_stem(args.source)
    run = open_run(Path(args.work) / "finetune-run", supernet=None if args.source == "shipped" else stem)
    data = DataConfig.from_spec(args.data) if args.data else None
    archs = spread_archs(run.space, 5)
    rows = []
    for arch in archs:
        row = {"arch": arch.describe(), "r": arch.r, "epochs": {}}
        for epochs in args.epochs:
            rec = finetune_subnet(run, arch, FinetuneSettings(epochs=epochs, lr=args.lr), data=data)
            row["before"] = rec["top1_before"]["test"]
            row["epochs"][str(epochs)] = {"after": rec["top1_after"]["test"],
                                          "gain": round(rec["top1_after"]["test"] - rec["top1_before"]["test"], 2),
                                          "seconds": rec["seconds"], "train_images": rec["train_images"]}
            row["n"] = rec["n"]["test"]
        row["se"] = binomial_se(row["before"], row["n"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    gains = {str(e): round(float(np.median([r["epochs"][str(e)]["gain"] for r in rows])), 2)
             for e in args.epochs}
    return {"source": args.source, "data": args.data or "the supernet's own (embedded)", "lr": args.lr,
            "median_gain": gains, "subnets": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("transfer", "finetune", "recipes"), required=True)
    ap.add_argument("--source", default="shipped")
    ap.add_argument("--target", default="mnist-embedded", help="(a) the dataset carried to")
    ap.add_argument("--run", default=None, help="(a) a finished transfer run of exactly that command: "
                    "evaluate it instead of training one (its time from its log)")
    ap.add_argument("--data", default=None, help="(b) fine-tuning data (default: the supernet's)")
    ap.add_argument("--runs", nargs="+", default=[], help="(recipes) finished transfer runs to compare")
    ap.add_argument("--epochs", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        args.work = args.work or tmp
        result = {"transfer": part_transfer, "finetune": part_finetune, "recipes": part_recipes}[args.part](args)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    key = args.part if args.part != "finetune" or not args.data else f"finetune {args.data}"
    results[key] = {**result, "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()}}
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "subnets"}, indent=1))


if __name__ == "__main__":
    main()
