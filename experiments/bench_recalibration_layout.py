"""How long BatchNorm recalibration takes on a freshly cut (contiguous, NCHW) subnet, as export,
INT8 accuracy and fine-tuning hand it over: training-mode passes in the layout the subnet came in
(what `recalibrate_bn` did before) against `recalibrate_bn`, which runs channels-last on CPU and
gives the weights back in their layout. Subnets of the shipped supernet: the largest and smallest
at the lowest and highest trained resolution and `--random` random ones, each recalibrated on the
accuracy table's 2,000 training images by both ways, interleaved, `--repeats` times. Both must
give the same statistics to float rounding (the largest difference is reported: means in units of
their channel's standard deviation, variances relative).

    .venv/bin/python experiments/bench_recalibration_layout.py [--random 8] [--repeats 2]

Writes experiments/results/recalibration_layout.json (medians per subnet and their ratio).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hwnas.fileio import atomic_write_json
from hwnas.supernet.bn import batchnorm_layers, recalibrate_bn
from hwnas.supernet.data import BN_IMAGES, build_loaders, calibration_loader, resize_batch
from hwnas.supernet.pretrained import data_config_of, load_supernet
from machine import cpu_model  # experiments/machine.py (a script's folder is on sys.path)

OUT = Path(__file__).resolve().parent / "results" / "recalibration_layout.json"


@torch.no_grad()
def recalibrate_as_it_comes(model: torch.nn.Module, batches: list) -> None:
    """The same cumulative average as `recalibrate_bn`, in whatever layout the model and batches are."""
    model.eval()
    for bn in batchnorm_layers(model):
        bn.reset_running_stats()
        bn.momentum = None
        bn.train()
    for x in batches:
        model(x)
    model.eval()


def statistics_of(model: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(bn.running_mean.clone(), bn.running_var.clone()) for bn in batchnorm_layers(model)]


def largest_difference(got: list, want: list) -> float:
    """Means in units of the channel's standard deviation (many are ~1e-7, zero-mean activations),
    variances relative to themselves."""
    return max(max(float(((m - wm).abs() / wv.sqrt().clamp_min(1e-12)).max()),
                   float(((v - wv).abs() / wv.clamp_min(1e-12)).max()))
               for (m, v), (wm, wv) in zip(got, want))


def shipped_supernet_and_calibration() -> tuple[torch.nn.Module, object]:
    """The shipped supernet and the accuracy table's calibration images (what export uses)."""
    model, meta = load_supernet(None)
    train = build_loaders(data_config_of(meta, None)).train
    return model, calibration_loader(train, n_images=BN_IMAGES, seed=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(OUT))
    args, t0 = ap.parse_args(), time.time()
    model, calib = shipped_supernet_and_calibration()
    space = model.space
    lo, hi = min(space.r_choices), max(space.r_choices)
    subnets = [(name, dataclasses.replace(base, r=r)) for name, base in
               (("largest", space.max_arch()), ("smallest", space.min_arch())) for r in (lo, hi)]
    subnets += [("random", a) for a in space.sample(args.random, np.random.default_rng(0))]
    rows = []
    for name, arch in subnets:
        batches = [resize_batch(x, arch.r) for x, _ in calib]  # resized once: only the passes are timed
        times: dict[str, list[float]] = {"as_it_comes": [], "recalibrate_bn": []}
        stats = {}
        for _ in range(args.repeats):
            for label in times:
                subnet = model.get_subnet(arch).eval()
                t = time.perf_counter()
                if label == "as_it_comes":
                    recalibrate_as_it_comes(subnet, batches)
                else:
                    recalibrate_bn(subnet, [(x, None) for x in batches], len(batches))
                times[label].append(time.perf_counter() - t)
                stats[label] = statistics_of(subnet)
        diff = largest_difference(stats["recalibrate_bn"], stats["as_it_comes"])
        med = {k: round(statistics.median(v), 3) for k, v in times.items()}
        row = {"subnet": name, "id": arch.id, "r": arch.r, "median_s": med,
               "speedup": round(med["as_it_comes"] / med["recalibrate_bn"], 2),
               "largest_difference": diff,
               "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()}}
        rows.append(row)
        print(f"{name:>8} {arch.id} r{arch.r}: as it comes {med['as_it_comes']:.2f} s, recalibrate_bn "
              f"{med['recalibrate_bn']:.2f} s ({row['speedup']:.2f}x); statistics differ by <= {diff:.1e}",
              flush=True)
    speedups = [r["speedup"] for r in rows]
    atomic_write_json(args.out, {
        "command": "python experiments/bench_recalibration_layout.py " + " ".join(sys.argv[1:]),
        "cpu": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__,
        "bn_images": BN_IMAGES, "repeats": args.repeats,
        "median_speedup": statistics.median(speedups), "speedup_range": [min(speedups), max(speedups)],
        "rows": rows, "seconds": round(time.time() - t0)})
    print(f"median speedup {statistics.median(speedups):.2f}x ({min(speedups):.2f}-{max(speedups):.2f}x); "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
