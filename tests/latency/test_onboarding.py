"""Issue 31: onboarding a device from few rows: runtime priors, the one-SE choice, the baselines."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.errors import InputError
from hwnas.latency import AnalyticPredictor, TransferPredictor, default_candidates, fit_best, load_predictor
from hwnas.latency.metrics import rmse_log
from hwnas.families import DEFAULT_FAMILY, get_family
from hwnas.latency.priors import prior_document, runtime_priors
from hwnas.latency.select import choose


def test_choose_prefers_a_transfer_within_one_standard_error_of_the_winner():
    best = np.linspace(0.5, 1.5, 40)
    near = best + np.tile([0.1, -0.08], 20)  # worse by 0.01 on average, +-0.09 row by row: a tie
    far = best + 1.0  # clearly worse on every row
    rows = [{"index": 0, "kind": "transfer", "within_10": 0.8, "rmse_log": 0.2},
            {"index": 1, "kind": "analytic", "within_10": 0.9, "rmse_log": 0.1},
            {"index": 2, "kind": "analytic", "within_10": 0.5, "rmse_log": 0.3}]
    assert choose(rows, np.stack([near, best, far])) == 0  # the prior-bound one is kept
    assert choose(rows, np.stack([near, best, far]), "within-10") == 1
    assert choose(rows, np.stack([far, best, near])) == 1  # the data overrides a clearly worse prior
    rows[0]["prior_slope"] = 0.3  # a runtime prior the device does not follow
    assert choose(rows, np.stack([near, best, far])) == 1
    with pytest.raises(InputError, match="criterion"):
        choose(rows, np.stack([near, best, far]), "best-guess")


def test_a_transfer_missing_many_more_rows_is_not_kept_for_its_squared_error():
    """A noisy profile: the fit is within +-10% on all but 5 outliers, the prior misses 26 of 60
    rows by a little; its mean squared log error is the lower, its hit rate clearly worse."""
    best = np.full(60, 0.004)
    best[:5] = 0.3  # outliers (noise) inflate the fit's squared error and its standard error
    prior = np.full(60, 0.003)
    prior[10:36] = 0.015  # 26 rows just outside +-10% (log(1.1)**2 = 0.0091)
    rows = [{"index": 0, "kind": "transfer", "within_10": 34 / 60, "rmse_log": float(np.sqrt(prior.mean()))},
            {"index": 1, "kind": "analytic", "within_10": 55 / 60, "rmse_log": float(np.sqrt(best.mean()))}]
    assert prior.mean() < best.mean()
    assert choose(rows, np.stack([prior, best])) == 1
    close = best.copy()
    close[0], close[5:7] = 0.004, 0.015  # one outlier fewer, two near misses more: a tie, kept
    assert choose(rows, np.stack([close, best])) == 0


def test_shipped_prior_is_retargeted_and_joins_the_candidates():
    (prior,) = runtime_priors(NetworkSpec("ofa-mbv3", 1.2, 1000))
    assert prior.meta.n_classes == 1000 and prior.meta.width_mult == 1.2 and prior.meta.notes.prior == "cpu-ort"
    assert runtime_priors(NetworkSpec("ofa-resnet50", 1.0, 1000)) == []
    names = [c.describe() for c in default_candidates(20, net=NetworkSpec("ofa-mbv3", 1.2, 1000), priors=[prior])]
    assert names[:2] == ["transfer(prior cpu-ort, features=none)", "transfer(prior cpu-ort, features=compact)"]
    assert not any("prior" in c.describe() for c in default_candidates(20, net=NetworkSpec("ofa-mbv3", 1.2, 1000), kinds=["analytic"], priors=[prior]))


def test_prior_document_round_trips_the_shipped_one(ort):
    m, y = ort.train
    fitted = AnalyticPredictor("compact", "log", 1e-3, net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes)).fit(m[:50], y[:50])
    doc = prior_document(fitted, "mine")
    assert doc["meta"]["notes"]["prior"] == "mine" and doc["kind"] == "analytic"
    assert set(doc) == set(get_family(DEFAULT_FAMILY).latency_priors()["cpu-ort"])


def test_few_rows_with_a_prior_beat_todays_choice_and_save(ort, tmp_path):
    """Cross-fitted: the prior sees the first 150 rows, the fits 15 of the others, scored on the
    100 held-out rows (the shipped prior saw every row, so it is not used here)."""
    m, y = ort.m, ort.y
    prior = AnalyticPredictor("compact", "log", 1e-3, net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes)).fit(m[:150], y[:150])
    prior.meta.notes.prior = "cpu-first-150"
    new_err, old_err = [], []
    for s in range(3):
        tr = 150 + np.random.default_rng(s).permutation(50)[:15]
        te = np.arange(200, 300)
        new, report = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes), priors=[prior], seed=s)
        old, _ = fit_best(m[tr], y[tr], net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes), priors=(), criterion="within-10", seed=s)
        new_err.append(rmse_log(new.predict(m[te]), y[te]))
        old_err.append(rmse_log(old.predict(m[te]), y[te]))
    assert np.median(new_err) < np.median(old_err)
    assert isinstance(new, TransferPredictor) and "prior cpu-first-150" in report["chosen"]
    new.save(tmp_path / "p.json")  # the prior travels inside the file
    assert np.allclose(load_predictor(tmp_path / "p.json").predict(m[:5]), new.predict(m[:5]))


def test_eval_reports_both_baselines(ort):
    from hwnas.latency.api import evaluate_predictor
    import pandas as pd
    from hwnas.space import FLAT_COLUMNS

    df = pd.DataFrame(ort.m[:120], columns=FLAT_COLUMNS).assign(ms=ort.y[:120])
    report = evaluate_predictor(df, "ms", sizes=[10], net=NetworkSpec("ofa-mbv3", 1.0, ort.n_classes))
    (row,) = report["learning_curve"]
    assert set(row["flops_baseline"]) >= {"within_5", "within_10", "kendall_tau"}
    assert set(row["today_baseline"]) >= {"within_5", "within_10", "kendall_tau"}
