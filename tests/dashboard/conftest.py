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
    """A run directory as the pipeline leaves it: measurements on two devices, a front, a search
    summary, and the supernet's training log."""
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
    front["macs"] = [count_params_macs(a, 10)[1] for a in archs[:6]]
    front["measured_ms"] = [0.55, np.nan, 1.2, np.nan, np.nan, np.nan]
    front.to_csv(run.run_dir / "pareto.csv", index=False)
    (run.run_dir / "search.json").write_text(json.dumps({"settings": {
        "devices": ["cpu-ort"], "budgets_ms": {"cpu-ort": 1.5}, "algo": "evolution"}}))
    log = [{"phase": p, "epoch": 1, "train_loss": 2.0 - i / 5, "train_acc": 50 + 5 * i,
            "val_top1_max": 60 + 5 * i, "val_top1_min": 40 + 5 * i, "elapsed_s": 10.0 * i}
           for i, p in enumerate(["full", "kernel", "depth-1", "depth-2", "expand-1", "expand-2"])]
    (tiny_supernet.parent / "train_log.jsonl").write_text("\n".join(json.dumps(r) for r in log) + "\n")
    return run.run_dir
