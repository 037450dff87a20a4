"""Ties on measured top-1 ship the fastest, predicted ties are measured fastest first; a latency
predictor poor on held-out subnets is flagged."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hwnas.latency.record import PredictorNotes
from hwnas.search.ties import order_predicted_ties, order_ties, top1_se


def test_a_tie_with_the_best_ships_the_faster_subnet():
    """The issue's case: 93.41 % at 1.849 ms against 93.35 % at 1.736 ms on 10,000 test images."""
    top1, ms = {0: 93.41, 1: 93.35, 2: 92.40}, {0: 1.849, 1: 1.736, 2: 1.2}
    n, ids = {0: 10000, 1: 10000, 2: 10000}, {0: "aaa", 1: "bbb", 2: "ccc"}
    order, tie = order_ties([0, 1, 2], top1, ms, n, ids)
    assert order == [1, 0, 2] and tie["shipped"] == "bbb" and tie["best_top1"] == "aaa"
    assert [t["id"] for t in tie["tied"]] == ["aaa", "bbb"]  # 92.40 is 1 point lower: not tied
    assert "tied on test top-1" in tie["message"] and "0.06" in tie["message"]
    assert top1_se(93.41, 10000) == pytest.approx(0.248, abs=1e-3)


def test_no_tie_when_the_best_is_also_the_fastest_or_the_gap_is_real():
    n, ids = {0: 10000, 1: 10000}, {0: "a", 1: "b"}
    assert order_ties([0, 1], {0: 93.4, 1: 93.3}, {0: 1.0, 1: 1.1}, n, ids) == ([0, 1], None)
    assert order_ties([0, 1], {0: 94.4, 1: 93.3}, {0: 1.2, 1: 1.1}, n, ids) == ([0, 1], None)
    assert order_ties([0, 1], {0: 93.4, 1: 93.3}, {0: 1.2, 1: 1.1}, {}, ids) == ([0, 1], None)  # n unknown


def test_predicted_ties_are_measured_fastest_first():
    """Within the accuracy predictor's out-of-fold MAE of the best, lowest latency / budget first;
    the rest keep their best-predicted-first order."""
    objective = np.array([93.72, 93.70, 93.60, 93.40, 93.30])
    load = {0: 0.99, 1: 0.90, 2: 0.80, 3: 0.60, 4: 0.50}
    assert order_predicted_ties([0, 1, 2, 3, 4], objective, load, 0.18) == ([2, 1, 0, 3, 4], 3)
    assert order_predicted_ties([0, 1, 2, 3, 4], objective, load, 0.0) == ([0, 1, 2, 3, 4], 0)
    assert order_predicted_ties([], objective, load, 0.18) == ([], 0)


class _Pred:
    def __init__(self, fitted, scale=1.0, noise=None):
        self.meta = SimpleNamespace(notes=PredictorNotes(fitted_on=fitted))
        self.scale, self.noise = scale, noise

    def predict(self, m):
        out = m[:, 0].astype(float) * self.scale
        return out if self.noise is None else out * self.noise[: len(out)]


def test_a_poor_predictor_on_held_out_subnets_is_flagged(tmp_path, monkeypatch):
    from hwnas.latency import trust
    from hwnas.space import SearchSpace

    space = SearchSpace.from_dict({"r": "32:48:4"})
    m = space.sample_matrix(12, 0)
    df = pd.DataFrame(m, columns=list(space.flat_columns))
    df["key"] = [a.id for a in space.from_matrix(m)]
    df["corrected_ms"] = m[:, 0].astype(float)
    monkeypatch.setattr("hwnas.profiling.store.read_measurements", lambda *a, **k: df)
    monkeypatch.setattr("hwnas.run.open_run", lambda *a, **k: SimpleNamespace(family=space.family))
    fitted = list(df["key"][:4])
    good = trust.held_out_quality(tmp_path, "dev", _Pred(fitted))
    assert good["n"] == 8 and good["within_10"] == 1.0 and not good["poor"]
    noise = np.random.default_rng(0).permutation(np.linspace(0.5, 1.6, 8))
    bad = trust.held_out_quality(tmp_path, "dev", _Pred(fitted, noise=noise))
    assert bad["poor"] and bad["within_10"] < 0.5
    assert "--samples auto" in trust.trust_warning("dev", bad) and "hwnas latency fit" in trust.trust_warning("dev", bad)
    assert trust.held_out_quality(tmp_path, "dev", _Pred(list(df["key"]))) is None  # nothing held out
    assert trust.held_out_quality(tmp_path, "dev", SimpleNamespace(meta=SimpleNamespace(notes=PredictorNotes()))) is None


def test_too_few_fitting_refits_the_latency_predictors_and_searches_again(monkeypatch, tmp_path):
    import hwnas.search.api as api
    from hwnas.search.settings import SearchSettings

    returned = iter([1, 3])
    calls, refits = [], []

    def fake_search(run, s, progress, hooks, fallback=None, refits=None):
        calls.append(list(refits or []))
        n = next(returned)
        return SimpleNamespace(best=[{}] * n, devices=["dev"], metrics={"measured": 6, "first_try_within_budget": 0.2})

    monkeypatch.setattr(api, "_search", fake_search)
    monkeypatch.setattr(api, "_refit_latency", lambda run, devices, progress: refits.append(devices))
    monkeypatch.setattr("hwnas.accuracy.api.check_accuracy_table", lambda *a: None)
    monkeypatch.setattr("hwnas.run.open_run", lambda *a, **k: SimpleNamespace())
    res = api.run_search(tmp_path, SearchSettings("dev", 1.0, top_k=3))
    assert len(res.best) == 3 and refits == [["dev"]]
    assert calls == [[], [{"returned": 1, "measured": 6, "first_try_within_budget": 0.2}]]
    returned = iter([1])
    calls.clear()
    api.run_search(tmp_path, SearchSettings("dev", 1.0, top_k=3, refit_rounds=0))
    assert len(calls) == 1  # never refitted


def test_only_pairs_measured_apart_judge_the_order():
    """The quickstart's case: nine picks within 8% of each other at one budget, one subnet at 0.31 ms.
    Over all pairs tau was 0.16 (the picks' order is noise); over the 9 pairs measured apart, 1.0."""
    from hwnas.latency.trust import order_text, separated_tau

    true = np.array([0.776, 0.765, 0.749, 0.756, 0.754, 0.774, 0.780, 0.782, 0.726, 0.316])
    pred = np.array([0.817, 0.809, 0.808, 0.801, 0.798, 0.796, 0.791, 0.790, 0.787, 0.301])
    assert separated_tau(pred, true) == (1.0, 9)
    assert separated_tau(pred[:9], true[:9]) == (None, 0)
    assert separated_tau(-pred, true) == (-1.0, 9)
    q = {"kendall_tau": 0.16, "tau_apart": 1.0, "pairs_apart": 9}
    assert order_text(q) == "Kendall tau 1.00 over the 9 pairs measured >10% apart (0.16 over all)"
