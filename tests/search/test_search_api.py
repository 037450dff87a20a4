from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hwnas.errors import BudgetError, HwnasError, InputError
from hwnas.search.api import run_search
from hwnas.search.problem import PredictorMissing
from hwnas.space import FLAT_COLUMNS

DEV = "cpu-ort"


@pytest.fixture
def run(tiny_supernet, tmp_path, monkeypatch):
    """A run on the tiny supernet with an analytic latency predictor (fitted to ms proportional to
    MACs) and an accuracy predictor fitted to the synthetic accuracy, both saved where search looks.
    Measured top-1 is the synthetic accuracy itself (the tiny supernet is untrained)."""
    from search_stubs import SynthAccuracy, fit_stub_predictors

    import hwnas.search.api as search_api

    from hwnas.run import open_run

    cfg = open_run(tmp_path / "run", supernet=tiny_supernet)
    lat, budget = fit_stub_predictors(cfg, DEV)
    measured_top1 = []
    monkeypatch.setattr(search_api, "measured_accuracy", lambda run, archs, **kw: (
        measured_top1.extend(a.id for a in archs) or SynthAccuracy().predict(list(archs)) - 0.5))
    return SimpleNamespace(run_dir=cfg.run_dir, space=cfg.space, lat=lat, budget=budget,
                           measured_top1=measured_top1)


def _fake_device(run, slow_ids: set[str] | None = None, factor: float = 1.0):
    """'Measure' with the predictor; subnets in `slow_ids` (or all, with factor > 1) run slower."""
    calls = []

    def measure(device, archs):
        calls.append([a.id for a in archs])
        ms = run.lat.predict(list(archs))
        return np.array([v * (1.5 if slow_ids is not None and a.id in slow_ids else factor)
                         for v, a in zip(ms, archs)])

    measure.calls = calls  # type: ignore[attr-defined]
    return measure


SMALL = {"population": 30, "generations": 15}


