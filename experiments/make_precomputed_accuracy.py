"""Evaluate the shipped supernet's accuracy sample once and ship it (hwnas.accuracy.precomputed).

    .venv/bin/python experiments/make_precomputed_accuracy.py --samples 300

Builds the accuracy table of a fresh run on the shipped supernet and its embedded dataset exactly as
`hwnas accuracy build --samples N` does (same prefix-stable sample, seed 0, BN calibration on BN_IMAGES
training images, the validation split), then writes hwnas/assets/<shipped>_accuracy.csv and the key
that says when its rows apply (.json). Rerun it whenever the shipped supernet changes: a key that
no longer matches is ignored and every row is evaluated again.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    from hwnas.accuracy.precomputed import precomputed_key, precomputed_paths
    from hwnas.accuracy.table import build_accuracy_table
    from hwnas.run import open_run
    from hwnas.supernet.data import BN_IMAGES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--run", type=Path, default=None, help="reuse (and grow) this run's table")
    args = ap.parse_args()
    table, key_file = precomputed_paths()
    for stale in (table, key_file):  # never seed the new table from an old one
        stale.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = open_run(args.run or Path(tmp) / "run")
        started = time.time()
        rows = build_accuracy_table(run, args.samples, seed=0)
        seconds = time.time() - started
        rows.to_csv(table, index=False)  # the sample's rows only, however much the run's table holds
        key = precomputed_key(run, split="val", seed=0, bn_images=BN_IMAGES)
    timing = ({"seconds_to_evaluate": round(seconds, 1)} if args.run is None else
              {"evaluated_in": f"{args.run} (e.g. torchrun --nproc_per_node 2 -m hwnas accuracy build "
                               f"--run-dir {args.run} --samples {args.samples})"})
    key_file.write_text(json.dumps({"key": key, "rows": args.samples, **timing}, indent=1) + "\n")
    print(f"wrote {table} ({args.samples} subnets, {seconds:.0f} s) and {key_file}")


if __name__ == "__main__":
    main()
