"""Measure the CPU latency fixture the latency-predictor tests and benchmark learn from.

Small OFA-MobileNetV3 subnets (W=1.0, 10 classes, resolutions 32..64) timed on this machine with
the measurement protocol (`measure_many`: shuffled rounds, interleaved reference = the smallest
subnet at r=32), on two devices (ONNX Runtime CPU and PyTorch eager CPU, 1 thread each), each
twice (two independent passes, so tests can compare predictions with measurement repeatability),
plus every stem/block/head part those subnets use, timed alone on ONNX Runtime (lookup-table
entries, `hwnas.latency.layout.family_entry_keys`).

    .venv/bin/python experiments/make_latency_fixture.py --n 300 --out tests/latency/data

Writes <out>/ofa_cpu_subnets.csv (flat arch columns + ort_ms, ort_ms_repeat, ort_median_ms,
torch_ms, torch_ms_repeat: drift-corrected ms unless named median) and <out>/ofa_cpu_blocks.csv
(part, stage, j, in_ch, k, e, size, ms, median_ms), and <out>/fixture_meta.json (host, versions).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from hwnas.families import NetworkSpec
from hwnas.devices import get_backend, measure_many
from hwnas.fileio import atomic_write_json
from hwnas.families.ofa_mbv3.blocks import entry_module
from hwnas.latency.layout import family_entry_keys
from hwnas.space import FLAT_COLUMNS, SearchSpace
from hwnas.supernet import MobileNetV3Subnet

N_CLASSES = 10


def _progress(label: str):
    def cb(done: int, total: int, _id: str) -> None:
        if done % 25 == 0 or done == total:
            print(f"\r{label}: {done}/{total}", end="", file=sys.stderr, flush=True)
            if done == total:
                print(file=sys.stderr)
    return cb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="tests/latency/data")
    ap.add_argument("--no-blocks", action="store_true")
    ap.add_argument("--devices", default="cpu-ort,cpu-torch", help="comma-separated: cpu-ort, cpu-torch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--update", action="store_true",
                    help="keep the other devices' columns of an existing ofa_cpu_subnets.csv")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    space = SearchSpace(r_choices=tuple(range(32, 65, 4)))
    archs = space.sample(args.n, args.seed)
    ids = [f"a{i}" for i in range(len(archs))]
    t0 = time.time()
    result = pd.DataFrame(space.to_matrix(archs), columns=list(FLAT_COLUMNS))
    if args.update:
        old = pd.read_csv(out / "ofa_cpu_subnets.csv")
        if not (old[list(FLAT_COLUMNS)].to_numpy() == result.to_numpy()).all():
            raise SystemExit("--update: the existing table holds other subnets (different --n/--seed)")
        result = old
    kw = dict(rounds=args.rounds, runs=10, warmup_runs=5, warmup_s=0.1, ref_runs=5)
    wanted = args.devices.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for dev, col in (("cpu-ort", "ort"), ("cpu-torch", "torch")):
            if dev not in wanted:
                continue
            backend = get_backend(dev)

            def load(module, shape, name, backend=backend):
                return backend.load(backend.compile(module.eval(), torch.zeros(*shape), Path(tmp) / dev / name))

            ref_arch = space.min_arch()
            reference = load(MobileNetV3Subnet(ref_arch, n_classes=N_CLASSES), (1, 3, 32, 32), "ref")
            runners = {i: load(MobileNetV3Subnet(a, n_classes=N_CLASSES), (1, 3, a.r, a.r), i)
                       for i, a in zip(ids, archs)}
            for p, suffix in enumerate(("", "_repeat")):
                stats = measure_many(runners, reference, seed=args.seed + 100 * p,
                                     progress=_progress(f"{dev} pass {p + 1}"), **kw)
                result[f"{col}_ms{suffix}"] = [round(stats[i].corrected_ms, 5) for i in ids]
                if col == "ort" and p == 0:
                    result["ort_median_ms"] = [round(stats[i].median_ms, 5) for i in ids]
            if dev == "cpu-ort" and not args.no_blocks:
                keys = family_entry_keys(NetworkSpec("ofa-mbv3", 1.0, 1000), np.array([a.to_row() for a in archs]))
                part_runners = {}
                for n, row in keys.iterrows():
                    module, shape = entry_module(row, 1.0, N_CLASSES)
                    part_runners[f"p{n}"] = load(module, shape, f"p{n}")
                stats = measure_many(part_runners, reference, seed=args.seed + 7,
                                     progress=_progress("parts"),
                                     **{**kw, "rounds": 2, "warmup_s": 0.05})
                keys["ms"] = [round(stats[f"p{n}"].corrected_ms, 6) for n in keys.index]
                keys["median_ms"] = [round(stats[f"p{n}"].median_ms, 6) for n in keys.index]
                out.mkdir(parents=True, exist_ok=True)
                keys.to_csv(out / "ofa_cpu_blocks.csv", index=False)
            runners.clear()
    out.mkdir(parents=True, exist_ok=True)
    result.to_csv(out / "ofa_cpu_subnets.csv", index=False)
    import onnxruntime

    meta_path = out / "fixture_meta.json"
    meta = json.loads(meta_path.read_text()) if args.update and meta_path.exists() else {}
    meta.setdefault("runs", []).append({
        "command": " ".join([Path(sys.executable).name] + sys.argv), "seconds": round(time.time() - t0),
        "host": platform.node(), "machine": platform.machine(), "python": platform.python_version(),
        "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "n_classes": N_CLASSES,
        "width_mult": 1.0, "resolutions": list(space.r_choices), "protocol": kw, "devices": wanted})
    atomic_write_json(meta_path, meta)
    print(f"wrote {out} in {time.time() - t0:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
