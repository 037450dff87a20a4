"""How much of a subnet's measured top-1 is BN-calibration noise? The same subnets evaluated on the
same validation images after BatchNorm recalibration on two different random draws of training
images, with 500 and with 2,000 calibration images.

    .venv/bin/python experiments/bench_bn_noise.py --subnets 16

Writes experiments/results/bn_noise.json: per setting the std of the per-subnet difference between
the two draws (a subnet's own calibration noise is that / sqrt 2), and the mean change from 500 to
2,000 images. hwnas's default (`hwnas.supernet.data.BN_IMAGES`) was chosen from it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "bn_noise.json"


def main() -> None:
    from hwnas.accuracy.table import accuracy_sample
    from hwnas.supernet.data import build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subnets", type=int, default=16)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    model, meta = load_supernet(None)
    loaders = build_loaders(data_config_of(meta))
    archs = model.space.from_matrix(accuracy_sample(model.space, args.subnets, 0))
    top1, seconds = {}, {}
    for images in (500, 2000):
        for seed in (0, 1):
            t = time.perf_counter()
            rows = evaluate_subnets(model, archs, loaders, split="val", bn_images=images, seed=seed)
            top1[(images, seed)] = np.array([r["top1"] for r in rows])
            seconds[f"{images}/{seed}"] = round(time.perf_counter() - t, 1)
    result = {
        "command": "python " + " ".join(sys.argv), "subnets": args.subnets,
        "val_images": int(len(loaders.val.dataset)), "supernet_sha256": meta["weights"]["sha256"],
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "std_of_draw_difference_pts": {str(n): float(np.std(top1[(n, 0)] - top1[(n, 1)])) for n in (500, 2000)},
        "mean_2000_minus_500_pts": float(np.mean(top1[(2000, 0)] - top1[(500, 0)])),
        "spread_of_subnets_pts": float(np.std(top1[(2000, 0)])),
        "seconds": seconds,
        "top1": {f"{n}/{s}": v.tolist() for (n, s), v in top1.items()},
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("std_of_draw_difference_pts", "mean_2000_minus_500_pts",
                                             "spread_of_subnets_pts")}, indent=1))


if __name__ == "__main__":
    main()
