from __future__ import annotations

import numpy as np

from hwnas.search.operators import sample_mixed
from hwnas.search.problem import Problem, _table_argmin
from hwnas.search.tabulate import tabulate
from hwnas.space import SearchSpace
from hwnas.supernet.stats import stats_frame


def _macs(m):
    return stats_frame(np.asarray(m), n_classes=10)["macs"].to_numpy(np.float64)


def test_macs_table_is_exact_and_its_minimum_is_the_smallest_subnet():
    space = SearchSpace.from_dict({"r": "32:64:4"})
    table = tabulate(_macs, space)
    assert table is not None
    m = sample_mixed(space, 3000, np.random.default_rng(5))
    assert np.array_equal(table.predict(m), _macs(m))
    best = _table_argmin(table)
    assert _macs(best[None])[0] == _macs(space.to_matrix([space.min_arch()]))[0]


def test_non_additive_models_are_not_tabulated_and_foreign_rows_fall_back():
    space = SearchSpace.from_dict({"r": "32:40:4"})
    assert tabulate(lambda m: np.sqrt(_macs(m)), space) is None
    table = tabulate(_macs, space)
    outside = SearchSpace.from_dict({"r": [56]}).sample_matrix(20, 0)
    assert np.array_equal(table.predict(outside), _macs(outside))  # r=56 is not in the table
    shallow = SearchSpace.from_dict({"r": [32], "d": [1, 2]}).sample_matrix(50, 0)
    assert np.array_equal(table.predict(shallow), _macs(shallow))  # depth 1 is not either


def test_real_lookup_table_predictor_is_tabulated_exactly():
    from hwnas.latency import LookupTablePredictor

    space = SearchSpace.from_dict({"r": "32:48:4"})
    rng = np.random.default_rng(0)
    m = sample_mixed(space, 200, rng)
    ms = 0.3 + _macs(m) / 2e7 * (1 + 0.05 * rng.standard_normal(len(m)))
    lut = LookupTablePredictor(n_classes=10).fit(m, ms)
    problem = Problem(space, lut, {"dev": lut}, {"dev": 10.0}, n_classes=10)
    assert problem.tabulated() == {"ms:dev": True}
    check = sample_mixed(space, 500, rng)
    np.testing.assert_allclose(problem.costs(check)[0]["ms:dev"], lut.predict(check), rtol=1e-9)
    fastest, row = problem.fastest("dev")
    assert fastest <= lut.predict(check).min() + 1e-12
    assert np.isclose(fastest, lut.predict(row[None])[0])