def test_search_writes_front_report_and_plot_and_drops_over_budget_candidates(run):
    first = run_search(run.run_dir, DEV, run.budget, top_k=3, seed=0, verify=False, **SMALL)
    assert len(first.best) == 3 and not any(b["verified"] for b in first.best)
    top = run_search(run.run_dir, DEV, run.budget, top_k=3, seed=0, measure=_fake_device(run),
                     **SMALL).verification[0]["id"]
    meas = _fake_device(run, slow_ids={top})  # the first candidate measured breaks the budget on the device
    res = run_search(run.run_dir, DEV, run.budget, top_k=3, seed=0, measure=meas, **SMALL)
    assert len(res.best) == 3 and top not in [b["id"] for b in res.best]
    assert all(b["verified"] and b["measured_ms"][DEV] <= run.budget for b in res.best)
    dropped = [r for r in res.verification if r["id"] == top]
    assert dropped and not dropped[0]["accepted"] and dropped[0]["measured_ms"] > run.budget
    assert sum(len(c) for c in meas.calls) == 10  # 3 x top_k that fit, 1 replacement

    csv = pd.read_csv(run.run_dir / "pareto.csv")
    for col in (*FLAT_COLUMNS, "id", "top1_pred", "ms_pred", "macs", "params", "measured_ms",
                "within_budget", "verified", "on_front", "selected"):
        assert col in csv.columns, col
    assert (csv.loc[csv["on_front"], "ms_pred"] <= run.budget).all()
    assert csv["measured_ms"].notna().sum() == 10
    assert not csv.loc[csv["id"] == top, "within_budget"].item()
    front = csv[csv["on_front"]].sort_values("ms_pred")
    assert front["top1_objective"].is_monotonic_increasing  # a front: slower only if more accurate
    np.testing.assert_allclose(front["top1_objective"], front["top1_pred"] - front["top1_std"])  # risk 1
    assert (csv["macs"] > 0).all() and (csv["params"] > 0).all()
    explored = pd.read_csv(run.run_dir / "explored.csv")  # the scored population, same search
    assert set(explored["search_id"]) == set(csv["search_id"]) and len(explored) > len(csv)
    assert (explored[f"ms_pred:{DEV}"] <= run.budget).all() and explored["top1_pred"].notna().all()
    # the predictor's own top-1 (as pareto.csv reports it), not the risk-adjusted objective
    assert explored["top1_pred"].max() > csv.loc[csv["on_front"], "top1_objective"].max()

    doc = json.loads((run.run_dir / "search.json").read_text())
    assert doc["settings"]["algo"] == "evolution" and doc["settings"]["budgets_ms"] == {DEV: run.budget}
    assert doc["versions"]["moocore"] and doc["versions"]["optuna"]  # what fronts and samplers came from
    m = doc["metrics"]
    assert m["hypervolume"] > 0 and m["front_size"] == int(csv["on_front"].sum())
    assert m["predictor_calls"] == 30 * 16 and m["wall_s"] > 0 and m["tabulated_costs"] == {f"ms:{DEV}": True}
    assert m["first_try_within_budget"] == pytest.approx(2 / 3)
    split = m["time_split"]  # where the search's seconds went
    assert set(split) == {"accuracy_predictor_s", "latency_predictor_s", "bookkeeping_s"}
    assert all(v >= 0 for v in split.values()) and sum(split.values()) <= m["search_s"] + 1e-3
    assert m["fast_paths"]["fused_gather"] and m["fast_paths"]["costs"] == m["cost_paths"]
    assert [b["id"] for b in doc["best"]] == [b["id"] for b in res.best]
    history = doc["history"]  # the best objective per generation, never worse than the one before
    assert [h["generation"] for h in history] == list(range(len(history))) and len(history) > 1
    assert all(b["best_top1_objective"] >= a["best_top1_objective"] for a, b in zip(history, history[1:]))
    assert (run.run_dir / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert res.message.startswith("3 subnets met")


@pytest.mark.parametrize("algo,extra", [("nsga2", {}), ("optuna-nsga2", {"n_trials": 60}),
                                        ("optuna-tpe", {"n_trials": 20}), ("random", {"n_trials": 300})])
def test_every_algorithm_returns_a_verified_front(run, algo, extra):
    kw = {**SMALL, **extra}
    res = run_search(run.run_dir, DEV, run.budget, algo=algo, pareto=True, top_k=2, measure=_fake_device(run),
                     **kw)
    assert res.ok and all(b["measured_ms"][DEV] <= run.budget for b in res.best)
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert csv["on_front"].all() or algo == "random"
    if algo.startswith("optuna"):
        assert (run.run_dir / "optuna.journal").exists()
        settings = json.loads((run.run_dir / "search.json").read_text())["settings"]
        assert settings["storage"].startswith("journal:")


def test_nothing_returned_when_every_candidate_breaks_the_budget(run):
    res = run_search(run.run_dir, DEV, run.budget, top_k=2, measure=_fake_device(run, factor=3.0), **SMALL)
    assert res.best == [] and not res.ok
    assert "none of the 12 measured candidates" in res.message  # 2 x the 3 x top_k
    doc = json.loads((run.run_dir / "search.json").read_text())
    assert doc["best"] == [] and doc["metrics"]["accepted"] == 0


def test_user_errors_are_one_line(run, tmp_path):
    fastest = float(run.lat.predict(run.space.to_matrix([run.space.min_arch()]))[0])
    with pytest.raises(BudgetError, match=f"{fastest:.4g} ms") as err:
        run_search(run.run_dir, DEV, fastest / 2, verify=False, **SMALL)
    assert "\n" not in str(err.value)
    with pytest.raises(PredictorMissing, match=f"hwnas latency fit --run {run.run_dir} --device cpu-openvino"):
        run_search(run.run_dir, "cpu-openvino", 5.0, verify=False)
    with pytest.raises(InputError, match="^workers and storage apply to"):
        run_search(run.run_dir, DEV, run.budget, workers=2, verify=False)
    with pytest.raises(InputError, match="unknown search algorithm"):
        run_search(run.run_dir, DEV, run.budget, algo="annealing", verify=False)
    with pytest.raises(HwnasError, match="not an hwnas run"):
        run_search(tmp_path / "nowhere", DEV, 1.0)
    with pytest.raises(InputError, match="^max_macs must be a positive count"):
        run_search(run.run_dir, DEV, run.budget, max_macs=0, verify=False, **SMALL)
    with pytest.raises(BudgetError, match="no subnet has macs <= 1"):
        run_search(run.run_dir, DEV, run.budget, max_macs=1, verify=False, **SMALL)


def test_verification_on_the_real_device(run):
    """One candidate measured for real with ONNX Runtime (budget generous: the predictor here is
    synthetic); its drift-corrected latency lands in pareto.csv and the run's store."""
    from hwnas.devices import get_device
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.store import read_measurements

    reason = get_device(DEV).available()
    if reason:
        pytest.skip(reason)
    protocol = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)
    res = run_search(run.run_dir, DEV, 1000.0, top_k=1, protocol=protocol, population=20, generations=3)
    assert res.ok and res.best[0]["verified"]
    ms = res.best[0]["measured_ms"][DEV]
    assert 0 < ms < 1000
    store = read_measurements(run.run_dir, device=DEV, kind="subnet")
    assert res.best[0]["id"] in set(store["key"])


