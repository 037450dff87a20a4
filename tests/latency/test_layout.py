"""The analytic costs must be exact (they are the predictors' inductive bias), the gather must sum
exactly the parts each row runs, and the per-block entries a profile measures must cover every part
of the subnets they are for."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.errors import InputError
from hwnas.families import family_names, get_family
from hwnas.latency.analytic import analytic_features
from hwnas.latency.base import family_matrix
from legacy_mbv3_blocks import entry_module, slot_sizes

from hwnas.latency.layout import PartGather, family_entry_keys
from hwnas.space import SearchSpace
from hwnas.supernet.stats import stats_frame


@pytest.mark.parametrize("width_mult", [1.0, 1.2])
def test_macs_match_the_exact_counter(width_mult):
    m = SearchSpace(width_mult=width_mult).sample_matrix(300, 3)
    macs = analytic_features(m, NetworkSpec("ofa-mbv3", width_mult, 1000), "macs")[:, 0]
    assert np.array_equal(macs.astype(np.int64), stats_frame(m, width_mult=width_mult)["macs"].to_numpy())
    space = SearchSpace(width_mult=width_mult)
    for arch in (space.min_arch(), space.max_arch()):
        row = space.to_matrix([arch]).astype(np.int64)
        assert analytic_features(row, NetworkSpec("ofa-mbv3", width_mult, 1000), "macs")[0, 0] == \
            stats_frame(row, width_mult=width_mult)["macs"].iat[0]


@pytest.mark.parametrize("family", family_names())
def test_gather_sums_exactly_the_parts_each_row_runs(family):
    fam = get_family(family)
    layout = fam.cost_layout(fam.default_width, 10)
    rows = fam.sample_matrix(60, np.random.default_rng(0), [32, 48, 64]).astype(np.int64)
    gather = PartGather(layout, layout.cost, 8)
    per_part = gather.per_part(rows)
    active = layout.active(rows)
    for i, row in enumerate(rows):
        want = [layout.cost(p, tuple(int(v) for v in row[list(part.columns)])) if active[i, p] else np.zeros(8)
                for p, part in enumerate(layout.parts)]
        np.testing.assert_array_equal(per_part[i], np.stack(want))
    np.testing.assert_array_equal(gather.total(rows), per_part.sum(axis=1))  # integer costs: any order


def test_a_refused_key_is_an_error_only_for_rows_that_run_it():
    layout = get_family("ofa-mbv3").cost_layout(1.0, 10)

    def ms(p: int, key: tuple[int, ...]) -> np.ndarray:
        if layout.kernel(p, key) == 7:
            raise InputError("no entry for k=7")
        return np.ones(1)

    gather = PartGather(layout, ms, 1)
    rows = SearchSpace(ks_choices=(3, 5), d_choices=(2,), r_choices=(32,)).sample_matrix(5, 0).astype(np.int64)
    rows[:, 1 + 3] = 7  # slot 3 (stage 0, block 3) does not run at depth 2: its gene changes nothing
    np.testing.assert_array_equal(gather.total(rows)[:, 0], 2 + 5 * 2)  # stem, head, 5 stages x 2 blocks
    rows[2, 1 + 1] = 7  # slot 1 runs
    with pytest.raises(InputError, match="k=7"):
        gather.total(rows)


def test_entry_keys_cover_the_subnets_and_build():
    space = SearchSpace(r_choices=(32, 40))
    archs = space.sample(4, 1)
    keys = family_entry_keys(NetworkSpec("ofa-mbv3", 1.0, 10), space.to_matrix(archs).astype(np.int64))
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


def test_bad_matrices_are_refused():
    with pytest.raises(InputError, match="46"):
        family_matrix("ofa-mbv3", np.zeros((3, 10), dtype=int), 1.0)
    bad = SearchSpace().sample_matrix(2, 0)
    bad[0, 43] = 0
    with pytest.raises(InputError, match=r"d_2=0 is outside 1\.\.4"):
        family_matrix("ofa-mbv3", bad, 1.0)
    shallow = SearchSpace(d_choices=(1,)).sample_matrix(2, 0)  # tables of the first family may hold depth 1
    assert family_matrix("ofa-mbv3", shallow, 1.0).dtype == np.int64
    proxyless = get_family("ofa-proxyless").sample_matrix(2, np.random.default_rng(0), [32])
    proxyless[0, 1] = 4
    with pytest.raises(InputError, match="ks_0=4 is not one of"):  # other families: their choices
        family_matrix("ofa-proxyless", proxyless, 1.3)


def test_a_family_names_its_own_costs():
    """The cost vocabulary is the layout's: the test family's 1x1 / k x k MACs become its analytic
    feature names, and a vocabulary without the common costs is refused in one line."""
    from family_runs import family_in_registry, tiny_family_class
    from hwnas.families.parts import REQUIRED_COSTS, cached_layout, check_cost_names
    from hwnas.latency.analytic import all_feature_names, feature_names

    tiny = tiny_family_class().name
    with family_in_registry(tiny):
        assert all_feature_names(tiny)[:2] == ("macs_1x1", "macs_kxk")
        assert feature_names("full", tiny)[:4] == ("macs_1x1", "macs_kxk_k3", "macs_kxk_k5", "macs_fixed")
    assert check_cost_names(("macs_attn", "macs_mlp") + REQUIRED_COSTS, None) is None
    assert "followed by" in check_cost_names(("macs_attn", "act_bytes"), None)
    assert "kernel_split" in check_cost_names(("macs_attn",) + REQUIRED_COSTS, "macs_dw")

    class Odd(get_family("ofa-mbv3").cost_layout_class()):
        cost_names = ("flops",) + REQUIRED_COSTS

    with pytest.raises(TypeError, match="cost_names"):
        cached_layout(Odd, get_family("ofa-mbv3"), 1.0, 10)
