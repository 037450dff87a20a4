"""BatchNorm recalibration vs subnet accuracy: the same subnets with the supernet's own running
statistics ("none": what training left in the shared BN layers), and recalibrated on the same
calibration images in batches of 64 (the data loader's) or of 500.

Recalibration runs BN in training mode, so each layer normalises with its batch's statistics while
the running ones are collected; small batches bend what deeper layers see. Test split, shipped
supernet (or --checkpoint), --n subnets: min, max and random ones.

    .venv/bin/python experiments/bench_bn_calibration.py

Writes experiments/results/bn_calibration.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from hwnas.supernet.bn import evaluate, recalibrate_bn
from hwnas.supernet.data import BN_IMAGES, build_loaders, calibration_loader
from hwnas.supernet.pretrained import data_config_of, load_supernet

OUT = Path(__file__).resolve().parent / "results" / "bn_calibration.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--batches", default="none,64,500", help="'none' (no recalibration) and batch sizes")
    args = ap.parse_args()
    model, meta = load_supernet(args.checkpoint)
    loaders = build_loaders(data_config_of(meta))
    space = model.space
    archs = [space.min_arch(), space.max_arch(), *space.sample(args.n - 2, np.random.default_rng(1))]
    sizes = [b.strip() for b in args.batches.split(",")]
    rows = []
    for arch in archs:
        row = {"id": arch.id, "arch": arch.describe()}
        for bs in sizes:
            t = time.perf_counter()
            if bs == "none":
                net = model.get_subnet(arch).eval()
            else:
                calib = calibration_loader(loaders.train, BN_IMAGES, seed=0, batch_size=int(bs))
                net = recalibrate_bn(model.get_subnet(arch), calib, len(calib), resolution=arch.r)
            row[f"top1_batch{bs}"] = evaluate(net, loaders.test, resolution=arch.r)["top1"]
            row[f"seconds_batch{bs}"] = round(time.perf_counter() - t, 2)
        rows.append(row)
        print(row, flush=True)
    summary = {f"mean_top1_batch{bs}": float(np.mean([r[f"top1_batch{bs}"] for r in rows])) for bs in sizes}
    gain = [r[f"top1_batch{sizes[-1]}"] - r[f"top1_batch{sizes[0]}"] for r in rows]
    summary.update(gain_of=f"batch{sizes[-1]} over batch{sizes[0]}", median_gain_pts=float(np.median(gain)),
                   min_gain_pts=float(min(gain)), max_gain_pts=float(max(gain)))
    OUT.write_text(json.dumps({"benchmark": __doc__.splitlines()[0], "command": "python " + " ".join(sys.argv),
                               "checkpoint": args.checkpoint or "shipped", "dataset": meta.get("dataset"),
                               "bn_images": BN_IMAGES, "split": "test", "test_images": len(loaders.test.dataset),
                               "machine": platform.platform(), "summary": summary, "rows": rows}, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
