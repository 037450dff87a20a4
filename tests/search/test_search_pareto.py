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


@pytest.mark.parametrize("k", [2, 3])
def test_front_mask_sweep_equals_the_general_sort(k):
    """The O(n log n) sweep for 2 and 3 objectives marks exactly the rank-0 rows of Optuna's
    general non-dominated sort, ties and duplicates included."""
    rng = np.random.default_rng(k)
    for trial in range(40):
        n = int(rng.integers(1, 300))
        loss = rng.integers(0, 5, (n, k)).astype(float) if trial % 2 else rng.random((n, k))
        assert np.array_equal(front_mask(loss), nondominated_rank(loss) == 0)
