"""The search's latency bound: split-conformal on the predictor's out-of-fold residuals."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.latency.record import FitReport
from hwnas.search.risk import latency_bound


def predictor(residuals) -> SimpleNamespace:
    return SimpleNamespace(meta=SimpleNamespace(cv=FitReport(oof_log_ratios=list(residuals))))


def test_the_bound_is_the_conformal_quantile_of_the_residuals():
    r = np.log(np.linspace(0.85, 1.25, 99))  # measured / predicted
    out = latency_bound(predictor(r), 0.9)
    assert out["n"] == 99 and out["factor"] == pytest.approx(np.sort(np.exp(r))[int(np.ceil(100 * 0.9)) - 1], rel=1e-5)
    # at that factor, 90 % of these subnets measure within their bound
    assert np.mean(np.exp(r) <= out["factor"]) >= 0.9


def test_the_bound_never_loosens_a_budget_and_says_when_it_cannot_be_had():
    assert latency_bound(predictor(np.log([0.8, 0.9, 0.95] * 10)), 0.9)["factor"] == 1.0
    assert latency_bound(predictor([]), 0.9)["factor"] == 1.0
    assert "too few" in latency_bound(predictor(np.log([1.1, 1.2])), 0.9)["note"]
    assert latency_bound(predictor(np.log([1.3] * 50)), 0.0)["factor"] == 1.0  # 0: the point prediction


def test_a_fitted_predictor_records_its_out_of_fold_residuals():
    from hwnas.latency.select import fit_best
    from hwnas.space import SearchSpace

    space = SearchSpace()
    archs = space.sample(30, np.random.default_rng(0))
    from hwnas.supernet.stats import count_params_macs

    ms = np.array([count_params_macs(a, 10)[1] / 1e7 for a in archs]) * np.random.default_rng(1).lognormal(0, 0.05, 30)
    pred, report = fit_best(archs, ms, kinds=["analytic"], net=NetworkSpec("ofa-mbv3", 1.0, 10), priors=())
    r = report["oof_log_ratios"]
    assert len(r) == 30 and r == sorted(r) and pred.meta.cv.oof_log_ratios == r


def test_a_bound_that_leaves_no_subnet_falls_back_to_the_point_predictions(tiny_supernet, tmp_path):
    """A predictor whose residuals say it runs 10x slow: the bound asks for less than the fastest
    subnet; the search then runs on point predictions and search.json says so."""
    import json

    from search_stubs import fit_stub_predictors

    from hwnas.latency import load_predictor
    from hwnas.run import open_run
    from hwnas.search.api import run_search
    from hwnas.search.problem import latency_predictor_path

    run = open_run(tmp_path / "run", tiny_supernet)
    lat, budget = fit_stub_predictors(run, "cpu-ort")
    path = latency_predictor_path(run.run_dir, "cpu-ort")
    doc = json.loads(path.read_text())
    doc["meta"]["cv"] = {"oof_log_ratios": [float(np.log(10.0))] * 40}
    path.write_text(json.dumps(doc))
    assert load_predictor(path).meta.cv.oof_log_ratios
    fastest = float(np.min(lat.predict(run.space.to_matrix(run.space.sample(2000, np.random.default_rng(0))))))
    res = run_search(run.run_dir, "cpu-ort", fastest * 1.05, pareto=True, verify=False, plot=False,
                     population=20, generations=4)
    risk = json.loads((run.run_dir / "search.json").read_text())["latency_risk"]
    assert res.front["on_front"].any() and risk["confidence"] == 0.0 and "point predictions" in risk["note"]
