"""Does the exported artifact run as fast as what search verification timed?

Verification times a subnet compiled from fixed random weights (latency does not depend on the
weights on fp32 devices); `hwnas export` ships the trained, BN-recalibrated subnet. For every bundle
under a run's exports/, this times the bundle's own artifact (as `hwnas.export.load` runs it) and
its twin (the subnet as verification compiles it) interleaved in one call beside one reference
(`DeviceSession.measure_together`, what export's paired check uses), `--repeats` times, so their
ratio carries no session-to-session level. A ratio near 1 puts the spread of export's own check
against verification's on the sessions, not on the artifact.

    .venv/bin/python experiments/bench_bundle_vs_twin.py --run runs/quickstart

Writes experiments/results/bundle_vs_twin.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from machine import cpu_model

from hwnas.fileio import atomic_write_json

ROOT = Path(__file__).resolve().parent


def paired(run, bundle: Path, repeats: int) -> dict:
    import torch

    from hwnas.export import load
    from hwnas.profiling.session import open_session

    meta = json.loads((bundle / "model.json").read_text())
    device = meta["device"]["name"] if isinstance(meta["device"], dict) else meta["device"]
    arch = run.family.arch_from_dict(meta["arch"], run.space.width_mult)
    ratios, rows = [], []
    with load(bundle) as model, open_session(run, device) as session:
        twin = session.compile(f"{arch.id}-twin", session.timing_subnet(arch), torch.zeros(1, 3, arch.r, arch.r))
        for _ in range(repeats):
            got = session.measure_together({"bundle": model.runner, "twin": twin})
            b, t = got["bundle"], got["twin"]
            ratios.append(b.corrected_ms / t.corrected_ms)
            rows.append({"bundle_ms": b.corrected_ms, "twin_ms": t.corrected_ms,
                         "ratio_se": math.hypot(b.rel_se or 0.0, t.rel_se or 0.0)})
    return {"bundle": bundle.name, "id": arch.id, "device": device, "r": arch.r,
            "recorded_ms": meta["latency"].get("ms"), "ratio_median": statistics.median(ratios),
            "ratios": ratios, "calls": rows}


def main() -> None:
    from hwnas.run import open_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, nargs="+", required=True, help="runs whose exports/ bundles to time")
    ap.add_argument("--repeats", type=int, default=3, help="paired calls per bundle")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bundle_vs_twin.json")
    args = ap.parse_args()
    results = []
    for run_dir in args.run:
        run = open_run(run_dir, create=False)
        for bundle in sorted(p.parent for p in (run_dir / "exports").glob("*/model.json")):
            row = paired(run, bundle, args.repeats)
            row["run"] = str(run_dir)
            results.append(row)
            print(f"{bundle.name}: bundle / twin {row['ratio_median']:.3f} "
                  f"({', '.join(f'{r:.3f}' for r in row['ratios'])})", flush=True)
    medians = [r["ratio_median"] for r in results]
    atomic_write_json(args.out, {
        "benchmark": "a bundle's artifact against its twin as search verification compiles it, paired calls",
        "command": "python experiments/bench_bundle_vs_twin.py --run " + " ".join(map(str, args.run)),
        "machine": cpu_model(), "repeats": args.repeats,
        "summary": {"bundles": len(results), "median_ratio": statistics.median(medians) if medians else None,
                    "min_ratio": min(medians, default=None), "max_ratio": max(medians, default=None)},
        "rows": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
