"""Benchmark every device backend available here with the real profiler (`hwnas profile`'s code).

For each backend: the same N subnets (MACs-stratified, OFA-MobileNetV3 W=1.0, resolutions
128..224, 1000 classes) are profiled twice, in two separate processes, into two run directories,
each with its own fresh anchor book, so pass 2 calibrates its own anchor (`hwnas.profiling.anchors`).
Reported per backend:
  - repeatability: |pass 1 - pass 2| / mean, per subnet (median over subnets, and the share within
    +-5% and +-10%) of
      raw          the plain median of all timed runs,
      corrected    ratio x anchor, as two runs on one host store it: they share the host's anchor
                   (pass 2's ratios times pass 1's anchor; corrected_ms = ratio * anchor exactly),
      corrected_own_anchor   each pass on the anchor it calibrated itself (`--recalibrate`),
      ratio        latency / the reference's, the drift-free number;
    goal: corrected median <= 2% and >= 95% within +-5%;
  - throughput: subnets profiled per minute (compile + protocol), pass 1;
  - ranking: Kendall tau between each pair of backends on the same subnets (corrected, pass 1).

    .venv/bin/python experiments/bench_devices.py --n 30
    .venv/bin/python experiments/bench_devices.py --n 30 --devices cpu-ort cpu-openvino

Writes experiments/results/devices.json (machine, versions, command) and prints tables.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from hwnas.devices import get_device
from hwnas.fileio import atomic_write_json
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.store import read_measurements

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "devices.json"
DEFAULT_DEVICES = ("cpu-torch", "cpu-ort", "cpu-openvino", "mobile-xnnpack")

_PASS = """
import sys, time, json
from pathlib import Path
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.stage import profile
from hwnas.run import RunConfig
from hwnas.space import SearchSpace
run_dir, device, n, rounds, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
run = RunConfig(Path(run_dir), None, SearchSpace(), 1000)
t = time.time()
profile(run, [device], n, protocol=ProtocolSettings(rounds=rounds, runs=runs))
print(json.dumps({"seconds": time.time() - t}))
"""


def one_pass(run_dir: Path, device: str, n: int, rounds: int, runs: int, cpus: str | None) -> float:
    env = {**os.environ, "HWNAS_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1",
           "HWNAS_STATE_DIR": str(run_dir / "state")}  # a fresh anchor book: each pass calibrates
    pin = ["taskset", "-c", cpus] if cpus else []
    proc = subprocess.run([*pin, sys.executable, "-c", _PASS, str(run_dir), device, str(n), str(rounds), str(runs)],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]


def agreement(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    rel = np.abs(a - b) / ((a + b) / 2)
    return {"median_pct": round(100 * float(np.median(rel)), 2),
            "within_5pct": round(100 * float(np.mean(rel <= 0.05)), 1),
            "within_10pct": round(100 * float(np.mean(rel <= 0.10)), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--devices", nargs="+", default=list(DEFAULT_DEVICES))
    ap.add_argument("--rounds", type=int, default=ProtocolSettings.rounds)
    ap.add_argument("--runs", type=int, default=ProtocolSettings.runs)
    ap.add_argument("--taskset", default=None, metavar="CPUS",
                    help="pin the passes to these CPUs (taskset -c), away from other work")
    args = ap.parse_args()

    results: dict[str, dict] = {}
    latencies: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for device in args.devices:
            reason = get_device(device).available()
            if reason:
                results[device] = {"skipped": reason}
                print(f"{device}: skipped ({reason})")
                continue
            secs = [one_pass(Path(tmp) / f"{device}-{p}", device, args.n, args.rounds, args.runs,
                             args.taskset) for p in (1, 2)]
            frames = [read_measurements(Path(tmp) / f"{device}-{p}", kind="subnet").set_index("key") for p in (1, 2)]
            keys = frames[0].index.intersection(frames[1].index)
            a, b = (f.loc[keys] for f in frames)
            anchors = [float(f["ref_median_ms"].iloc[0]) for f in (a, b)]
            ratio_a, ratio_b = (f["corrected_ms"].to_numpy() / f["ref_median_ms"].to_numpy() for f in (a, b))
            results[device] = {
                "n": len(keys), "seconds": [round(s, 1) for s in secs],
                "subnets_per_minute": round(60 * len(keys) / secs[0], 1),
                "raw": agreement(a["median_ms"].to_numpy(), b["median_ms"].to_numpy()),
                "corrected": agreement(a["corrected_ms"].to_numpy(), ratio_b * anchors[0]),
                "corrected_own_anchor": agreement(a["corrected_ms"].to_numpy(), b["corrected_ms"].to_numpy()),
                "ratio": agreement(ratio_a, ratio_b),
                "anchors_ms": [round(v, 4) for v in anchors],
                "median_latency_ms": round(float(a["corrected_ms"].median()), 3),
                "versions": json.loads(a["versions"].iloc[0]),
            }
            latencies[device] = a["corrected_ms"].to_dict()
            r = results[device]
            cells = "  ".join(f"{k} {r[k]['median_pct']:5.2f}% ({r[k]['within_5pct']:5.1f}% in 5%)"
                              for k in ("raw", "corrected", "corrected_own_anchor"))
            print(f"{device:<16} {cells}  {r['subnets_per_minute']:5.1f} subnets/min", flush=True)

    taus = {}
    for d1, d2 in itertools.combinations(latencies, 2):
        keys = sorted(set(latencies[d1]) & set(latencies[d2]))
        tau = kendalltau([latencies[d1][k] for k in keys], [latencies[d2][k] for k in keys]).statistic
        taus[f"{d1} vs {d2}"] = round(float(tau), 3)
        print(f"Kendall tau {d1} vs {d2}: {tau:.3f}")
    atomic_write_json(OUT, {
        "benchmark": "device backends: repeatability (2 processes), throughput, rank agreement",
        "command": "python " + " ".join(sys.argv),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "loadavg_at_end": os.getloadavg()},
        "settings": vars(args), "space": "OFA-MobileNetV3 W=1.0, r 128..224, 1000 classes",
        "backends": results, "kendall_tau": taus, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    })
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
