"""The analytic costs must be exact (they are the predictors' inductive bias), and the per-block
entries a profile measures must cover every part of the subnets they are for."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import InputError
from hwnas.latency.analytic import analytic_features
from hwnas.latency.layout import analytic_gather, as_matrix, entry_keys, entry_module, slot_sizes
from hwnas.space import SearchSpace
from hwnas.supernet.stats import stats_frame


@pytest.mark.parametrize("width_mult", [1.0, 1.2])
def test_macs_match_the_exact_counter(width_mult):
    m = SearchSpace(width_mult=width_mult).sample_matrix(300, 3)
    macs = analytic_features(m, width_mult, 1000, "macs")[:, 0]
    assert np.array_equal(macs.astype(np.int64), stats_frame(m, width_mult=width_mult)["macs"].to_numpy())
    space = SearchSpace(width_mult=width_mult)
    for arch in (space.min_arch(), space.max_arch()):
        row = as_matrix([arch])
        assert analytic_features(row, width_mult, 1000, "macs")[0, 0] == \
            stats_frame(row, width_mult=width_mult)["macs"].iat[0]


def test_gather_equals_per_arch_sum():
    m = SearchSpace(r_choices=(32, 48, 64)).sample_matrix(50, 0)
    g = analytic_gather(1.0, 10)
    per_slot, fixed = g.per_slot(m)
    for i in range(5):
        used = [(s, j) for s in range(5) for j in range(m[i, 41 + s])]
        expected = sum(per_slot[i, 4 * s + j] for s, j in used) + fixed[i]
        np.testing.assert_allclose(g.total(m[i:i + 1])[0], expected)
        unused = [4 * s + j for s in range(5) for j in range(m[i, 41 + s], 4)]
        assert not per_slot[i, unused].any()


def test_entry_keys_cover_the_subnets_and_build():
    space = SearchSpace(r_choices=(32, 40))
    archs = space.sample(4, 1)
    keys = entry_keys(archs)
    assert set(keys["part"]) == {"stem", "block", "head"}
    assert set(keys.loc[keys.part == "stem", "size"]) == {a.r for a in archs}
    for arch in archs:
        sizes = slot_sizes(arch.r)[0]
        for s, slot, k, e in arch.blocks():
            j = min(slot % 4, 1)
            hit = keys[(keys.part == "block") & (keys.stage == s) & (keys.j == j) & (keys.k == k)
                       & (keys.e == e) & (keys["size"] == sizes[slot])]
            assert len(hit) == 1
    module, shape = entry_module(keys[keys.part == "block"].iloc[0], 1.0, 10)
    import torch

    with torch.no_grad():
        out = module(torch.zeros(shape))
    assert out.shape[0] == 1


def test_bad_matrix_is_refused():
    with pytest.raises(InputError, match="46"):
        as_matrix(np.zeros((3, 10), dtype=int))
    bad = SearchSpace().sample_matrix(2, 0)
    bad[0, 43] = 0
    with pytest.raises(InputError, match="depths"):
        as_matrix(bad)
