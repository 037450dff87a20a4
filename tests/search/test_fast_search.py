"""The search's fast paths: fused breeding gives Once-for-All's operators (in distribution), one
fused gather per batch gives every cost column and the accuracy features as the models do."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.accuracy.predictors import RidgePredictor
from hwnas.latency import AnalyticPredictor, HybridPredictor
from hwnas.search.operators import breed, crossover, mutate, sample_mixed
from hwnas.search.problem import Problem
from hwnas.space import N_SLOTS, N_STAGES, PAD_E, PAD_KS, SearchSpace

KS, E = slice(1, 1 + N_SLOTS), slice(1 + N_SLOTS, 1 + 2 * N_SLOTS)
D = slice(1 + 2 * N_SLOTS, 1 + 2 * N_SLOTS + N_STAGES)


def used_mask(m: np.ndarray) -> np.ndarray:
    """bool [n, 20]: the slots each OFA-MobileNetV3 row uses."""
    return SearchSpace.active_mask(m)[:, :N_SLOTS]

KW = dict(net=NetworkSpec("ofa-mbv3", 1.0, 10))


def _in_space(space: SearchSpace, m: np.ndarray) -> None:
    used = used_mask(m)
    assert np.isin(m[:, 0], space.r_choices).all() and np.isin(m[:, D], space.d_choices).all()
    assert np.isin(m[:, KS][used], space.ks_choices).all() and np.isin(m[:, E][used], space.e_choices).all()
    assert (m[:, KS][~used] == PAD_KS).all() and (m[:, E][~used] == PAD_E).all()  # canonical


def test_breed_matches_mutate_and_crossover_in_distribution(small_space):
    rng = np.random.default_rng(0)
    parents = sample_mixed(small_space, 25, rng)
    n = 30000
    bred = breed(small_space, parents, n, n, np.random.default_rng(1), 0.1)
    assert bred.shape == (2 * n, 46) and bred.dtype == parents.dtype
    _in_space(small_space, bred)
    ref_mut = mutate(small_space, parents[rng.integers(25, size=n)], rng, 0.1)
    ref_cross = crossover(small_space, parents[rng.integers(25, size=n)], parents[rng.integers(25, size=n)], rng)
    for got, want in ((bred[:n], ref_mut), (bred[n:], ref_cross)):
        # every column's value frequencies agree (binomial noise at n = 30000: well under 0.02)
        for col in range(46):
            values = np.union1d(got[:, col], want[:, col])
            f_got = (got[:, col][:, None] == values).mean(0)
            f_want = (want[:, col][:, None] == values).mean(0)
            assert np.abs(f_got - f_want).max() < 0.02, col
        # and so does a joint quantity: blocks in use (noise: parent picks vary, sd ~0.03)
        assert abs(used_mask(got).sum(1).mean() - used_mask(want).sum(1).mean()) < 0.15


def test_breed_mutants_change_genes_at_the_mutation_rate(small_space):
    parents = np.repeat(small_space.to_matrix([small_space.max_arch()]), 1, axis=0)
    kids = breed(small_space, parents, 20000, 0, np.random.default_rng(2), 0.1)
    ref = mutate(small_space, np.repeat(parents, 20000, axis=0), np.random.default_rng(3), 0.1)
    # redrawn genes (some keep their value), plus slots a shallower stage drops to the filler
    assert abs((kids != parents[0]).mean() - (ref != parents[0]).mean()) < 0.003


@pytest.fixture(scope="module")
def fitted(small_space):
    rng = np.random.default_rng(0)
    m = sample_mixed(small_space, 160, rng)
    from hwnas.latency.analytic import all_features

    base = all_features(m.astype(np.int64), NetworkSpec("ofa-mbv3", 1.0, 10))[:, 0]
    ms = 0.2 + base / base.mean() * (1 + 0.1 * (m[:, KS] == 7).mean(1)) + rng.normal(0, 0.01, len(m))
    top1 = 60 + 3 * np.log(ms) + rng.normal(0, 0.3, len(m))
    return m, ms, top1


@pytest.mark.parametrize("features", ["full", "compact"])
def test_fused_costs_and_accuracy_equal_the_models(small_space, fitted, features):
    m, ms, top1 = fitted
    lat_a = HybridPredictor("auto", "ridge", **KW).fit(m, ms)
    lat_b = AnalyticPredictor("roofline", "log", 1e-3, **KW).fit(m, ms * 1.3)
    acc = RidgePredictor(small_space, 10, features=features).fit(m, top1)
    problem = Problem(small_space, acc, {"a": lat_a, "b": lat_b}, {"a": 1e6, "b": 1e6},
                      objectives=("top1", "ms:a", "macs"), n_classes=10, max_params=1e12,
                      accuracy_risk=1.0)
    paths = problem.fast_paths()
    assert paths["fused_gather"] and paths["accuracy_features"] == "gathered"
    assert (problem.fast_path.ridge is not None) == (features == "full")  # one-hot ridge: pair tables
    rows = sample_mixed(small_space, 300, np.random.default_rng(5))
    cols, viol, idx = problem.costs_indexed(rows)
    assert idx is not None and set(cols) == {"ms:a", "ms:b", "macs", "params"}
    np.testing.assert_allclose(cols["ms:a"], lat_a.predict(rows), rtol=1e-9, atol=0)
    np.testing.assert_allclose(cols["ms:b"], lat_b.predict(rows), rtol=1e-9, atol=0)
    for what in ("macs", "params"):
        np.testing.assert_allclose(cols[what], problem.cost_models.count(rows, what), rtol=1e-9, atol=0)
    mean, std = acc.predict_with_std(rows)
    np.testing.assert_allclose(problem.top1(rows, idx), mean - std, rtol=1e-9)  # accuracy_risk 1
    problem.reset()
    np.testing.assert_array_equal(problem.top1(rows), mean - std)


def test_rows_outside_the_tables_take_the_model_path(small_space, fitted):
    m, ms, top1 = fitted
    lat = HybridPredictor("auto", "ridge", **KW).fit(m, ms)
    acc = RidgePredictor(small_space, 10).fit(m, top1)
    problem = Problem(small_space, acc, {"a": lat}, {"a": 1e6}, n_classes=10)
    odd = np.concatenate([sample_mixed(small_space, 5, np.random.default_rng(1)),
                          SearchSpace(r_choices=(60,)).sample_matrix(3, 0)])  # r outside the space
    cols, _, idx = problem.costs_indexed(odd)
    assert idx is None
    np.testing.assert_allclose(cols["ms:a"], lat.predict(odd), rtol=1e-9)


def test_search_without_plot_writes_no_png_and_drops_a_stale_one(tmp_path):
    """`run_search(plot=False)`: pareto.csv, search.json and explored.csv; an earlier pareto.png (another
    search's) is removed so the files in the run always belong together."""
    from hwnas.run import RunFiles
    from hwnas.search.outputs import write

    import pandas as pd

    (tmp_path / "pareto.png").write_bytes(b"old")
    front = pd.DataFrame({"ms_pred": [1.0], "top1_pred": [50.0], "on_front": [True], "verified": [False]})
    sample = {"top1_pred": np.ones(1), "ms_pred:d": np.ones(1)}
    paths = write(RunFiles(tmp_path), front, {"metrics": {}}, sample, ["d"], {"d": 2.0}, "t", plot=False)
    assert set(paths) == {"pareto_csv", "search_json", "explored_csv"}
    assert not (tmp_path / "pareto.png").exists() and (tmp_path / "search.json").exists()
