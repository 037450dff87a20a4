"""Exact tables of additive models over every family's slot layout (the `family` fixture: the registry's
and the test-only one)."""

from __future__ import annotations

import numpy as np

from hwnas.families import NetworkSpec
from hwnas.families import DEFAULT_FAMILY, get_family
from hwnas.search.operators import sample_mixed
from hwnas.search.problem import Problem
from hwnas.search.tabulate import argmin_row, tabulate


def _space(family, r="32:64:4"):
    return family.space_from_dict({"r": r})


def _macs_of(space):
    def macs(m):
        m = np.asarray(m, dtype=np.int64)
        return space.family.count_params_macs(m, space.width_mult, 10)[1].astype(np.float64)
    return macs


def test_macs_table_is_exact_and_its_minimum_is_the_smallest_subnet(family):
    space = _space(family)
    macs = _macs_of(space)
    table = tabulate(macs, space)
    assert table is not None
    m = sample_mixed(space, 3000, np.random.default_rng(5))
    assert np.array_equal(table.predict(m), macs(m))
    best = argmin_row(table)
    np.testing.assert_array_equal(space.canonical(best[None])[0], best)
    assert macs(best[None])[0] == macs(space.to_matrix([space.min_arch()]))[0] <= macs(m).min()


def test_non_additive_models_are_not_tabulated_and_foreign_rows_fall_back(family):
    space = _space(family, "32:40:4")
    macs = _macs_of(space)
    assert tabulate(lambda m: np.sqrt(macs(m)), space) is None
    table = tabulate(macs, space)
    outside = _space(family, [56]).sample_matrix(20, 0)
    assert np.array_equal(table.predict(outside), macs(outside))  # r=56 is not in the table


def test_rows_shallower_than_the_space_fall_back():
    space = _space(get_family(DEFAULT_FAMILY), "32:40:4")
    macs = _macs_of(space)
    table = tabulate(macs, space)
    shallow = get_family(DEFAULT_FAMILY).space_from_dict({"r": [32], "d": [1, 2]}).sample_matrix(50, 0)
    assert np.array_equal(table.predict(shallow), macs(shallow))  # depth 1 is not in the table


def test_real_lookup_table_predictor_is_tabulated_exactly(family):
    from hwnas.latency import LookupTablePredictor

    space = _space(family, "32:48:4")
    rng = np.random.default_rng(0)
    m = sample_mixed(space, 200, rng)
    ms = 0.3 + _macs_of(space)(m) / 2e7 * (1 + 0.05 * rng.standard_normal(len(m)))
    lut = LookupTablePredictor(net=NetworkSpec(family.name, space.width_mult, 10)).fit(m, ms)
    problem = Problem(space, lut, {"dev": lut}, {"dev": 10.0}, n_classes=10)
    assert problem.cost_models.tabulated() == {"ms:dev": True}
    check = sample_mixed(space, 500, rng)
    np.testing.assert_allclose(problem.costs(check)[0]["ms:dev"], lut.predict(check), rtol=1e-9)
    fastest, row = problem.fastest("dev")
    assert fastest <= lut.predict(check).min() + 1e-12
    assert np.isclose(fastest, lut.predict(row[None])[0])
