"""Search-time latency costs: every predictor kind `fit_best` can pick evaluates on a fast path
(an exact table, or the model batched on tabulated analytic features) with the same predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.latency import AnalyticPredictor, HybridPredictor, LookupTablePredictor, MLPPredictor
from hwnas.latency.analytic import all_features
from hwnas.latency.api import read_latency_table
from hwnas.latency.base import single_thread
from hwnas.latency.transfer import TransferPredictor
from hwnas.search.operators import sample_mixed
from hwnas.search.problem import Problem
from hwnas.search.tabulate import feature_table, tabulate_vector
from hwnas.space import SearchSpace

CSV = Path(__file__).resolve().parents[1] / "latency" / "data" / "ofa_cpu_subnets.csv"
KW = dict(net=NetworkSpec("ofa-mbv3", 1.0, 10))


@pytest.fixture(scope="module")
def table():
    m, y, _ = read_latency_table(CSV, "ort_ms", "ofa-mbv3")
    m, y = m[:120], y[:120]  # enough for every kind, quick to fit
    space = SearchSpace(r_choices=tuple(sorted({int(r) for r in m[:, 0]})))
    return m, y, space


def _kinds():
    return {
        "analytic-linear": (lambda: AnalyticPredictor("stage", "linear", 1e-4, **KW), "table"),
        "analytic-log": (lambda: AnalyticPredictor("roofline", "log", 1e-3, **KW), "vectorised"),
        "analytic-macs": (lambda: AnalyticPredictor("macs", "linear", 0.0, **KW), "table"),
        "lut": (lambda: LookupTablePredictor("nnls", 1.0, **KW), "table"),
        "hybrid-ridge": (lambda: HybridPredictor("auto", "ridge", **KW), "vectorised"),
        "hybrid-lut": (lambda: HybridPredictor({"kind": "lut", "params": {"mode": "nnls", "alpha": 1.0}},
                                               "ridge", **KW), "vectorised"),
        "hybrid-mlp": (lambda: HybridPredictor("auto", "mlp", **KW), "vectorised"),
        "mlp": (lambda: MLPPredictor(hidden=16, epochs=60, seeds=2, **KW), "vectorised"),
        "transfer": (None, "vectorised"),
    }


class _Acc:
    def predict(self, m):
        m = np.asarray(m)
        return m[:, 21:41].sum(axis=1) * 0.1


@pytest.mark.parametrize("kind", list(_kinds()))
def test_fast_cost_path_equals_predict(kind, table):
    m, y, space = table
    make, path = _kinds()[kind]
    if make is None:  # few-shot transfer from a "source device" predictor
        src = AnalyticPredictor("compact", "linear", 1e-4, **KW).fit(m, y * 1.7)
        pred = TransferPredictor(src, "compact", **KW).fit(m[:40], y[:40])
    else:
        pred = make().fit(m, y)
    problem = Problem(space, _Acc(), {"dev": pred}, {"dev": 1e6}, n_classes=10)
    assert problem.cost_paths() == {"ms:dev": path}
    assert problem.cost_models.tabulated() == {"ms:dev": path == "table"}
    rng = np.random.default_rng(3)
    rows = np.concatenate([
        sample_mixed(space, 400, rng),
        SearchSpace(r_choices=(space.r_choices[-1] + 8,)).sample_matrix(10, 0),  # r outside: fallback
        SearchSpace(r_choices=space.r_choices[:1], d_choices=(1, 2)).sample_matrix(10, 0),  # depth 1
    ])
    want = pred.predict(rows)
    got = problem.costs(rows)[0]["ms:dev"]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    with single_thread():  # as inside a search (same batch: float32 MLPs round by batch shape)
        np.testing.assert_allclose(problem.costs(rows[:7])[0]["ms:dev"], pred.predict(rows[:7]),
                                   rtol=1e-9, atol=0)


def test_feature_table_is_bit_exact_and_refuses_inexact_models(table):
    _, _, space = table
    t = feature_table(space, 1.0, 10)
    assert t is not None
    rows = sample_mixed(space, 1000, np.random.default_rng(1))
    assert np.array_equal(t.predict(rows), all_features(rows.astype(np.int64), NetworkSpec("ofa-mbv3", 1.0, 10)))
    assert tabulate_vector(lambda r: np.sqrt(all_features(r.astype(np.int64), NetworkSpec("ofa-mbv3", 1.0, 10))), space) is None


def test_unknown_predictors_are_called_directly(table):
    _, _, space = table

    class Plain:
        def predict(self, m):
            return 1.0 + np.sqrt(np.asarray(m)[:, 21:41].sum(axis=1))

    problem = Problem(space, _Acc(), {"dev": Plain()}, {"dev": 1e6}, n_classes=10)
    assert problem.cost_paths() == {"ms:dev": "direct"}


def test_single_thread_is_reentrant():
    from hwnas.latency import base

    with single_thread():
        with single_thread():
            assert base._SINGLE_DEPTH == 2
        assert base._SINGLE_DEPTH == 1
    assert base._SINGLE_DEPTH == 0


def _family_space(family):
    return family.space_from_dict({"r": "32:48:4"})


def _family_kinds(family: str, width: float):
    kw = dict(net=NetworkSpec(family, width, 10))
    return {
        "analytic-linear": (lambda: AnalyticPredictor("stage", "linear", 1e-4, **kw), "table"),
        "analytic-log": (lambda: AnalyticPredictor("roofline", "log", 1e-3, **kw), "vectorised"),
        "lut": (lambda: LookupTablePredictor("nnls", 1.0, **kw), "table"),
        "hybrid-ridge": (lambda: HybridPredictor("auto", "ridge", **kw), "vectorised"),
        "mlp": (lambda: MLPPredictor(hidden=16, epochs=60, seeds=2, **kw), "vectorised"),
    }


@pytest.mark.parametrize("kind", ["analytic-linear", "analytic-log", "lut", "hybrid-ridge", "mlp"])
def test_every_family_takes_the_fast_cost_path(family, kind):
    """Every family's latency models on their fast paths (their analytic features, lookup tables
    and linear models tabulated over the slot layout), with the same predictions."""
    space = _family_space(family)
    rng = np.random.default_rng(0)
    m = sample_mixed(space, 160, rng)
    macs = space.family.count_params_macs(np.asarray(m, np.int64), space.width_mult, 10)[1].astype(float)
    y = 0.2 + macs / macs.mean() * (1 + 0.1 * rng.random(len(m)))
    make, path = _family_kinds(family.name, space.width_mult)[kind]
    pred = make().fit(m, y)

    class Acc:
        def predict(self, rows):
            return np.asarray(rows)[:, 1:].sum(axis=1) * 0.1

    problem = Problem(space, Acc(), {"dev": pred}, {"dev": 1e6}, n_classes=10)
    assert problem.cost_paths() == {"ms:dev": path}
    assert problem.fast_paths()["fused_gather"]
    rows = np.concatenate([sample_mixed(space, 400, rng),
                           space.family.space_from_dict({"r": [60]}).sample_matrix(10, 0)])  # r outside
    want = pred.predict(rows)
    np.testing.assert_allclose(problem.costs(rows)[0]["ms:dev"], want, rtol=1e-9, atol=0)
    with single_thread():
        np.testing.assert_allclose(problem.costs(rows[:7])[0]["ms:dev"], pred.predict(rows[:7]), rtol=1e-9, atol=0)


@pytest.mark.parametrize("features", ["full", "compact"])
def test_accuracy_features_are_gathered_bit_for_bit(family, features):
    from hwnas.accuracy.features import arch_features, features_from_pre, params_macs
    from hwnas.search.fused import FusedTable
    from hwnas.search.indexed import gene_index
    from hwnas.search.tabulate import accuracy_feature_table

    space = _family_space(family)
    table = accuracy_feature_table(space, features, 10)
    assert table is not None
    rows = sample_mixed(space, 1500, np.random.default_rng(2))
    idx = gene_index(space).index_values(rows)
    got = features_from_pre(space, FusedTable(table.slots, [table]).gather(idx), features)
    assert np.array_equal(got, arch_features(space, rows, features, 10))
    params, macs = params_macs(space, rows, 10)
    np.testing.assert_array_equal(got[:, -2:], np.log(np.stack([macs, params], axis=1)))
