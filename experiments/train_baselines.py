"""Hand-designed baselines trained alone on Fashion-MNIST, scored on its 10,000 test images.

Each timm model trains from scratch on the same 55,000 training images as the shipped supernet
(5,000 held out for validation, the same seed), with the supernet's recipe (`BaselineRecipe`:
SGD + Nesterov, warm-up then cosine from lr 0.1, label smoothing, weight decay 5e-5, flips and
2-pixel shifts, batch 128) for --epochs (default 30), one CPU thread, at --resolution (default 44,
the top of the supernet's space: a stride-32 network sees a 2x2 last feature map there, 1x1 at r32,
and Fashion-MNIST's 28x28 images carry no detail beyond it).

    .venv/bin/python experiments/train_baselines.py                     # every model, resumable
    .venv/bin/python experiments/train_baselines.py --models lcnet_050 mobilenetv3_small_050
    .venv/bin/python experiments/train_baselines.py --shard 1/2 &       # two processes, two cores

Each network's training is saved after every epoch under --state, so a stopped run continues where
it stopped (across sessions). Results: experiments/results/baselines_fashion.json (rows kept as they
finish, under a lock). `--ship` copies the finished rows into hwnas/assets/baselines/ (the shipped
accuracies a quickstart pairs with fresh latency measurements).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import platform
import sys
import time
from pathlib import Path

import torch

from hwnas.baselines import BaselineRecipe, train_baseline
from hwnas.fileio import atomic_write_json
from hwnas.supernet.data import DataConfig, build_loaders

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "baselines_fashion.json"
# cheapest first, so the first session finishes the most rows
MODELS = ["lcnet_050", "mobilenetv3_small_050", "lcnet_075", "mobilenetv3_small_075", "mnasnet_small",
          "mobilenetv3_small_100", "lcnet_100", "mobilenetv3_large_075", "mobilenetv3_large_100", "resnet18"]


SHIPPED = ROOT.parent / "hwnas" / "assets" / "baselines" / "fashion-mnist.json"


def ship(results: Path) -> None:
    """The finished rows, small: what `hwnas.baselines.shipped_baselines` reads."""
    doc = json.loads(results.read_text())
    keep = ("name", "resolution", "epochs", "top1", "n_test", "params")
    rows = [{k: r[k] for k in keep} for r in doc["rows"] if r.get("ship", True)]  # "ship": false says why not
    atomic_write_json(SHIPPED, {"dataset": doc["dataset"], "split": "test (the official 10,000 images)",
                                "train_images": doc["train_images"], "recipe": doc["recipe"],
                                "made_by": "experiments/train_baselines.py", "rows": rows})
    print(f"wrote {SHIPPED} ({len(rows)} baselines)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--resolution", type=int, default=44)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--data-root", default="/usr/share/datasets/fashion-mnist",
                    help="the original Fashion-MNIST idx files (apt-get install dataset-fashion-mnist)")
    ap.add_argument("--state", type=Path, default=ROOT.parent / "runs" / "baselines")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (results do not depend on it "
                    "beyond float summation order; the shipped rows used 1)")
    ap.add_argument("--shard", default="0/1", help="K/N: train every N-th model from the K-th")
    ap.add_argument("--ship", action="store_true", help="only copy the finished rows into "
                    "hwnas/assets/baselines/fashion-mnist.json (what runs on the embedded default use)")
    args = ap.parse_args()
    if args.ship:
        ship(args.out)
        return
    torch.set_num_threads(args.threads)
    shard, shards = (int(v) for v in args.shard.split("/"))
    recipe = BaselineRecipe(epochs=args.epochs)
    loaders = build_loaders(DataConfig(name="fashion-mnist", root=args.data_root,
                                       batch_size=recipe.batch_size, seed=0))
    here = {"platform": platform.platform(), "processor": platform.processor(),
            "python": platform.python_version(), "torch": torch.__version__, "threads": args.threads}

    def save(row: dict) -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            old = json.loads(args.out.read_text()) if args.out.exists() else {}
            rows = {(r["name"], r["resolution"]): r for r in old.get("rows", [])}
            rows[(row["name"], row["resolution"])] = row
            machines = old.get("machines", [])
            if here not in machines:
                machines.append(here)
            atomic_write_json(args.out, {
                "benchmark": "hand-designed timm models trained alone, test top-1 % on all test images",
                "command": "python " + " ".join(sys.argv), "dataset": "fashion-mnist",
                "train_images": len(loaders.train.dataset), "recipe": recipe.to_dict(),
                "machines": machines, "rows": sorted(rows.values(), key=lambda r: (r["name"], r["resolution"]))})

    for i, name in enumerate(args.models):
        if i % shards != shard:
            continue
        done = json.loads(args.out.read_text()).get("rows", []) if args.out.exists() else []
        if any(r["name"] == name and r["resolution"] == args.resolution and r["epochs"] == args.epochs
               for r in done):
            continue
        seen: set[str] = set()

        def log(step: int, steps: int, text: str, name: str = name) -> None:
            epoch = text.split()[1]
            if epoch not in seen:
                seen.add(epoch)
                print(f"{time.strftime('%H:%M:%S')} {name} r{args.resolution} {text}", flush=True)

        res = train_baseline(name, args.resolution, loaders, recipe,
                             state=args.state / f"{name}-r{args.resolution}-{args.epochs}ep", progress=log)
        print(f"{name} r{args.resolution}: test top-1 {res.top1:.2f}% (n={res.n_test})", flush=True)
        save(res.to_dict())


if __name__ == "__main__":
    main()
