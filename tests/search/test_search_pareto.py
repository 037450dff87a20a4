from __future__ import annotations

import numpy as np
import pytest

from hwnas.search.pareto import crowding_distance, front_mask, hypervolume, nondominated_rank, select_survivors


def test_front_and_hypervolume_of_known_points():
    loss = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [3.0, 3.0], [2.5, 2.5]])
    assert front_mask(loss).tolist() == [True, True, True, False, False]
    assert front_mask(loss, feasible=np.array([False, True, True, True, True])).tolist() == \
        [False, True, True, False, False]
    # staircase of 3 unit-step points under reference (4, 4): 3 + 2 + 1 = 6
    assert hypervolume(loss, np.array([4.0, 4.0])) == 6.0
    assert hypervolume(loss + 10, np.array([4.0, 4.0])) == 0.0  # nothing inside the reference


def test_crowding_prefers_boundaries_and_sparse_points():
    loss = np.array([[0.0, 4.0], [1.0, 3.0], [1.1, 2.9], [4.0, 0.0]])
    d = crowding_distance(loss)
    assert np.isinf(d[[0, 3]]).all()
    assert d[1] > 0 and d[2] > 0


def test_survivors_put_feasible_rows_first():
    loss = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    penalty = np.array([0.5, 0.0, 0.1, 0.0])
    keep, rank, _ = select_survivors(loss, penalty, 3)
    assert keep.tolist() == [1, 3, 2]  # feasible (dominance order), then least violation
    assert rank.tolist() == sorted(rank.tolist())


def _dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool((a <= b).all() and (a < b).any())


def _brute_ranks(loss: np.ndarray) -> np.ndarray:
    """O(n^2) per front: peel off the rows no remaining row dominates."""
    rank = np.full(len(loss), -1)
    r = 0
    while (rank < 0).any():
        left = np.flatnonzero(rank < 0)
        top = [i for i in left if not any(_dominates(loss[j], loss[i]) for j in left)]
        rank[top] = r
        r += 1
    return rank


def _brute_hv_2d(loss: np.ndarray, ref: np.ndarray) -> float:
    """Area of the union of the boxes [x, ref0] x [y, ref1], slab by slab along x."""
    pts = loss[(loss < ref).all(axis=1)]
    xs = np.unique(np.append(pts[:, 0], ref[0]))
    return float(sum((b - a) * (ref[1] - pts[pts[:, 0] <= a, 1].min()) for a, b in zip(xs[:-1], xs[1:])))


def _random_losses(rng, k: int, trials: int = 30):
    """Continuous rows, and small integers (ties in one objective, whole duplicate rows)."""
    for trial in range(trials):
        n = int(rng.integers(1, 120))
        yield rng.integers(0, 4, (n, k)).astype(float) if trial % 2 else rng.random((n, k))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_front_and_ranks_equal_a_brute_force_reference(k):
    """Every copy of a front point is on the front; copies share a rank."""
    rng = np.random.default_rng(k)
    for loss in _random_losses(rng, k):
        ranks = _brute_ranks(loss)
        assert np.array_equal(nondominated_rank(loss), ranks)
        assert np.array_equal(front_mask(loss), ranks == 0)
        feasible = rng.random(len(loss)) < 0.7
        expect = np.zeros(len(loss), bool)
        expect[feasible] = _brute_ranks(loss[feasible]) == 0
        assert np.array_equal(front_mask(loss, feasible), expect)


def test_duplicates_of_a_front_point_are_all_on_it():
    loss = np.array([[1.0, 2.0], [1.0, 2.0], [2.0, 1.0], [2.0, 2.0], [2.0, 2.0]])
    assert front_mask(loss).tolist() == [True, True, True, False, False]
    assert nondominated_rank(loss).tolist() == [0, 0, 0, 1, 1]
    assert hypervolume(loss, np.array([3.0, 3.0])) == hypervolume(loss[[0, 2]], np.array([3.0, 3.0])) == 3.0


def test_infeasible_rows_rank_after_feasible_ones_by_violation():
    loss = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.5], [0.5, 2.0], [3.0, 3.0]])
    penalty = np.array([0.2, 0.0, 0.0, 0.1, 0.2])
    # feasible: rows 1, 2 (mutually non-dominated) = front 0; then violation 0.1, then 0.2 (a tie)
    assert nondominated_rank(loss, penalty).tolist() == [2, 0, 0, 1, 2]
    assert nondominated_rank(loss[:0], penalty[:0]).tolist() == []


@pytest.mark.parametrize("k", [2, 3, 4])
def test_hypervolume_of_random_fronts(k):
    """2-D: equal to the slab-by-slab area; any k: the front's alone, monotone in the reference."""
    rng = np.random.default_rng(10 + k)
    for loss in _random_losses(rng, k):
        ref = np.full(k, 0.8 if loss.max() <= 1 else 2.5)
        hv = hypervolume(loss, ref)
        assert hv == pytest.approx(hypervolume(loss[front_mask(loss)], ref), rel=1e-12)
        assert hypervolume(loss, ref + 0.5) >= hv >= 0
        if k == 2:
            assert hv == pytest.approx(_brute_hv_2d(loss, ref), rel=1e-12, abs=1e-12)


def test_a_front_of_45k_rows_and_4_objectives_is_computed():
    """The size the dashboard meets (its speed: experiments/bench_pareto_front.py)."""
    loss = np.random.default_rng(0).random((45_000, 4))
    n_front = int(front_mask(loss).sum())
    assert 0 < n_front < len(loss)
