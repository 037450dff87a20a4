"""INT8 vs fp32 latency per runtime on subnets of the shipped supernet (1 thread).

For each runtime (ONNX Runtime, OpenVINO, ExecuTorch/XNNPACK) and each of N subnets (sampled with
`SearchSpace().sample`, seed 0): compile the subnet on the fp32 device and on its INT8 variant
(calibrated on 32 real training images, never test images), check the INT8 output against fp32,
then time both with the project's protocol (`hwnas.devices.measure`: warm-up by count and time,
gc paused, 1 verified thread) in `--rounds` interleaved rounds (fp32 block, INT8 block, in
alternating order). The speed-up of a subnet is the median over rounds of
median(fp32 block) / median(INT8 block): a ratio taken side by side, which the machine's drift
cancels out of. Reported per runtime: median speed-up, range, share within [1.2x, inf), int8_share
(median, min), and the mean absolute logit difference INT8 vs fp32.

    OMP_NUM_THREADS=1 nice .venv/bin/python experiments/bench_int8.py --n 30
    OMP_NUM_THREADS=1 nice .venv/bin/python experiments/bench_int8.py --n 8 --runtimes ort openvino
    OMP_NUM_THREADS=1 nice .venv/bin/python experiments/bench_int8.py --n 3 --runtimes xnnpack --merge

Writes experiments/results/int8.json (machine, versions, command) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from hwnas.devices import get_backend, measure
from hwnas.devices._imports import dist_version
from hwnas.fileio import atomic_write_json
from hwnas.space import SearchSpace
from hwnas.supernet.data import build_loaders
from hwnas.supernet.pretrained import data_config_of, load_supernet

OUT = Path(__file__).resolve().parent / "results" / "int8.json"
RUNTIMES = {"ort": ("cpu-ort", "cpu-ort-int8"), "openvino": ("cpu-openvino", "cpu-openvino-int8"),
            "xnnpack": ("mobile-xnnpack", "mobile-xnnpack-int8")}


def training_images(meta: dict, n: int) -> np.ndarray:
    """The first `n` images of the supernet's training split (calibration never sees test data)."""
    loaders = build_loaders(data_config_of(meta))
    out, have = [], 0
    for x, _ in loaders.train:
        out.append(x.numpy())
        have += len(x)
        if have >= n:
            break
    return np.concatenate(out)[:n].astype(np.float32)


def paired_speedup(fp, q, rounds: int, runs: int) -> tuple[float, float, float]:
    """(median speed-up over rounds, fp32 ms, int8 ms): interleaved blocks, alternating order."""
    ratios, t_fp, t_q = [], [], []
    for r in range(rounds):
        first, second = (fp, q) if r % 2 == 0 else (q, fp)
        a = measure(first, runs=runs, warmup_runs=3, warmup_s=0.05).median_ms
        b = measure(second, runs=runs, warmup_runs=3, warmup_s=0.05).median_ms
        f, i = (a, b) if first is fp else (b, a)
        ratios.append(f / i)
        t_fp.append(f)
        t_q.append(i)
    return statistics.median(ratios), statistics.median(t_fp), statistics.median(t_q)


