"""Benchmark: how repeatable are latencies under the measurement protocol?

Measures the same OFA-MobileNetV3 subnets twice (two passes) on one device and reports how much
the two passes disagree, per subnet, for
  - plain medians (`measure`, `runs` runs each, no reference), and
  - the protocol (`measure_many`: shuffled rounds + interleaved reference): raw medians and the
    drift-corrected latency.
The reference is the space's smallest subnet at the smallest resolution.

    .venv/bin/python experiments/measure_protocol.py --n 40 --device cpu-ort

Prints a table and writes experiments/results/measure_protocol.json (machine, versions, command).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from hwnas.devices import get_backend, measure, measure_many
from hwnas.fileio import atomic_write_json
from hwnas.space import SearchSpace
from hwnas.supernet import MobileNetV3Subnet


def _disagreement(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    rel = np.array([abs(a[k] / b[k] - 1.0) for k in a])
    return {"median_rel_diff": float(np.median(rel)), "p90_rel_diff": float(np.percentile(rel, 90)),
            "within_10pct": float(np.mean(rel <= 0.10))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="subnets")
    ap.add_argument("--device", default="cpu-ort")
    ap.add_argument("--devices-file", default=None)
    ap.add_argument("--resolutions", default="128:160:4", help="r range lo:hi:step (inclusive)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per round (plain: x rounds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="experiments/results/measure_protocol.json")
    args = ap.parse_args()

    lo, hi, step = (int(v) for v in args.resolutions.split(":"))
    space = SearchSpace(r_choices=tuple(range(lo, hi + 1, step)))
    archs = space.sample(args.n, args.seed)
    backend = get_backend(args.device, args.devices_file)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        def load(arch, name):
            module = MobileNetV3Subnet(arch).eval()
            x = torch.zeros(1, 3, arch.r, arch.r)
            return backend.load(backend.compile(module, x, Path(tmp) / name))

        reference = load(space.min_arch(), "reference")
        runners = {a.id: load(a, a.id) for a in archs}
        compile_s = time.time() - t0
        passes = []
        for p in range(2):
            t1 = time.time()
            plain = {k: measure(r, runs=args.runs * args.rounds, warmup_runs=5, warmup_s=0.1).median_ms
                     for k, r in runners.items()}
            proto = measure_many(runners, reference, rounds=args.rounds, runs=args.runs,
                                 warmup_runs=5, warmup_s=0.1, seed=args.seed + p,
                                 progress=lambda d, t, i: print(f"\rpass {p + 1}: {d}/{t}", end="",
                                                                file=sys.stderr))
            print(file=sys.stderr)
            passes.append({"plain": plain, "raw": {k: s.median_ms for k, s in proto.items()},
                           "corrected": {k: s.corrected_ms for k, s in proto.items()},
                           "ratio": {k: s.ratio for k, s in proto.items()},
                           "seconds": time.time() - t1,
                           "ref_median_ms": next(iter(proto.values())).ref_median_ms})
        versions = next(iter(proto.values())).versions
    rows = {kind: _disagreement(passes[0][kind], passes[1][kind])
            for kind in ("plain", "raw", "corrected", "ratio")}
    print(f"{args.n} subnets on {args.device} ({backend.device.summary()}), 2 passes")
    print(f"{'latency':<12}{'median |A/B-1|':>16}{'p90 |A/B-1|':>14}{'within 10%':>12}")
    for kind, r in rows.items():
        print(f"{kind:<12}{r['median_rel_diff']:>16.2%}{r['p90_rel_diff']:>14.2%}"
              f"{r['within_10pct']:>12.0%}")
    print(f"reference median: pass 1 {passes[0]['ref_median_ms']:.3f} ms, "
          f"pass 2 {passes[1]['ref_median_ms']:.3f} ms")
    atomic_write_json(args.out, {
        "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
        "machine": {"host": socket.gethostname(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "processor": platform.processor()},
        "versions": versions, "device": backend.device.model_dump(mode="json"),
        "settings": vars(args), "compile_seconds": compile_s,
        "disagreement": rows, "passes": passes,
        "archs": {a.id: json.loads(a.to_json()) for a in archs},
    })
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
