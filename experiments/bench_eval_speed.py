"""How long a subnet's accuracy evaluation takes, with and without BatchNorm folded into the
convolutions (`hwnas.supernet.bn.folded_for_eval`, what `evaluate_subnets` does since): the shipped
supernet's largest and smallest subnets at the lowest and highest trained resolution, each
recalibrated once, then evaluated on the whole test split (10,000 images) by both, interleaved,
`--repeats` times. Evaluation is what search verification, `hwnas accuracy build` and
`hwnas supernet eval` spend most of their time on.

    .venv/bin/python experiments/bench_eval_speed.py [--repeats 3]

Writes experiments/results/eval_speed.json (medians, their ratio, and both top-1s: folding must not
change them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from hwnas.fileio import atomic_write_json
from hwnas.supernet.bn import evaluate, folded_for_eval, recalibrate_bn
from hwnas.supernet.data import BN_IMAGES, build_loaders, calibration_loader
from hwnas.supernet.pretrained import data_config_of, load_supernet
from machine import cpu_model  # experiments/machine.py (a script's folder is on sys.path)

OUT = Path(__file__).resolve().parent / "results" / "eval_speed.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    t0 = time.time()
    model, meta = load_supernet(None)
    loaders = build_loaders(data_config_of(meta, None))
    space = model.space
    test = DataLoader(loaders.test.dataset, batch_size=250, shuffle=False)
    calib = calibration_loader(loaders.train, n_images=BN_IMAGES, seed=0)
    lo, hi = min(space.r_choices), max(space.r_choices)
    rows = []
    for name, base in (("largest", space.max_arch()), ("smallest", space.min_arch())):
        for r in (lo, hi):
            arch = dataclasses.replace(base, r=r)
            subnet = model.get_subnet(arch).to(memory_format=torch.channels_last)
            recalibrate_bn(subnet, calib, len(calib), resolution=r)
            folded = folded_for_eval(subnet)
            times: dict[str, list[float]] = {"as_is": [], "folded": []}
            top1 = {}
            for _ in range(args.repeats):
                for label, net in (("as_is", subnet), ("folded", folded)):
                    t = time.perf_counter()
                    top1[label] = evaluate(net, test, resolution=r)["top1"]
                    times[label].append(time.perf_counter() - t)
            med = {k: round(statistics.median(v), 3) for k, v in times.items()}
            row = {"subnet": name, "r": r, "median_s": med, "speedup": round(med["as_is"] / med["folded"], 3),
                   "top1": top1, "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()}}
            rows.append(row)
            print(f"{name:>8} r{r}: as is {med['as_is']:.2f} s, folded {med['folded']:.2f} s "
                  f"({row['speedup']:.2f}x); top-1 {top1['as_is']:.2f} / {top1['folded']:.2f}", flush=True)
    atomic_write_json(args.out, {
        "command": "python experiments/bench_eval_speed.py " + " ".join(sys.argv[1:]),
        "cpu": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__,
        "images": len(test.dataset), "bn_images": BN_IMAGES, "repeats": args.repeats, "rows": rows,
        "seconds": round(time.time() - t0)})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
