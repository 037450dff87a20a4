"""The search's latency bound: split-conformal on the predictor's out-of-fold residuals."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hwnas.search.risk import latency_bound


def predictor(residuals) -> SimpleNamespace:
    return SimpleNamespace(meta=SimpleNamespace(cv={"oof_log_ratios": list(residuals)}))


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
    pred, report = fit_best(archs, ms, kinds=["analytic"], n_classes=10, priors=())
    r = report["oof_log_ratios"]
    assert len(r) == 30 and r == sorted(r) and pred.meta.cv["oof_log_ratios"] == r
