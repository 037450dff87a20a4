"""Precision-aware search (issue 18 part 3, bf16: "INT8 that holds up" item 3): --precision
fp32 | bf16 | int8 | auto.

A tiny run holds stand-in predictors: fp32 latency on `cpu-ort` (or `cpu-openvino`) proportional
to MACs, bf16 / INT8 latency predictors on the device's variants (faster, or faster only for large
subnets), and bf16 / INT8 accuracy tables whose drops the test chooses. No device runs: `measure`
and the measured top-1s are stand-ins that record what they were asked."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from runtime_helpers import openvino_or_skip

from hwnas.families import NetworkSpec
from hwnas.accuracy import ACCURACY_PREDICTOR, accuracy_sample, make_accuracy_predictor
from hwnas.accuracy.int8 import RIDGE_MIN_ROWS, drop_table_path, fit_drop_model
from hwnas.accuracy.table import values_frame
from hwnas.search.api import run_search
from hwnas.search.problem import PredictorMissing, latency_predictor_path

DEV, DEV8 = "cpu-ort", "cpu-ort-int8"
OV, OV16, OV8 = "cpu-openvino", "cpu-openvino-bf16", "cpu-openvino-int8"
SMALL = {"population": 30, "generations": 12}


def _write_drop_table(run_dir, space, device, precision, drops) -> None:
    m = accuracy_sample(space, len(drops), seed=1)
    df = values_frame(space, m)
    df["id"] = [a.id for a in space.from_matrix(m)]
    df["top1_fp32"] = 80.0
    df["drop"] = np.asarray(drops, dtype=float)
    df[f"top1_{precision}"] = df["top1_fp32"] - df["drop"]
    df["top1_agreement"], df["n"] = 0.98, 500
    df.to_csv(drop_table_path(run_dir, device, precision), index=False)


@pytest.fixture
def make_run(tiny_supernet, tmp_path, monkeypatch):
    """make_run(int8_ms=fn(fp32 ms) or None, drops=[...], device=..., bf16_ms=fn or None,
    bf16_drops=[...]): a run with the fp32 predictors of test_search_api on `device`, its INT8
    (and bf16) variant's latency predictor fitted to fn(fp32 ms) and its drop table."""
    from search_stubs import MacsLatency, SynthAccuracy

    import hwnas.search.api as search_api
    from hwnas.devices.registry import precision_variant
    from hwnas.latency import AnalyticPredictor
    from hwnas.run import open_run

    def make(int8_ms=lambda ms: 0.5 * ms, drops=(0.3,) * 8, device=DEV, bf16_ms=None, bf16_drops=(0.0,) * 8):
        cfg = open_run(tmp_path / "run", supernet=tiny_supernet)
        m = accuracy_sample(cfg.space, 200, seed=0)
        ms = MacsLatency().predict(m)
        lats = {}
        for dev, fn in ((device, lambda ms: ms), (precision_variant(device, "int8"), int8_ms),
                        (f"{device}-bf16", bf16_ms)):
            if fn is not None:
                lats[dev] = AnalyticPredictor(features="stage", net=NetworkSpec("ofa-mbv3", 1.0, 10)).fit(m, fn(ms))
                lats[dev].save(latency_predictor_path(cfg.run_dir, dev))
        acc = make_accuracy_predictor("ridge", cfg.space, 10, features="full").fit(m, SynthAccuracy().predict(m))
        acc.save(cfg.run_dir / ACCURACY_PREDICTOR)
        tables = {"int8": drops, "bf16": bf16_drops if bf16_ms is not None else None}
        for p, d in tables.items():
            if d is not None:
                _write_drop_table(cfg.run_dir, cfg.space, precision_variant(device, p), p, d)
        asked = {"fp32": [], "bf16": [], "int8": []}
        monkeypatch.setattr(search_api, "measured_accuracy", lambda run, archs, **kw: (
            asked["fp32"].extend(a.id for a in archs) or SynthAccuracy().predict(list(archs))))
        measured = []

        def measure(dev, archs):  # the predictor of the device asked for: always within budget
            measured.append((dev, [a.id for a in archs]))
            return lats[dev].predict(list(archs))

        def top1_of(p):
            def top1(archs):
                asked[p].extend(a.id for a in archs)
                return SynthAccuracy().predict(list(archs)) - float(np.median(tables[p]))
            return top1

        return SimpleNamespace(run_dir=cfg.run_dir, space=cfg.space, lat=lats[device],
                               lat8=lats.get(precision_variant(device, "int8")), lats=lats, acc=acc,
                               asked=asked, measured=measured, budget=float(np.median(ms)), ms=ms,
                               kw=dict(measure=measure, measure_precision_accuracy={
                                   p: top1_of(p) for p, d in tables.items() if d is not None}, **SMALL))

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
    _write_drop_table(run.run_dir, run.space, DEV8, "int8", drops)
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
        run_search(tmp_path, DEV, 5.0, precision="fp16")
    assert str(bad.value).startswith("precision must be one of") and "bf16" in str(bad.value)


