"""The evolution's choice-index loop (`hwnas.search.indexed.GeneIndex`): the same children, slot
indices and searches as the value-row operators, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.accuracy.predictors import RidgePredictor
from hwnas.latency import HybridPredictor
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.indexed import GeneIndex
from hwnas.search.operators import KS, breed, sample_mixed
from hwnas.search.problem import Problem
from hwnas.search.tabulate import SlotIndexer
from hwnas.space import SearchSpace

KW = dict(width_mult=1.0, n_classes=10)


@pytest.fixture(scope="module")
def gene_index(small_space):
    return GeneIndex(small_space, SlotIndexer(small_space))


def test_index_rows_round_trip_canonical_values(small_space, gene_index):
    m = sample_mixed(small_space, 500, np.random.default_rng(0))
    g = gene_index.to_index(m)
    assert g.dtype == np.int8
    np.testing.assert_array_equal(gene_index.values(g), m)
    np.testing.assert_array_equal(gene_index.values(gene_index.canonical(g)), m)


@pytest.mark.parametrize("k_mut,k_cross", [(70, 70), (53, 0), (0, 41), (1, 1)])
def test_index_breeding_gives_the_value_operators_children(small_space, gene_index, k_mut, k_cross):
    parents = sample_mixed(small_space, 25, np.random.default_rng(1))
    g = gene_index.to_index(parents)
    for seed in range(5):
        want = breed(small_space, parents, k_mut, k_cross, np.random.default_rng(seed), 0.1)
        rng = np.random.default_rng(seed)
        kids, combos = gene_index.breed(g, gene_index.combos(g), k_mut, k_cross, rng, 0.1)
        np.testing.assert_array_equal(gene_index.values(kids), want)
        np.testing.assert_array_equal(combos, gene_index.combos(kids))
        np.testing.assert_array_equal(kids, gene_index.to_index(want))
        after = np.random.default_rng(seed)
        after.random((k_mut + k_cross, 2 * want.shape[1] + 2))
        assert rng.random() == after.random()  # the same draws, no more


def test_slot_index_equals_the_indexer(small_space, gene_index):
    m = sample_mixed(small_space, 400, np.random.default_rng(2))
    want = SlotIndexer(small_space)(m)
    got = gene_index.slot_index(gene_index.to_index(m))
    np.testing.assert_array_equal(got.ri, want.ri)
    np.testing.assert_array_equal(got.flat, want.flat)


def test_supports_only_the_mbv3_layout(small_space):
    from hwnas.families import get_family

    assert GeneIndex.supports(small_space)
    assert GeneIndex.supports(SearchSpace.from_dict({"r": "32:64:4", "ks": [3, 5, 7, 9], "e": [2, 3, 4, 6]}))
    for name in ("ofa-proxyless", "ofa-resnet50"):
        assert not GeneIndex.supports(get_family(name).default_space())


def _problems(space, budget_quantile: float, features: str):
    rng = np.random.default_rng(0)
    m = sample_mixed(space, 160, rng)
    from hwnas.latency.analytic import all_features

    base = all_features(m.astype(np.int64), 1.0, 10)[:, 0]
    ms = 0.2 + base / base.mean() * (1 + 0.1 * (m[:, KS] == 7).mean(1)) + rng.normal(0, 0.01, len(m))
    top1 = 60 + 3 * np.log(ms) + rng.normal(0, 0.3, len(m))
    lat = HybridPredictor("auto", "ridge", **KW).fit(m, ms)
    acc = RidgePredictor(space, 10, features=features).fit(m, top1)
    budget = float(np.quantile(ms, budget_quantile))
    return [Problem(space, acc, {"a": lat}, {"a": budget}, n_classes=10, accuracy_risk=1.0,
                    index_breeding=flag) for flag in (True, False)]


@pytest.mark.parametrize("quantile,features,redraws", [(0.5, "full", 20), (0.05, "full", 20),
                                                       (0.5, "compact", 20), (0.05, "full", 1)])
def test_index_loop_finds_what_the_value_loop_finds(small_space, quantile, features, redraws):
    """Every path: redraw rounds (a tight budget), parent copies (one round), both accuracy paths."""
    fast, slow = _problems(small_space, quantile, features)
    s = EvolutionSettings(population=40, generations=30, max_redraws=redraws)
    a = evolution_search(fast, s, seed=3)
    b = evolution_search(slow, s, seed=3)
    assert (fast._fast_path().ridge is not None) == (features == "full")  # pair tables, else features
    np.testing.assert_array_equal(a.archive.m, b.archive.m)
    assert a.archive.m.dtype == b.archive.m.dtype
    assert set(a.archive.cols) == set(b.archive.cols)
    for k in a.archive.cols:
        np.testing.assert_array_equal(a.archive.cols[k], b.archive.cols[k])
    np.testing.assert_array_equal(a.archive.violation, b.archive.violation)
    assert a.history == b.history and a.info == b.info
    assert fast.counters() == slow.counters()
    assert (a.info["parent_copies"] > 0) == (redraws == 1)
