"""Real runs for the browser tests, made with the library on the tiny supernet and small settings:
two runs, two devices measured for real, a verified search, an export, a timm reference model,
and a later search that leaves the export orphaned (its subnet is no longer in pareto.csv)."""

from __future__ import annotations

import time
from pathlib import Path

from hwnas.profiling.protocol import ProtocolSettings

FAST = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)
VERIFY = ProtocolSettings(rounds=2, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)  # two rounds: a standard error
DEVICES = ("cpu-ort", "cpu-openvino")
SEARCH = {"population": 20, "generations": 5}


def _budget(run_dir: Path, device: str, quantile: float) -> float:
    import numpy as np

    from hwnas.profiling.store import read_measurements

    ms = read_measurements(run_dir, device=device, kind="subnet")["corrected_ms"].to_numpy()
    return float(np.quantile(ms, quantile))


def make_runs(root: Path, supernet: Path, log=print) -> dict[str, Path]:
    """{"alpha": run with everything, "beta": a second run with its own search}."""
    from hwnas.accuracy.table import build_accuracy_table
    from hwnas.export import export_subnet
    from hwnas.latency.api import fit_from_run
    from hwnas.profiling.stage import profile
    from hwnas.run import open_run
    from hwnas.search.api import run_search

    out = {}
    t0 = time.perf_counter()
    alpha = open_run(root / "alpha", supernet)
    profile(alpha, list(DEVICES), 10, references=["timm:mobilenetv3_small_050"], protocol=FAST)
    log(f"profile alpha {time.perf_counter() - t0:.1f}s")
    for d in DEVICES:
        fit_from_run(alpha.run_dir, d, n_classes=alpha.n_classes, folds=3)
    log(f"fit {time.perf_counter() - t0:.1f}s")
    # the accuracy table the search needs, with BN recalibrated on 128 images, not 2,000 (built by
    # the search, it made these runs take 164 s instead of 112 s; the weights are untrained anyway)
    build_accuracy_table(alpha, 20, bn_images=128)
    log(f"accuracy table {time.perf_counter() - t0:.1f}s")
    budget = _budget(alpha.run_dir, "cpu-ort", 0.7)
    # searches on the point predictions: a 10-row predictor's bound leaves the pages few explored points to draw
    first = run_search(alpha.run_dir, "cpu-ort", budget, pareto=True, top_k=2, accuracy_samples=20,
                       accuracy_checks=2, protocol=VERIFY, latency_confidence=0.0, **SEARCH)
    log(f"search 1 {time.perf_counter() - t0:.1f}s ok={first.ok}")
    chosen = first.best[0]["id"] if first.best else first.front["id"].iloc[-1]
    export_subnet(alpha.run_dir, chosen, "cpu-ort", calib_batches=2, verify_images=16, protocol=FAST)
    log(f"export {time.perf_counter() - t0:.1f}s")
    # a later, tighter search: the bundle belongs to the first one and may be over the new budget
    run_search(alpha.run_dir, "cpu-ort", budget * 0.6, pareto=True, top_k=2, accuracy_checks=2,
               protocol=VERIFY, seed=1, latency_confidence=0.0, **SEARCH)
    log(f"search 2 {time.perf_counter() - t0:.1f}s")
    out["alpha"] = alpha.run_dir

    beta = open_run(root / "beta", supernet)
    import shutil

    shutil.copy(alpha.run_dir / "accuracy.csv", beta.run_dir / "accuracy.csv")  # same supernet: reuse it
    profile(beta, ["cpu-ort"], 10, protocol=FAST)
    fit_from_run(beta.run_dir, "cpu-ort", n_classes=beta.n_classes, folds=3)
    run_search(beta.run_dir, "cpu-ort", _budget(beta.run_dir, "cpu-ort", 0.8), pareto=True, top_k=2,
               accuracy_samples=20, verify=False, **SEARCH)
    log(f"beta {time.perf_counter() - t0:.1f}s")
    out["beta"] = beta.run_dir
    return out


if __name__ == "__main__":  # build them by hand: python tests/dashboard/runs.py OUT SUPERNET
    import sys

    make_runs(Path(sys.argv[1]), Path(sys.argv[2]))
