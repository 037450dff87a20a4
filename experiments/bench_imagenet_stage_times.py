"""What one subnet's accuracy costs on ImageNet-sized data with an OFA-MobileNetV3 supernet.

Times, on this machine's CPU with torch, the two passes every measured top-1 needs (BN
recalibration on `BN_IMAGES` training images, then evaluation) for the smallest, a middle and the
largest subnet of the published space (w1.0 and w1.2 layouts, random weights: the compute is the
same as the published files'), at r=160 and r=224, in images/s. From those rates it derives the
per-subnet seconds of `hwnas accuracy build` (10,000 held-out training images, Once-for-All's
choice) and of search verification (ImageNet's 50,000 val/ images), and of a 1000-subnet table.

    .venv/bin/python experiments/bench_imagenet_stage_times.py

Writes experiments/results/imagenet_stage_times.json. Report medians of one run (shared machine).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from hwnas.space import SearchSpace
from hwnas.supernet.data import BN_IMAGES
from hwnas.supernet.ofa_mbv3 import OFAMobileNetV3

OUT = Path(__file__).resolve().parent / "results" / "imagenet_stage_times.json"
VAL_IMAGES, TEST_IMAGES, TABLE_SUBNETS = 10_000, 50_000, 1000


def rate(fn, images: int, repeats: int) -> float:
    """Median images/s of `fn()` (which processes `images` images) over `repeats` calls."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return images / float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for width in (1.0, 1.2):
        space = SearchSpace(width_mult=width)
        model = OFAMobileNetV3(space, n_classes=1000).to(memory_format=torch.channels_last)
        mid = space.sample(1, np.random.default_rng(0))[0]
        for name, arch in (("min", space.min_arch()), ("mid", mid), ("max", space.max_arch())):
            for r in (160, 224):
                model.set_active_subnet(arch)
                x = torch.randn(args.batch, 3, r, r).contiguous(memory_format=torch.channels_last)

                def evaluate() -> None:
                    model.eval()
                    with torch.inference_mode():
                        model(x)

                def calibrate() -> None:  # BN in training mode, no gradients (what recalibration does)
                    model.train()
                    with torch.no_grad():
                        model(x)

                ev, cal = rate(evaluate, args.batch, args.repeats), rate(calibrate, args.batch, args.repeats)
                bn_s = BN_IMAGES / cal
                rows.append({"width": width, "subnet": name, "r": r, "eval_images_per_s": round(ev, 1),
                             "calibrate_images_per_s": round(cal, 1), "bn_recalibration_s": round(bn_s, 2),
                             "table_subnet_s": round(bn_s + VAL_IMAGES / ev, 1),
                             "verify_subnet_s": round(bn_s + TEST_IMAGES / ev, 1)})
                print(rows[-1], flush=True)
    table_s = [r["table_subnet_s"] for r in rows]
    summary = {"median_table_subnet_s": float(np.median(table_s)),
               "median_verify_subnet_s": float(np.median([r["verify_subnet_s"] for r in rows])),
               f"table_{TABLE_SUBNETS}_subnets_h": round(TABLE_SUBNETS * float(np.median(table_s)) / 3600, 1)}
    OUT.write_text(json.dumps({
        "what": "CPU images/s of OFA-MobileNetV3 subnets (eval and BN recalibration) and the derived "
                f"per-subnet cost of an accuracy-table row ({BN_IMAGES} BN + {VAL_IMAGES} val images) and "
                f"of one verification ({BN_IMAGES} BN + {TEST_IMAGES} images); image decoding not included",
        "command": "python experiments/bench_imagenet_stage_times.py",
        "machine": {"cpu_count": __import__("os").cpu_count(), "threads": args.threads,
                    "platform": platform.platform(), "torch": torch.__version__},
        "batch": args.batch, "rows": rows, "summary": summary}, indent=1) + "\n")
    print(summary)


if __name__ == "__main__":
    main()
