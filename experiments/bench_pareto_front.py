"""How fast hwnas finds a Pareto front (`hwnas.search.pareto.front_mask`, moocore) at the sizes a
search and the dashboard meet: 45,000 rows of 2 and 4 objectives (Optuna's general sort took ~18 s
for 4 objectives on this machine).

    .venv/bin/python experiments/bench_pareto_front.py

Writes experiments/results/pareto_front_speed.json (median of --repeats).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from hwnas.search.pareto import front_mask

OUT = Path(__file__).resolve().parent / "results" / "pareto_front_speed.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=45_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    rows = []
    for n_obj in (2, 3, 4):
        loss = np.random.default_rng(0).random((args.rows, n_obj))
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            n_front = int(front_mask(loss).sum())
            times.append(time.perf_counter() - t)
        rows.append({"objectives": n_obj, "rows": args.rows, "front": n_front,
                     "median_s": round(float(np.median(times)), 4), "max_s": round(max(times), 4)})
        print(json.dumps(rows[-1]), flush=True)
    OUT.write_text(json.dumps({"benchmark": "pareto front speed (uniform random losses)",
                               "command": "python experiments/bench_pareto_front.py",
                               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "loadavg": [round(v, 2) for v in os.getloadavg()]},
                               "goal_s": 2.0, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
