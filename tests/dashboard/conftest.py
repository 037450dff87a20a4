from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hwnas.devices.stats import summarize
from hwnas.profiling.store import MeasurementStore, stats_row
from hwnas.run import open_run
from hwnas.space import FLAT_COLUMNS
from hwnas.supernet.stats import count_params_macs


@pytest.fixture
def demo_run(tmp_path, tiny_supernet):
    """A run directory as the pipeline leaves it: measurements on two devices, a front with
    measured points of every kind, a search summary (searched on cpu-openvino, recommending the
    third subnet, with verification records and per-generation history), and the supernet's
    training log."""
    run = open_run(tmp_path / "demo", tiny_supernet)
    archs = run.space.sample(12, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    rows = []
    for a in archs:
        params, macs = count_params_macs(a, 10)
        for device, scale in (("cpu-ort", 1.0), ("cpu-openvino", 0.8)):
            ms = macs / 2e7 * scale * (1 + 0.03 * rng.standard_normal())
            stats = summarize([ms * (1 + 0.01 * k) for k in range(5)], warmup=2, device=device, backend="x")
            rows.append(stats_row(device, "subnet", a.id, stats, arch=a, params=params, macs=macs))
    MeasurementStore(run.run_dir).append(rows)
    front = pd.DataFrame([a.to_row() for a in archs[:6]], columns=list(FLAT_COLUMNS))
    front["id"] = [a.id for a in archs[:6]]
    front["ms_pred"] = np.linspace(0.5, 2.0, 6)
    front["top1_pred"] = np.linspace(90, 97, 6)
    front["top1_std"] = 0.5
    front["top1_objective"] = front["top1_pred"] - front["top1_std"]
    front["macs"] = [count_params_macs(a, 10)[1] for a in archs[:6]]
    front["params"] = [count_params_macs(a, 10)[0] for a in archs[:6]]
    # both measured (0, 2), top-1 only (3), latency only and over the budget (4)
    front["measured_ms"] = [0.55, np.nan, 1.2, np.nan, 1.6, np.nan]
    front["measured_top1"] = [89.5, np.nan, 95.2, 96.0, np.nan, np.nan]
    front.to_csv(run.run_dir / "pareto.csv", index=False)
    pd.DataFrame({"id": front["id"].iloc[[0, 2, 3]], "top1": [89.5, 95.2, 96.0], "n": 500}).to_csv(
        run.run_dir / "accuracy-test.csv", index=False)
    pick = archs[2]  # neither the top predicted subnet nor the fastest: pages must not guess it
    (run.run_dir / "search.json").write_text(json.dumps({
        "search_id": "s1",
        "settings": {"devices": ["cpu-openvino"], "budgets_ms": {"cpu-openvino": 1.5}, "algo": "evolution",
                     "accuracy_risk": 1.0, "verify": True, "objectives": ["top1", "ms:cpu-openvino"]},
        "accuracy_predictor": {"clip": [80.0, 97.0]},
        "best": [{"id": pick.id, "arch": pick.to_ofa_dict(), "top1_pred": 92.8, "top1_std": 0.5, "measured_top1": 95.2,
                  "ms_pred": {"cpu-openvino": 1.1}, "measured_ms": {"cpu-openvino": 1.2}, "verified": True}],
        "acceptance": {"accuracy": {"split": "test"}},
        "verification": [{"id": front["id"][i], "device": "cpu-openvino", "measured_ms": ms, "rel_se": 0.02,
                          "ucb_ms": ms * 1.06} for i, ms in ((0, 0.55), (2, 1.2), (4, 1.6))],
        "history": [{"generation": g, "hypervolume": 40 + g, "best_top1_objective": 95 + g / 10} for g in range(5)]}))
    log = [{"phase": p, "epoch": 1, "train_loss": 2.0 - i / 5, "train_acc": 50 + 5 * i,
            "val_top1_max": 60 + 5 * i, "val_top1_min": 40 + 5 * i, "elapsed_s": 10.0 * i}
           for i, p in enumerate(["full", "kernel", "depth-1", "depth-2", "expand-1", "expand-2"])]
    (tiny_supernet.parent / "train_log.jsonl").write_text("\n".join(json.dumps(r) for r in log) + "\n")
    return run.run_dir
