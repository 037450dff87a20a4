"""The evolution's choice-index loop (`hwnas.search.indexed.GeneIndex`): the same children, slot
indices and searches as the value-row operators, bit for bit, for every registered family."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.accuracy.predictors import RidgePredictor
from hwnas.latency import HybridPredictor
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.indexed import gene_index
from hwnas.search.operators import breed, sample_mixed
from hwnas.search.problem import Problem
from hwnas.search.slots import space_slots
from hwnas.space import SearchSpace


@pytest.fixture
def space(family):
    return family.space_from_dict({"r": "32:48:4"})


def test_index_rows_round_trip_canonical_values(space):
    gi = gene_index(space)
    m = sample_mixed(space, 500, np.random.default_rng(0))
    g = gi.to_index(m)
    assert g.dtype == np.int8
    np.testing.assert_array_equal(gi.values(g), m)
    np.testing.assert_array_equal(gi.values(gi.canonical(g)), m)


@pytest.mark.parametrize("k_mut,k_cross", [(70, 70), (53, 0), (0, 41), (1, 1)])
def test_index_breeding_gives_the_value_operators_children(space, k_mut, k_cross):
    gi = gene_index(space)
    parents = sample_mixed(space, 25, np.random.default_rng(1))
    g = gi.to_index(parents)
    for seed in range(5):
        want = breed(space, parents, k_mut, k_cross, np.random.default_rng(seed), 0.1)
        rng = np.random.default_rng(seed)
        kids, combos = gi.breed(g, gi.combos(g), k_mut, k_cross, rng, 0.1)
        np.testing.assert_array_equal(gi.values(kids), want)
        np.testing.assert_array_equal(combos, gi.combos(kids))
        np.testing.assert_array_equal(kids, gi.to_index(want))
        after = np.random.default_rng(seed)
        after.random((k_mut + k_cross, 2 * want.shape[1] + 2))
        assert rng.random() == after.random()  # the same draws, no more


def test_slot_index_of_index_rows_equals_that_of_value_rows(space):
    gi = gene_index(space)
    m = sample_mixed(space, 400, np.random.default_rng(2))
    want = gi.index_values(m)
    got = gi.slot_index(gi.to_index(m))
    np.testing.assert_array_equal(got.ctx, want.ctx)
    np.testing.assert_array_equal(got.flat, want.flat)
    trusted = gi.index_values(m, trusted=True)
    np.testing.assert_array_equal(trusted.flat, want.flat)
    # the zero row exactly where a slot does not run
    np.testing.assert_array_equal(got.flat == space_slots(space).n_rows, ~space_slots(space).used(m))


def test_every_family_with_a_slot_layout_breeds_on_index_rows(family):
    assert gene_index(SearchSpace.from_dict({"r": "32:64:4", "ks": [3, 5, 7, 9], "e": [2, 3, 4, 6]})) is not None
    assert (gene_index(family.default_space()) is not None) == (family.slot_layout() is not None)


def test_rows_outside_the_space_have_no_slot_index(space):
    gi = gene_index(space)
    m = sample_mixed(space, 20, np.random.default_rng(3))
    m[5, 0] = 1000  # a resolution outside the space
    assert gi.index_values(m) is None
    assert gi.index_values(m[6:]) is not None


def _problems(space, budget_quantile: float, features: str):
    rng = np.random.default_rng(0)
    m = sample_mixed(space, 160, rng)
    fam = space.family
    kw = dict(net=NetworkSpec(fam.name, space.width_mult, 10))
    macs = fam.count_params_macs(np.asarray(m, np.int64), space.width_mult, 10)[1].astype(float)
    ms = 0.2 + macs / macs.mean() * (1 + 0.1 * (m[:, 1] == m[:, 1].max())) + rng.normal(0, 0.01, len(m))
    top1 = 60 + 3 * np.log(ms) + rng.normal(0, 0.3, len(m))
    lat = HybridPredictor("auto", "ridge", **kw).fit(m, ms)
    acc = RidgePredictor(space, 10, features=features).fit(m, top1)
    budget = float(np.quantile(ms, budget_quantile))
    return [Problem(space, acc, {"a": lat}, {"a": budget}, n_classes=10, accuracy_risk=1.0,
                    index_breeding=flag) for flag in (True, False)]


@pytest.mark.parametrize("quantile,features,redraws", [(0.5, "full", 20), (0.05, "full", 20),
                                                       (0.5, "compact", 20), (0.05, "full", 1)])
def test_index_loop_finds_what_the_value_loop_finds(space, quantile, features, redraws):
    """Every path: redraw rounds (a tight budget), parent copies (one round), both accuracy paths."""
    fast, slow = _problems(space, quantile, features)
    s = EvolutionSettings(population=40, generations=30, max_redraws=redraws)
    a = evolution_search(fast, s, seed=3)
    b = evolution_search(slow, s, seed=3)
    assert fast.gene_index() is not None and slow.gene_index() is None
    assert fast.fast_paths()["accuracy_features"] == "gathered"
    np.testing.assert_array_equal(a.archive.m, b.archive.m)
    assert a.archive.m.dtype == b.archive.m.dtype
    assert set(a.archive.cols) == set(b.archive.cols)
    for k in a.archive.cols:
        np.testing.assert_array_equal(a.archive.cols[k], b.archive.cols[k])
    np.testing.assert_array_equal(a.archive.violation, b.archive.violation)
    assert a.history == b.history and a.info == b.info
    assert fast.counters() == slow.counters()
    assert (a.info["parent_copies"] > 0) == (redraws == 1)