def test_only_subnets_that_fit_on_the_device_are_evaluated(run):
    """The device goes first: candidates that break the budget when measured are replaced and never
    evaluated (an evaluation would decide nothing); those that fit are evaluated, and the best of
    them by measured top-1 is returned."""
    measured, slow = [], (1.5, 10.0, 10.0)  # the first three measured run slower than predicted, the rest faster

    def device(dev, archs):
        out = []
        for a in archs:
            measured.append(a.id)
            out.append(run.lat.predict([a])[0] * (slow[len(measured) - 1] if len(measured) <= len(slow) else 0.9))
        return np.array(out)

    res = run_search(run.run_dir, DEV, run.budget, top_k=1, seed=0, measure=device, accuracy_checks=2,
                     max_measure=6, **SMALL)
    rejected = [r["id"] for r in res.verification if not r["accepted"]]
    fits = [r["id"] for r in res.verification if r["accepted"]]
    assert rejected == measured[:len(slow)] and len(fits) == 2 and res.ok
    assert sorted(run.measured_top1) == sorted(fits)  # evaluated: those that fit, and only those
    assert res.best[0]["id"] in fits and res.best[0]["measured_top1"] is not None
    csv = pd.read_csv(run.run_dir / "pareto.csv").set_index("id")
    assert csv.loc[rejected, "verified"].all() and csv.loc[rejected, "measured_top1"].isna().all()
    assert csv.loc[fits, "measured_top1"].notna().all()


def test_accuracy_is_measured_on_the_test_split_and_decides_the_order(run, monkeypatch):
    """Measured top-1 (test split) of the best candidates goes into pareto.csv beside the
    prediction, and the returned subnets are ordered by it, not by the prediction."""
    import hwnas.search.api as search_api

    checked = []

    def reversed_truth(run_, archs, **kw):  # the predicted worst is truly the best
        checked.append([a.id for a in archs])
        return np.linspace(90.0, 99.0, len(archs))

    monkeypatch.setattr(search_api, "measured_accuracy", reversed_truth)
    res = run_search(run.run_dir, DEV, run.budget, top_k=2, seed=0, measure=_fake_device(run),
                     accuracy_checks=5, **SMALL)
    assert len(checked[0]) == 5
    assert res.best[0]["id"] == checked[0][-1] and res.best[0]["measured_top1"] == pytest.approx(99.0)
    tops = [b["measured_top1"] for b in res.best]
    assert tops == sorted(tops, reverse=True)
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert {"measured_top1", "top1_pred", "top1_std"} <= set(csv.columns)
    assert csv.loc[csv["verified"], "measured_top1"].notna().all()  # every candidate measured fit here
    doc = json.loads((run.run_dir / "search.json").read_text())
    acc = doc["acceptance"]["accuracy"]
    assert acc["split"] == "test" and acc["evaluated"] >= 5 and acc["returned"]["n"] == 2
    assert doc["acceptance"]["latency"]["rule"].startswith("measured_ms * (1 + 0.02")
    assert doc["accuracy_predictor"]["clip"] and "clipped" in doc["accuracy_predictor"]["note"]


def test_a_latency_just_under_the_budget_is_not_accepted_without_margin_for_noise(run):
    def just_under(device, archs):  # 0.5% under the budget, 1% round-to-round noise
        return np.full(len(archs), run.budget * 0.995), np.full(len(archs), 0.01)

    res = run_search(run.run_dir, DEV, run.budget, top_k=1, measure=just_under, **SMALL)
    assert not res.ok and all(not r["accepted"] and r["ucb_ms"] > run.budget for r in res.verification)
    ok = run_search(run.run_dir, DEV, run.budget, top_k=1, measure=just_under, latency_margin=0.0, **SMALL)
    assert not ok.ok  # 2 x 1% standard error still does not fit
    quiet = run_search(run.run_dir, DEV, run.budget, top_k=1, latency_margin=0.0,
                       measure=lambda d, archs: np.full(len(archs), run.budget * 0.995), **SMALL)
    assert quiet.ok
    with pytest.raises(InputError, match="margin"):
        run_search(run.run_dir, DEV, run.budget, latency_margin=0.9, **SMALL)
