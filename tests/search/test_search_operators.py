from __future__ import annotations

import numpy as np
import pytest

from hwnas.search.operators import crossover, mutate, sample_graded, sample_mixed, unique_rows
from hwnas.space import N_SLOTS, SearchSpace


def used_mask(m: np.ndarray) -> np.ndarray:
    """bool [n, 20]: the slots each OFA-MobileNetV3 row uses (its kernel genes' activity)."""
    return SearchSpace.active_mask(m)[:, :N_SLOTS]


def _in_space_and_canonical(space: SearchSpace, m: np.ndarray) -> None:
    archs = space.from_matrix(m)  # Arch normalises unused slots to the filler
    assert (space.to_matrix(archs) == m).all(), "rows must already be canonical"
    bad = [space.check(a) for a in archs if space.check(a)]
    assert not bad, bad[:3]


@pytest.fixture
def space() -> SearchSpace:
    return SearchSpace()


def test_mutate_and_crossover_stay_canonical_and_in_space(space):
    rng = np.random.default_rng(0)
    parents = space.sample_matrix(500, rng)
    for prob in (0.1, 0.5, 1.0):
        _in_space_and_canonical(space, mutate(space, parents, rng, prob))
    _in_space_and_canonical(space, crossover(space, parents, parents[::-1].copy(), rng))
    _in_space_and_canonical(space, sample_graded(space, 500, rng))
    _in_space_and_canonical(space, sample_mixed(space, 501, rng))


def test_mutation_rate_and_fresh_slots(space):
    rng = np.random.default_rng(1)
    m = sample_graded(space, 4000, rng)  # many shallow stages that mutation can deepen
    assert (mutate(space, m, rng, 0.0) == m).all()
    out = mutate(space, m, rng, 0.1)
    # resolution: redrawn with p=0.1 from 25 choices, so it changes in ~0.1 * 24/25 of rows
    assert 0.07 < (out[:, 0] != m[:, 0]).mean() < 0.12
    # slots a deeper stage brings into use get random kernels, not just the filler 3
    fresh = used_mask(out) & ~used_mask(m)
    assert fresh.sum() > 100
    assert set(np.unique(out[:, 1:21][fresh])) == set(space.ks_choices)


def test_crossover_takes_used_genes_from_a_parent_that_uses_them(space):
    rng = np.random.default_rng(2)
    a, b = space.sample_matrix(2000, rng), space.sample_matrix(2000, rng)
    c = crossover(space, a, b, rng)
    assert (crossover(space, a, a, rng) == a).all()
    assert ((c[:, 41:46] == a[:, 41:46]) | (c[:, 41:46] == b[:, 41:46])).all()
    both = used_mask(c) & used_mask(a) & used_mask(b)
    ks_c, ks_a, ks_b = c[:, 1:21], a[:, 1:21], b[:, 1:21]
    assert ((ks_c == ks_a) | (ks_c == ks_b))[both].all()
    only_a = used_mask(c) & used_mask(a) & ~used_mask(b)
    assert (ks_c == ks_a)[only_a].all()


def test_graded_sampling_reaches_the_small_end(space):
    from hwnas.supernet.stats import stats_frame

    rng = np.random.default_rng(3)
    uniform = stats_frame(space.sample_matrix(2000, rng))["macs"].min()
    graded = stats_frame(sample_graded(space, 2000, rng))["macs"].min()
    assert graded < 0.7 * uniform


def test_unique_rows_keeps_first_occurrences_in_order():
    m = np.array([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]], dtype=np.int32)
    assert unique_rows(m).tolist() == [0, 1, 3]
    assert unique_rows(m[:0]).tolist() == []

def test_canonical_puts_the_filler_into_unused_slots_only():
    m = np.full((1, 46), 5, dtype=np.int32)
    m[:, 41:46] = 2  # every stage uses its first two slots
    out = SearchSpace.canonical(m)
    ks = out[0, 1:21].reshape(5, 4)
    assert (ks[:, :2] == 5).all() and (ks[:, 2:] == 3).all()
