"""Budgets that hold when first measured: searches with and without the latency bound.

On a profiled run (e.g. a quickstart's), for each budget (a fraction of the way from the fastest to
the slowest profiled subnet), seed and mode, one search with verification on a fresh copy of the run
(so no configuration reuses another's measurements). A mode is a latency confidence (0: the point
prediction) and a verification order (``best``: best predicted first, the default; ``ties``:
candidates the accuracy predictor cannot tell from the best measured fastest first); by default the
point prediction, the bound, and the bound with ties fastest first (what that order costs and buys).
Per search:
the share of the first top-k measured that held the budget (`first_try_within_budget`), the
measurements spent per returned subnet, and the returned subnets' measured top-1 and latency. With
--export, each search in the default mode (bound, best first) exports its pick as `hwnas export` does and records whether the
export's own measurement agrees with verification's (ratio, and the bundle's budget decision).

    .venv/bin/python experiments/bench_latency_risk.py --run runs/quickstart --export              # 5 x 3
    .venv/bin/python experiments/bench_latency_risk.py --run runs/quickstart --quick               # 2 x 1
    .venv/bin/python experiments/bench_latency_risk.py --run runs/qs-ov --device cpu-openvino --export

Writes experiments/results/latency_risk.json (cpu-ort) or latency_risk_<device>.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from hwnas.fileio import atomic_write_json
from hwnas.profiling.store import read_measurements
from hwnas.search import SearchSettings, run_search

ROOT = Path(__file__).resolve().parent


def export_agreement(run: Path, device: str, arch_id: str, verified_ms: float) -> dict:
    """Export `arch_id` and compare the export's own measurement with verification's."""
    from hwnas.export import export_subnet

    bundle = export_subnet(run, arch_id, device)
    latency = json.loads((bundle / "model.json").read_text())["latency"]
    first = latency["checks"][0]["corrected_ms"]
    return {"export_ms": first, "export_over_verification": first / verified_ms,
            "export_checks": len(latency["checks"]), "bundle_ms": latency["ms"],
            "bundle_within_budget": latency.get("within_budget"), "decided_by": latency.get("decided_by")}


def keep_test_top1(copy: Path, base: Path) -> None:
    """Carry the copy's test-split top-1 rows into the base copy: a subnet's test top-1 is the same
    whichever search asks, so later searches need not evaluate it again (latency is never carried)."""
    import pandas as pd

    new, old = copy / "accuracy-test.csv", base / "accuracy-test.csv"
    if new.exists():
        both = pd.concat([pd.read_csv(old), pd.read_csv(new)]) if old.exists() else pd.read_csv(new)
        both.drop_duplicates("id", keep="first").to_csv(old, index=False)


def one(run: Path, device: str, budget: float, seed: int, confidence: float, top_k: int,
        export: bool = False, ties: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="hwnas-risk-") as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("exports", "optuna.journal*", ".locks"))
        try:
            return _one(copy, device, budget, seed, confidence, top_k, export, ties)
        finally:
            keep_test_top1(copy, run)


def _one(copy: Path, device: str, budget: float, seed: int, confidence: float, top_k: int,
         export: bool, ties: bool) -> dict:
    res = run_search(copy, SearchSettings(device, budget, pareto=True, top_k=top_k, seed=seed,
                                          latency_confidence=confidence, ties_fastest_first=ties,
                                          baselines=False, plot=False))
    m = res.metrics
    best = res.best
    doc = json.loads((copy / "search.json").read_text())
    agreement = export_agreement(copy, device, best[0]["id"], best[0]["measured_ms"][device]) \
        if export and best else {}
    return {**agreement, "budget_ms": budget, "seed": seed, "confidence": confidence,
            "first_try_within_budget": m["first_try_within_budget"], "measured": m["measured"],
            "returned": len(best), "measured_per_returned": m["measured"] / len(best) if best else None,
            "best_measured_top1": best[0]["measured_top1"] if best else None,
            "best_measured_ms": best[0]["measured_ms"][device] if best else None,
            "returned_over_budget": sum(b["measured_ms"][device] > budget for b in best),
            "factor": doc["latency_risk"]["by_precision"]["fp32"][device],
            "tied": doc["acceptance"]["latency"]["order"]["tied"]}


def summarise(rows: list[dict], modes: list[str]) -> dict:
    summary = {}
    for c in modes:
        mine = [r for r in rows if r["mode"] == c]
        ft = [r["first_try_within_budget"] for r in mine if r["first_try_within_budget"] is not None]
        top1 = [r["best_measured_top1"] for r in mine if r["best_measured_top1"] is not None]
        per = [r["measured_per_returned"] for r in mine if r["measured_per_returned"] is not None]
        summary[str(c)] = {"searches": len(mine), "first_try_within_budget_mean": statistics.mean(ft) if ft else None,
                           "first_try_all_held": sum(v == 1.0 for v in ft), "measured_per_returned_median":
                           statistics.median(per) if per else None,
                           "best_measured_top1_mean": statistics.mean(top1) if top1 else None,
                           "returned_over_budget": sum(r["returned_over_budget"] for r in mine)}
        ratios = [r["export_over_verification"] for r in mine if "export_over_verification" in r]
        if ratios:
            summary[str(c)]["export"] = {
                "n": len(ratios), "ratio_median": statistics.median(ratios),
                "within_10pct": sum(abs(v - 1) <= 0.10 for v in ratios),
                "bundle_within_budget": sum(r["bundle_within_budget"] is True for r in mine),
                "remeasured": sum(r["export_checks"] > 1 for r in mine if "export_checks" in r)}
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--device", default="cpu-ort")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.35, 0.45, 0.55, 0.7])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=["0:best", "0.95:best", "0.95:ties"],
                    help="CONFIDENCE:ORDER, ORDER best (best predicted first) or ties (fastest first among "
                         "predicted ties)")
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="budgets at 0.25 and 0.4 of the range, one seed")
    ap.add_argument("--export", action="store_true", help="export each pick of a search under the bound and "
                    "compare the export's measurement with verification's")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--resume", action="store_true", help="keep the searches --out already holds")
    args = ap.parse_args()
    out = args.out or ROOT / "results" / ("latency_risk.json" if args.device == "cpu-ort"
                                          else f"latency_risk_{args.device}.json")
    fractions, seeds = ([0.25, 0.4], 1) if args.quick else (args.fractions, args.seeds)
    ms = read_measurements(args.run, device=args.device, kind="subnet")["corrected_ms"]
    base = Path(tempfile.mkdtemp(prefix="hwnas-risk-base-")) / "run"  # the searches' source; the user's run is read only
    shutil.copytree(args.run, base, ignore=shutil.ignore_patterns("exports", "optuna.journal*", ".locks"))
    lo, hi = float(ms.min()), float(ms.max())
    # written after every search and resumed from (same run and device): a long benchmark may stop
    done = json.loads(out.read_text()).get("rows", []) if args.resume and out.exists() else []
    rows = list(done)
    for seed in range(seeds):  # every budget of one seed first: a stopped run still spans the range
        for f in fractions:
            for mode in args.modes:
                c, order = float(mode.split(":")[0]), mode.split(":")[1]
                if any((r["fraction"], r["seed"], r["mode"]) == (f, seed, mode) for r in done):
                    continue
                row = one(base, args.device, round(lo + f * (hi - lo), 3), seed, c, args.top_k,
                          export=args.export and c > 0 and order == "best", ties=order == "ties")
                row["fraction"], row["mode"] = f, mode
                rows.append(row)
                print(json.dumps({k: row[k] for k in ("fraction", "seed", "mode", "first_try_within_budget",
                                                      "measured", "returned", "best_measured_top1",
                                                      "best_measured_ms")}), flush=True)
                summary = summarise(rows, args.modes)
                atomic_write_json(out, {
                    "benchmark": "first-measured picks within budget, with and without the latency bound",
                    "command": "python " + " ".join(sys.argv), "run": str(args.run), "device": args.device,
                    "profiled_range_ms": [lo, hi], "machine": platform.platform(), "summary": summary,
                    "rows": rows})
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