def bench_runtime(key: str, model, archs, calib, args, work: Path) -> dict:
    fp_dev, q_dev = RUNTIMES[key]
    fp_backend, q_backend = get_backend(fp_dev), get_backend(q_dev)
    reason = fp_backend.available() or q_backend.available()
    if reason:
        print(f"{key}: skipped: {reason}")
        return {"devices": [fp_dev, q_dev], "skipped": reason}
    rows = []
    for k, arch in enumerate(archs):
        net = model.get_subnet(arch).eval()
        x = torch.zeros(1, 3, arch.r, arch.r)
        t0 = time.perf_counter()
        fp = fp_backend.compile_and_load(net, x, work / key / arch.id / "fp32")
        q = q_backend.compile_and_load(net, x, work / key / arch.id / "int8", calibration=calib)
        compile_s = time.perf_counter() - t0
        probe = torch.nn.functional.interpolate(torch.from_numpy(calib[:8]), size=(arch.r, arch.r),
                                                mode="bilinear", align_corners=False).numpy()
        diff = float(np.mean([np.abs(fp.run(p[None]) - q.run(p[None])).mean() for p in probe]))
        agree = float(np.mean([fp.run(p[None]).argmax() == q.run(p[None]).argmax() for p in probe]))
        speedup, fp_ms, q_ms = paired_speedup(fp, q, args.rounds, args.runs)
        meta = q.artifact.metadata
        row = {"id": arch.id, "r": arch.r, "speedup": round(speedup, 3), "fp32_ms": round(fp_ms, 4),
               "int8_ms": round(q_ms, 4), "int8_share": meta.get("int8_share"),
               "int8_layers": meta.get("int8_layers"), "layers": meta.get("layers"),
               "calibration": meta.get("calibration"), "mean_abs_logit_diff": round(diff, 5),
               "top1_agreement_8_train_images": agree, "compile_s": round(compile_s, 1)}
        rows.append(row)
        print(f"{key} {k + 1}/{len(archs)} r{arch.r} speed-up {speedup:.2f}x "
              f"(fp32 {fp_ms:.3f} ms, int8 {q_ms:.3f} ms) int8_share {row['int8_share']}", flush=True)
        fp.close()
        q.close()
    s = np.array([r["speedup"] for r in rows])
    shares = [r["int8_share"] for r in rows]
    summary = {"median_speedup": round(float(np.median(s)), 3), "min_speedup": round(float(s.min()), 3),
               "max_speedup": round(float(s.max()), 3),
               "share_at_least_1.2x": round(float(np.mean(s >= 1.2)), 3),
               "median_int8_share": float(np.median(shares)), "min_int8_share": float(min(shares)),
               "median_abs_logit_diff": float(np.median([r["mean_abs_logit_diff"] for r in rows])),
               "quantizer": q.artifact.metadata.get("quantizer")}
    return {"devices": [fp_dev, q_dev], "summary": summary, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="subnets per runtime")
    ap.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=list(RUNTIMES))
    ap.add_argument("--rounds", type=int, default=9, help="interleaved fp32/int8 rounds")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per block")
    ap.add_argument("--calib", type=int, default=32, help="training images for calibration")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--merge", action="store_true",
                    help="keep the other runtimes' results already in --out (one runtime per call)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, meta = load_supernet()
    archs = SearchSpace().sample(args.n, np.random.default_rng(0))
    calib = training_images(meta, args.calib)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.runtimes:
            results[key] = bench_runtime(key, model, archs, calib, args, Path(tmp))
    print(f"\n{'runtime':10} {'median':>7} {'range':>13} {'>=1.2x':>7} {'int8_share':>10}")
    for key, res in results.items():
        if "summary" in res and key in args.runtimes:
            s = res["summary"]
            print(f"{key:10} {s['median_speedup']:6.2f}x {s['min_speedup']:5.2f}-{s['max_speedup']:.2f}x "
                  f"{s['share_at_least_1.2x']:7.0%} {s['median_int8_share']:10.2f}")
    commands = ["python " + " ".join(sys.argv)]
    if args.merge and args.out.exists():
        old = json.loads(args.out.read_text())
        results = {**{k: v for k, v in old["results"].items() if k not in results}, **results}
        commands = [*old.get("commands", [old.get("command")]), *commands]
    versions = {d: dist_version(d) for d in ("torch", "onnxruntime", "openvino", "executorch",
                                             "torchao", "nncf")}
    atomic_write_json(args.out, {
        "benchmark": __doc__.splitlines()[0], "commands": commands,
        "machine": platform.platform(), "processor": platform.processor(), "threads": 1,
        "versions": {k: v for k, v in versions.items() if v}, "supernet": "shipped",
        "n_subnets": {k: len(v.get("rows", [])) for k, v in results.items()}, "rounds": args.rounds, "runs": args.runs,
        "calibration": f"{args.calib} training images", "results": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