def _three_way(make_run):
    """cpu-openvino with both variants: bf16 pays a small overhead for a 0.75x slope, INT8 a large
    one for 0.35x and 0.3 points, so fp32 is fastest for the smallest subnets, bf16 from there on,
    INT8 for the larger ones where its speed is worth 0.3 points, and bf16 again at the top, where
    no speed buys back the points INT8 loses."""
    run = make_run(device=OV, bf16_ms=lambda ms: 0.75 * ms + 0.15 * np.median(ms), bf16_drops=(0.0,) * 8,
                   int8_ms=lambda ms: 0.35 * ms + 0.75 * np.median(ms), drops=(0.3,) * 8)
    run.budget = float(np.max(run.ms))  # every subnet allowed: the whole front is in play
    return run


def test_auto_over_fp32_bf16_int8_chooses_each_precision_where_it_wins(make_run):
    run = _three_way(make_run)
    # the point predictions (no latency bound): every subnet allowed, the whole front in play
    res = run_search(run.run_dir, OV, run.budget, top_k=3, precision="auto", latency_confidence=0.0, **run.kw)
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert (csv["ms_device"] == csv["precision"].map({"fp32": OV, "bf16": OV16, "int8": OV8})).all()
    front = csv[csv["on_front"]].sort_values("ms_pred").reset_index(drop=True)
    prec = front["precision"]
    assert set(prec) == {"fp32", "bf16", "int8"}
    # each wins a range: fp32 the fastest points, INT8 a band of larger subnets, bf16 the rest and
    # the most accurate point (no drop)
    assert prec.iloc[0] == "fp32" and prec[front["top1_pred"].idxmax()] == "bf16"
    assert front.loc[prec == "fp32", "ms_pred"].max() < front.loc[prec == "int8", "ms_pred"].min()
    archs = run.space.from_matrix(front[list(run.space.flat_columns)].to_numpy())
    lat = {p: run.lats[d].predict(archs) for p, d in (("fp32", OV), ("bf16", OV16), ("int8", OV8))}
    for p in lat:  # each point's latency is its own precision's prediction
        mine = (prec == p).to_numpy()
        np.testing.assert_allclose(front["ms_pred"].to_numpy()[mine], lat[p][mine], rtol=1e-6)
    # per subnet, the chosen precision is not beaten by the same subnet in another one: fp32 and bf16
    # (same top-1) where they are the faster of the two, INT8 only where it is the fastest of all
    fp32, bf16, int8 = (prec == p for p in ("fp32", "bf16", "int8"))
    assert (lat["fp32"][fp32] <= lat["bf16"][fp32]).all() and (lat["bf16"][bf16] <= lat["fp32"][bf16]).all()
    assert (lat["int8"][int8] < np.minimum(lat["fp32"], lat["bf16"])[int8]).all()
    np.testing.assert_allclose(front["top1_pred"], run.acc.predict(archs)
                               - prec.map({"fp32": 0.0, "bf16": 0.0, "int8": 0.3}), atol=1e-6)
    doc = json.loads((run.run_dir / "search.json").read_text())
    block = doc["precision"]
    assert block["considered"] == block["searched"] == ["fp32", "bf16", "int8"] and block["left_out"] is None
    assert block["latency_devices"] == {"fp32": {OV: OV}, "bf16": {OV: OV16}, "int8": {OV: OV8}}
    assert block["bf16_accuracy"]["drop_model"]["table"] == f"accuracy-bf16-{OV16}.csv"
    assert block["int8_accuracy"]["drop_model"]["median_drop"] == pytest.approx(0.3)
    assert set(doc["metrics"]["by_precision"]) == {"fp32", "bf16", "int8"}
    for b in res.best:  # verified on its own precision's device, top-1 measured in that precision
        assert b["latency_devices"][OV] == {"fp32": OV, "bf16": OV16, "int8": OV8}[b["precision"]]
        assert b["id"] in run.asked[b["precision"]]
    assert all(r["device"] == {"fp32": OV, "bf16": OV16, "int8": OV8}[r["precision"]] for r in doc["verification"])


