"""The main job end to end on a tiny budget: the shipped supernet, a real runtime, a real export."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from hwnas.export import load, read_meta
from hwnas.profiling.store import read_measurements
from hwnas.search.versus import SESSION_SPREAD


@pytest.mark.slow
def test_quickstart_pipeline_on_a_tiny_budget(tmp_path):
    run = tmp_path / "qs"
    env = {**os.environ, "HWNAS_NO_PROGRESS": "1"}
    cmd = [sys.executable, "-m", "hwnas", "quickstart", "--run", str(run), "--samples", "12",
           "--accuracy-samples", "24", "--top-k", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "hwnas quickstart" in proc.stdout

    search = json.loads((run / "search.json").read_text())
    budget = search["settings"]["budgets_ms"]["cpu-ort"]
    front = pd.read_csv(run / "pareto.csv")
    assert front["on_front"].sum() > 0
    # every returned subnet was measured on the device and met the budget when measured
    assert search["best"]
    for best in search["best"]:
        measured = best["measured_ms"]["cpu-ort"]
        assert best["verified"] and measured is not None and measured <= budget
        assert best["measured_top1"] is not None  # evaluated on the test split, beside the prediction
    fits = {r["id"] for r in search["verification"] if r["accepted"]}  # evaluated: those, and
    assert front.loc[front["id"].isin(fits), "measured_top1"].notna().all()
    # the baselines' tries that fit a baseline's latency (`hwnas.search.versus`); nothing else
    margin = search["acceptance"]["latency"]["margin"]
    slowest_baseline = max((b["measured_ms"]["cpu-ort"] for b in search["baselines"]), default=0.0)
    others = front["verified"] & ~front["id"].isin(fits)
    tried = others & (front["measured_ms"] <= slowest_baseline * (1 + SESSION_SPREAD))
    assert front.loc[others & ~tried, "measured_top1"].isna().all()
    assert search["acceptance"]["latency"]["margin"] > 0
    measured_ids = set(read_measurements(run, device="cpu-ort", kind="subnet")["key"])
    assert {b["id"] for b in search["best"]} <= measured_ids
    # the shipped baselines, timed on the device beside the subnets, stand against the front
    assert search["baselines"] and all(b["measured_ms"]["cpu-ort"] > 0 and b["n_test"] == 10_000
                                       for b in search["baselines"])
    for b in search["baselines"]:  # judged timed together with the baseline's network
        if b["dominated_by"]:
            assert b["dominated_by_top1"] >= b["top1"] and b["latency_ratio"]["ratio"] * (1 + margin) <= 1

    bundle = run / "exports" / f"{search['best'][0]['id']}-cpu-ort"
    meta = read_meta(bundle)
    assert meta["status"] == "verified"
    verify = json.loads((bundle / "verify.json").read_text())
    assert verify["passed"]
    with load(bundle) as model:  # as README's snippet uses it
        from hwnas.supernet.fashion_mnist import read_embedded

        test = read_embedded()
        classes, probs = model.predict(test.test_images[:64])
        assert (classes == test.test_labels[:64]).mean() > 0.5  # a real, trained model, not a random one

    # running it again reuses everything: nothing is measured or evaluated twice
    rows = len(read_measurements(run))
    tables = {p.name: p.read_bytes() for p in run.glob("accuracy*.csv")}
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(read_measurements(run)) == rows and read_measurements(run)["key"].is_unique
    assert {p.name: p.read_bytes() for p in run.glob("accuracy*.csv")} == tables
