"""Precision-aware search (issue 18 part 3): --precision fp32 | int8 | auto.

A tiny run holds stand-in predictors: fp32 latency on `cpu-ort` proportional to MACs, an INT8
latency predictor on `cpu-ort-int8` (faster, or faster only for large subnets), and an INT8
accuracy table whose drops the test chooses. No device runs: `measure` and the measured top-1s
are stand-ins that record what they were asked."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hwnas.accuracy import ACCURACY_PREDICTOR, accuracy_sample, make_accuracy_predictor
from hwnas.accuracy.int8 import RIDGE_MIN_ROWS, fit_drop_model, int8_table_path
from hwnas.accuracy.table import values_frame
from hwnas.search.api import run_search
from hwnas.search.problem import PredictorMissing, latency_predictor_path

DEV, DEV8 = "cpu-ort", "cpu-ort-int8"
SMALL = {"population": 30, "generations": 12}


def _write_int8_table(run_dir, space, drops) -> None:
    m = accuracy_sample(space, len(drops), seed=1)
    df = values_frame(space, m)
    df["id"] = [a.id for a in space.from_matrix(m)]
    df["top1_fp32"] = 80.0
    df["drop"] = np.asarray(drops, dtype=float)
    df["top1_int8"] = df["top1_fp32"] - df["drop"]
    df["top1_agreement"], df["n"] = 0.98, 500
    df.to_csv(int8_table_path(run_dir, DEV8), index=False)


@pytest.fixture
def make_run(tiny_supernet, tmp_path, monkeypatch):
    """make_run(int8_ms=fn(fp32 ms) or None, drops=[...]): a run with the fp32 predictors of
    test_search_api, the INT8 latency predictor fitted to fn(fp32 ms) and an INT8 table."""
    from search_stubs import MacsLatency, SynthAccuracy

    import hwnas.search.api as search_api
    from hwnas.latency import AnalyticPredictor
    from hwnas.run import open_run

    def make(int8_ms=lambda ms: 0.5 * ms, drops=(0.3,) * 8):
        cfg = open_run(tmp_path / "run", supernet=tiny_supernet)
        m = accuracy_sample(cfg.space, 200, seed=0)
        ms = MacsLatency().predict(m)
        lat = AnalyticPredictor(features="stage", n_classes=10).fit(m, ms)
        lat.save(latency_predictor_path(cfg.run_dir, DEV))
        lat8 = None
        if int8_ms is not None:
            lat8 = AnalyticPredictor(features="stage", n_classes=10).fit(m, int8_ms(ms))
            lat8.save(latency_predictor_path(cfg.run_dir, DEV8))
        acc = make_accuracy_predictor("ridge", cfg.space, 10, features="full").fit(m, SynthAccuracy().predict(m))
        acc.save(cfg.run_dir / ACCURACY_PREDICTOR)
        if drops is not None:
            _write_int8_table(cfg.run_dir, cfg.space, drops)
        asked = {"fp32": [], "int8": []}
        monkeypatch.setattr(search_api, "measured_accuracy", lambda run, archs, **kw: (
            asked["fp32"].extend(a.id for a in archs) or SynthAccuracy().predict(list(archs))))
        measured = []

        def measure(device, archs):  # the predictor of the device asked for: always within budget
            measured.append((device, [a.id for a in archs]))
            return {DEV: lat, DEV8: lat8}[device].predict(list(archs))

        def int8_top1(archs):
            asked["int8"].extend(a.id for a in archs)
            return SynthAccuracy().predict(list(archs)) - float(np.median(drops))

        return SimpleNamespace(run_dir=cfg.run_dir, space=cfg.space, lat=lat, lat8=lat8, acc=acc, asked=asked,
                               measured=measured, budget=float(np.median(ms)),
                               kw=dict(measure=measure, measure_int8_accuracy=int8_top1, **SMALL))

    return make


def test_int8_searches_on_the_int8_devices_predictor_and_verifies_there(make_run):
    run = make_run()
    res = run_search(run.run_dir, DEV, run.budget, top_k=3, precision="int8", **run.kw)
    assert res.ok and res.precision == "int8" and all(b["precision"] == "int8" for b in res.best)
    assert {d for d, _ in run.measured} == {DEV8}  # verified on the INT8 device only
    assert run.asked["int8"] and not run.asked["fp32"]  # the quantized artifact's top-1, not fp32's
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert set(csv["precision"]) == {"int8"} and set(csv["ms_device"]) == {DEV8}
    archs = run.space.from_matrix(csv[list(run.space.flat_columns)].to_numpy())
    np.testing.assert_allclose(csv["ms_pred"], run.lat8.predict(archs), rtol=1e-6)  # the INT8 predictor's ms
    np.testing.assert_allclose(csv["top1_pred"], run.acc.predict(archs) - 0.3, atol=1e-6)  # minus the drop
    assert (csv.loc[csv["verified"], "measured_top1"].notna()).all()
    for b in res.best:
        assert b["latency_devices"] == {DEV: DEV8} and b["measured_ms"][DEV] <= run.budget
    doc = json.loads((run.run_dir / "search.json").read_text())
    assert doc["settings"]["precision"] == "int8" and doc["precision"]["latency_devices"] == {"int8": {DEV: DEV8}}
    model = doc["precision"]["int8_accuracy"]["drop_model"]
    assert model["kind"] == "median" and model["rows"] == 8 and model["median_drop"] == pytest.approx(0.3)
    assert {r["device"] for r in doc["verification"]} == {DEV8}
    assert all(b["precision"] == "int8" for b in doc["best"])


def test_auto_front_takes_int8_points_when_faster_and_cheap_in_accuracy(make_run):
    run = make_run(int8_ms=lambda ms: 0.5 * ms, drops=(0.2, 0.3, 0.3, 0.4, 0.3, 0.25, 0.35, 0.3))
    res = run_search(run.run_dir, DEV, run.budget, top_k=3, precision="auto", **run.kw)
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    explored = pd.read_csv(run.run_dir / "explored.csv")
    assert set(explored["precision"]) == {"fp32", "int8"}  # both precisions scored
    assert (csv["ms_device"] == csv["precision"].map({"fp32": DEV, "int8": DEV8})).all()
    front = csv[csv["on_front"]]
    # twice as fast for 0.3 points: an arch's int8 point dominates its fp32 point wherever the front
    # is not at the accuracy ceiling, so the front is (nearly) all int8
    assert (front["precision"] == "int8").mean() >= 0.8
    assert res.best[0]["precision"] == "int8"
    measured_on = {d for d, _ in run.measured}
    assert DEV8 in measured_on
    for b in res.best:  # each best entry was verified on its own precision's device
        assert b["latency_devices"][DEV] == (DEV8 if b["precision"] == "int8" else DEV)
    doc = json.loads((run.run_dir / "search.json").read_text())
    assert doc["precision"]["searched"] == ["fp32", "int8"]
    assert set(doc["metrics"]["by_precision"]) == {"fp32", "int8"}
    assert [b["precision"] for b in doc["best"]] == [b["precision"] for b in res.best]


def test_auto_front_has_no_int8_point_when_the_drop_is_large(make_run):
    # INT8 is faster only for large subnets (a fixed overhead), and loses 30 points: nothing on
    # the INT8 side beats an fp32 subnet of the same latency
    run = make_run(int8_ms=lambda ms: 0.6 * ms + 0.6 * np.median(ms), drops=(30.0,) * 8)
    res = run_search(run.run_dir, DEV, run.budget, top_k=3, precision="auto", **run.kw)
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert not (csv.loc[csv["on_front"], "precision"] == "int8").any()
    assert all(b["precision"] == "fp32" for b in res.best)
    assert {d for d, _ in run.measured} == {DEV}


def test_missing_int8_predictor_names_the_commands(make_run):
    run = make_run(int8_ms=None)
    with pytest.raises(PredictorMissing) as err:
        run_search(run.run_dir, DEV, run.budget, precision="auto", verify=False, **SMALL)
    msg = str(err.value)
    assert "\n" not in msg and DEV8 in msg
    assert f"hwnas profile --run {run.run_dir} --device {DEV8}" in msg
    assert f"hwnas latency fit --run {run.run_dir} --device {DEV8}" in msg


def test_drop_model_is_median_with_few_rows_and_ridge_with_enough(make_run):
    run = make_run(drops=(0.1, 0.5, 0.3, 0.2, 0.9, 0.4, 0.3, 0.3))
    from hwnas.accuracy.int8 import read_int8_table

    few = fit_drop_model(run.space, read_int8_table(run.run_dir, DEV8, run.space), DEV8)
    assert few.kind == "median" and few.median == pytest.approx(0.3) and few.spread["max"] == pytest.approx(0.9)
    m = run.space.sample_matrix(5, 0)
    np.testing.assert_allclose(few.predict(m), 0.3)
    n = RIDGE_MIN_ROWS + 10
    sample = accuracy_sample(run.space, n, seed=1)
    drops = 0.02 * (run.lat.predict(run.space.from_matrix(sample)) / run.budget) * 10  # bigger is worse
    _write_int8_table(run.run_dir, run.space, drops)
    many = fit_drop_model(run.space, read_int8_table(run.run_dir, DEV8, run.space), DEV8)
    assert many.kind == "ridge" and many.oof is not None and "ridge" in many.describe()["note"]
    pred = many.predict(sample)
    assert np.corrcoef(pred, drops)[0, 1] > 0.8 and pred.min() >= drops.min() - 1e-9


def test_cli_checks_precision(capsys, tmp_path):
    from hwnas.cli import main

    with pytest.raises(SystemExit) as done:
        main(["search", "--run", str(tmp_path), "--device", DEV, "--latency-ms", "5", "--precision", "fp16"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert done.value.code == 2 and len(lines) == 1 and "--precision" in lines[0] and "auto" in lines[0]
    with pytest.raises(Exception) as bad:  # the library says the same
        run_search(tmp_path, DEV, 5.0, precision="bf16")
    assert "--precision" in str(bad.value)