def test_bf16_searches_on_the_bf16_variant_and_verifies_there(make_run):
    run = _three_way(make_run)
    res = run_search(run.run_dir, OV, run.budget, top_k=2, precision="bf16", **run.kw)
    assert res.ok and all(b["precision"] == "bf16" and b["latency_devices"] == {OV: OV16} for b in res.best)
    assert {d for d, _ in run.measured} == {OV16}
    assert run.asked["bf16"] and not run.asked["fp32"] and not run.asked["int8"]
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert set(csv["precision"]) == {"bf16"} and set(csv["ms_device"]) == {OV16}
    doc = json.loads((run.run_dir / "search.json").read_text())
    assert doc["precision"]["considered"] == ["bf16"] and "int8_accuracy" not in doc["precision"]


def test_auto_leaves_out_a_variant_this_machine_cannot_run_and_never_fitted(make_run, monkeypatch):
    from hwnas.devices import openvino_backend

    run = make_run(device=OV)  # fp32 and INT8 predictors only
    monkeypatch.setattr(openvino_backend, "plugin_capabilities", lambda target: ("FP32", "INT8"))
    run_search(run.run_dir, OV, run.budget, top_k=2, precision="auto", verify=False, plot=False, **SMALL)
    prec = json.loads((run.run_dir / "search.json").read_text())["precision"]
    assert prec["considered"] == ["fp32", "int8"]
    why = prec["left_out"]["bf16"]
    assert why.startswith(f"'{OV16}' has no latency predictor in this run and is not usable here: ")
    assert set(pd.read_csv(run.run_dir / "pareto.csv")["precision"]) <= {"fp32", "int8"}


def test_auto_asks_for_a_bf16_predictor_where_bf16_runs(make_run, monkeypatch):
    from hwnas.devices import openvino_backend

    openvino_or_skip()
    run = make_run(device=OV)
    monkeypatch.setattr(openvino_backend, "plugin_capabilities", lambda target: ("BF16", "FP32", "INT8"))
    with pytest.raises(PredictorMissing) as err:
        run_search(run.run_dir, OV, run.budget, precision="auto", verify=False, **SMALL)
    assert f"hwnas profile --run {run.run_dir} --device {OV16}" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("device, precision, says", [
    (DEV, "bf16", "device 'cpu-ort' has no bf16 variant (no bf16 device named 'cpu-ort-bf16'); devices with "
                  "one: cpu-openvino"),
    ("cuda-torch", "int8", "device 'cuda-torch' has no int8 variant (no int8 device named 'cuda-torch-int8'); "
                           "devices with one: cpu-ort, cpu-openvino, mobile-xnnpack, trt"),
    ("cuda-torch", "auto", "--precision auto has nothing to compare fp32 with: no bf16 variant of cuda-torch; "
                           "no int8 variant of cuda-torch; search with --precision fp32"),
    (OV16, "auto", f"'{OV16}' is a bf16 device; name its fp32 device"),
])
def test_a_precision_the_device_has_no_variant_for_is_one_line(make_run, monkeypatch, capsys, device, precision,
                                                              says):
    import hwnas.accuracy.api as accuracy_api
    from hwnas.cli import main

    run = make_run()
    monkeypatch.setattr(accuracy_api, "check_accuracy_table", lambda run, n=None: 200)  # (the table is a stand-in)
    with pytest.raises(SystemExit) as done:
        main(["search", "--run", str(run.run_dir), "--device", device, "--latency-ms", "5", "--precision",
              precision, "--no-verify"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert done.value.code == 2 and len(lines) == 1 and says in lines[0], lines
