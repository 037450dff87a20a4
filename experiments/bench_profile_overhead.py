"""Benchmark: does this tree profile as fast as an earlier revision? (no-slowdown check)

`hwnas profile` of the same N subnets (this tree's shipped supernet, given to both trees with
--supernet so that both profile the same subnets even where `--rev` shipped another one; cpu-ort,
the default protocol unless --rounds/--runs) is timed with this tree and with a git worktree of `--rev`, alternating
A/B/A/B so that machine load hits both alike; each repeat profiles into a fresh run directory
(the host's anchor book is shared, as for any two runs on one host). Reports the wall time of each
repeat, the medians and their ratio, and whether the stored subnets agree (same ids).

    .venv/bin/python experiments/bench_profile_overhead.py --rev 4d763bc --n 12 --repeats 3

Writes experiments/results/profile_overhead.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hwnas.fileio import atomic_write_json  # noqa: E402
from hwnas.supernet.checkpoint_meta import shipped_checkpoint  # noqa: E402


def _profile(tree: Path, run: Path, args: argparse.Namespace) -> float:
    cmd = [sys.executable, "-m", "hwnas", "profile", "--run", str(run), "--device", args.device,
           "--samples", str(args.n), "--rounds", str(args.rounds), "--runs", str(args.runs),
           "--supernet", str(args.supernet)]
    env = {**os.environ, "PYTHONPATH": str(tree), "HWNAS_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    t = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def _ids(run: Path) -> list[str]:
    import pandas as pd

    df = pd.read_parquet(run / "measurements.parquet")
    return sorted(df.loc[df["kind"] == "subnet", "key"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", required=True, help="the earlier revision to compare with")
    p.add_argument("--n", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu-ort")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--supernet", type=Path, default=None, help="checkpoint stem (default: this tree's shipped)")
    p.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "profile_overhead.json")
    args = p.parse_args()
    args.supernet = (args.supernet or shipped_checkpoint()).resolve()

    rev = subprocess.run(["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="hwnas-bench-profile-") as tmp:
        tmp = Path(tmp)
        old = tmp / "old"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), rev], cwd=ROOT, check=True)
        try:
            times: dict[str, list[float]] = {"old": [], "new": []}
            ids: dict[str, list[str]] = {}
            for i in range(args.repeats):
                for name, tree in (("old", old), ("new", ROOT)) if i % 2 == 0 else (("new", ROOT), ("old", old)):
                    run = tmp / f"{name}-{i}"
                    times[name].append(round(_profile(tree, run, args), 2))
                    ids[name] = _ids(run)
                    print(f"repeat {i} {name} ({rev if name == 'old' else head}): {times[name][-1]:.1f} s",
                          flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "benchmark": "hwnas profile wall time, this tree vs an earlier revision (A/B alternated)",
        "command": "python experiments/bench_profile_overhead.py " + " ".join(sys.argv[1:]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
        "settings": {"n": args.n, "repeats": args.repeats, "device": args.device, "rounds": args.rounds,
                     "runs": args.runs, "supernet": str(args.supernet.relative_to(ROOT))
                     if args.supernet.is_relative_to(ROOT) else str(args.supernet)},
        "old": {"rev": rev, "seconds": times["old"], "median_s": med["old"]},
        "new": {"rev": head, "seconds": times["new"], "median_s": med["new"]},
        "new_over_old": round(med["new"] / med["old"], 3),
        "same_subnets": ids["old"] == ids["new"],
    }
    atomic_write_json(args.out, result)
    print(f"median {med['old']:.1f} s ({rev}) -> {med['new']:.1f} s ({head}): x{result['new_over_old']}; "
          f"same subnets: {result['same_subnets']}; wrote {args.out}")


if __name__ == "__main__":
    main()
