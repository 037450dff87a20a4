"""Benchmark: do two profiling sessions on this machine agree? (the bound on any latency predictor)

Profiles the same subnets of the shipped supernet's space (`select_subnets`, as `hwnas profile`
picks them) with `hwnas.profiling.stage.profile` into two fresh run directories, one after the
other: two measuring sessions, each with its own reference anchor, exactly as a user's profile and a
later verification or re-profile are two sessions. Each session's `corrected_ms` is scaled by the
median ratio between the sessions (the anchors differ by a constant), then compared per subnet:
share within +-5% and +-10%, rmse of the log ratio, beside the protocol's own within-session
relative standard error (`rel_se`, what the acceptance rule allows for).

    .venv/bin/python experiments/bench_session_repeatability.py --n 60 [--device cpu-ort]

Writes experiments/results/session_repeatability.json (machine, CPU, versions, command).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hwnas.fileio import atomic_write_json
from hwnas.profiling.stage import profile
from hwnas.profiling.store import read_measurements
from hwnas.run import open_run
from machine import cpu_model  # experiments/machine.py (a script's folder is on sys.path)

OUT = Path(__file__).resolve().parent / "results" / "session_repeatability.json"


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted(f for f in set(flags) if f.startswith(("avx", "amx")))


def session(root: Path, name: str, device: str, n: int) -> dict[str, tuple[float, float]]:
    """One profiling session in a fresh run: {subnet id: (corrected_ms, rel_se)}."""
    run = open_run(root / name)
    profile(run, [device], n)
    df = read_measurements(run.run_dir, device=device, kind="subnet")
    return {k: (float(ms), float(se)) for k, ms, se in zip(df["key"], df["corrected_ms"], df["rel_se"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60, help="subnets per session (the quickstart profiles 60)")
    ap.add_argument("--device", default="cpu-ort")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        first = session(Path(tmp), "first", args.device, args.n)
        second = session(Path(tmp), "second", args.device, args.n)
    ids = sorted(set(first) & set(second))  # the same seeded picks: every subnet, both times
    ratio = np.array([second[i][0] / first[i][0] for i in ids])
    rel = ratio / np.median(ratio) - 1.0
    rel_se = np.array([first[i][1] for i in ids] + [second[i][1] for i in ids])
    result = {
        "command": "python experiments/bench_session_repeatability.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": cpu_model(), "flags": cpu_flags(), "arch": platform.machine()},
        "device": args.device, "n": len(ids), "seconds": round(time.time() - t0),
        "anchor_ratio": round(float(np.median(ratio)), 4),
        "within_5": round(float(np.mean(np.abs(rel) <= 0.05)), 3),
        "within_10": round(float(np.mean(np.abs(rel) <= 0.10)), 3),
        "rmse_log": round(float(np.sqrt(np.mean(np.log1p(rel) ** 2))), 4),
        "median_rel_se": round(float(np.median(rel_se)), 4),
        "note": "two fresh runs profiled one after the other; each subnet's corrected_ms of the second "
                "over the first, divided by the median of that ratio (the two anchors differ)",
    }
    atomic_write_json(args.out, result)
    print({k: v for k, v in result.items() if k != "command"})


if __name__ == "__main__":
    main()
