"""Does a higher input resolution buy the shipped supernet's largest subnet accuracy? The largest
architecture (every block k7 e6, depth 4) evaluated on the test split at each resolution, inside
the trained range (r20..44) and beyond it (weights untrained there, BN recalibrated as always).

    .venv/bin/python experiments/bench_resolution_ceiling.py --r 20 24 28 32 36 40 44 48 52 56

Writes experiments/results/resolution_ceiling.json: top-1 per resolution and the gain of each
step. The question it answers: would a space reaching past r44 lift the largest subnet (the
issue's 93.5% anchor), or has resolution saturated on 28x28 images upsampled?
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "resolution_ceiling.json"


def main() -> None:
    import torch

    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.supernet.data import BN_IMAGES, build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", type=int, nargs="+", default=[20, 24, 28, 32, 36, 40, 44, 48, 52, 56])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, meta = load_supernet(None)
    space = get_family(meta.get("family", DEFAULT_FAMILY)).space_from_dict(meta["space"])
    loaders = build_loaders(data_config_of(meta))
    trained = (min(meta["space"]["r"]), max(meta["space"]["r"]))
    rows = []
    for r in args.r:
        t = time.perf_counter()
        # the same weights at another input size: the space's own bounds are left aside on purpose
        row = evaluate_subnets(model, [dataclasses.replace(space.max_arch(), r=r)], loaders, split="test")[0]
        rows.append({"r": r, "trained_at_r": trained[0] <= r <= trained[1], "top1": row["top1"],
                     "test_images": row["n"], "seconds": round(time.perf_counter() - t, 1)})
        print(json.dumps(rows[-1]), flush=True)
    for prev, cur in zip(rows, rows[1:]):
        cur["gain_over_previous_pts"] = round(cur["top1"] - prev["top1"], 2)
    result = {
        "command": "python " + " ".join(sys.argv), "checkpoint": "shipped", "dataset": meta.get("dataset"),
        "trained_r": list(trained), "bn_images": BN_IMAGES, "supernet_sha256": meta["weights"]["sha256"],
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "python": platform.python_version(), "threads": args.threads},
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
