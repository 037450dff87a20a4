"""The ofa-proxyless family: genes and sampling, Once-for-All's checkpoint layout, subnets that compute
what Once-for-All's own ``OFAProxylessNASNets`` computes, and exact costs in Once-for-All's convention.

Once-for-All's code (PyPI `ofa`, a dev-only dependency) is the reference: its supernet is built with
the published config (``ofa_proxyless_d234_e346_k357_w1.3``) and every tensor randomised.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from hwnas.errors import InputError
from hwnas.families import get_family
from hwnas.families.base import OFA_RESOLUTIONS, GeneArch

from ofa_reference import images, recalibrate_  # noqa: E402
from ofa_reference import official_proxyless as official_net  # noqa: E402

FAMILY = get_family("ofa-proxyless")
KS, E, D = (3, 5, 7), (3, 4, 6), (2, 3, 4)
N_SLOTS, N_STAGES = 21, 6
TOL = 1e-4


def ofa_dict(ks, e, d, r: int) -> dict:
    return {"ks": list(ks), "e": list(e), "d": list(d), "r": [r]}


@pytest.fixture(scope="module")
def official():
    """(Once-for-All's randomised supernet, hwnas's supernet holding its state dict)."""
    net = official_net()
    model = FAMILY.build_supernet()
    model.load_state_dict(net.state_dict(), strict=True)
    return net, model.eval()


def rel_diff(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours - ref).abs().max() / ref.abs().max())


def features(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A static subnet's feature maps before pooling (hwnas and OFA name these parts alike)."""
    x = net.first_conv(x)
    for block in net.blocks:
        x = block(x)
    return net.feature_mix_layer(x)


# -- genes ----------------------------------------------------------------------------------------
def test_family_genes_and_names():
    assert FAMILY.name == "ofa-proxyless" and FAMILY.ofa_class == "OFAProxylessNASNets"
    assert FAMILY.widths[0] == 1.3 and FAMILY.default_width == 1.3
    assert FAMILY.published == {1.3: "ofa_proxyless_d234_e346_k357_w1.3"}
    assert [(g.name, g.count, g.choices) for g in FAMILY.gene_groups()] == \
        [("ks", 21, KS), ("e", 21, E), ("d", 6, D)]
    cols = FAMILY.flat_columns()
    assert len(cols) == 49 and cols[:2] == ("r", "ks_0") and cols[22] == "e_0" and cols[-1] == "d_5"


def test_the_family_and_its_genes_need_no_torch():
    code = ("import sys, numpy as np\n"
            "from hwnas.families import get_family\n"
            "f = get_family('ofa-proxyless')\n"
            "m = f.sample_matrix(5, np.random.default_rng(0), [128, 160])\n"
            "f.active_mask(m); f.canonical(m); f.check_rows(m)\n"
            "a = f.arch_from_dict({'ks': [3] * 21, 'e': [3] * 21, 'd': [2] * 5 + [1], 'r': 128})\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_active_mask_follows_the_stage_depths():
    d = [2, 3, 4, 2, 3, 4]
    row = np.array([[160] + [7] * N_SLOTS + [6] * N_SLOTS + d])
    mask = FAMILY.active_mask(row)[0]
    ks_mask, e_mask, d_mask = mask[:21], mask[21:42], mask[42:]
    expected = [j < d[s] for s in range(5) for j in range(4)] + [True]  # the last stage: one block
    assert ks_mask.tolist() == expected and e_mask.tolist() == expected
    assert d_mask.tolist() == [True] * 5 + [False]
    canon = FAMILY.canonical(row)[0]
    assert canon[0] == 160 and canon[-1] == 2  # d_5 -> the filler
    assert [canon[1 + i] for i in range(21)] == [7 if used else 3 for used in expected]
    assert [canon[22 + i] for i in range(21)] == [6 if used else 3 for used in expected]


def test_arch_dicts_accept_any_last_depth_and_mean_one_network():
    rng = np.random.default_rng(0)
    ks, e = rng.choice(KS, 21).tolist(), rng.choice(E, 21).tolist()
    archs = [FAMILY.arch_from_dict(ofa_dict(ks, e, [4, 3, 2, 4, 3, last], 176)) for last in (1, 2, 3, 4)]
    assert len({a.id for a in archs}) == 1 and len(set(archs)) == 1
    assert archs[0].to_ofa_dict()["d"] == [4, 3, 2, 4, 3, 2] and archs[0].w == 1.3
    assert FAMILY.arch_from_dict({**ofa_dict(ks, e, [4] * 6, 0), "r": 200}).r == 200  # r as an int


@pytest.mark.parametrize("change, expected", [
    ({"ks": [9] + [3] * 20}, r"ks\[0\]=9 is not one of \[3, 5, 7\]"),
    ({"e": [3] * 20 + [5]}, r"e\[20\]=5 is not one of \[3, 4, 6\]"),
    ({"d": [1, 2, 2, 2, 2, 1]}, r"d\[0\]=1 is not one of \[2, 3, 4\]"),
    ({"d": [2] * 5 + [5]}, r"d\[5\]=5 .*one-block last stage.* must be one of \[1, 2, 3, 4\]"),
    ({"d": [2] * 5}, r"'d' must be a list of 6 values"),
    ({"ks": [3] * 20}, r"'ks' must be a list of 21 values"),
    ({"r": [128, 160]}, r"'r' must hold one resolution"),
])
def test_out_of_space_arch_dicts_are_one_line(change, expected):
    with pytest.raises(InputError) as err:
        FAMILY.arch_from_dict({**ofa_dict([3] * 21, [3] * 21, [2] * 6, 128), **change})
    assert "\n" not in str(err.value) and re.search(expected, str(err.value)), str(err.value)


def test_sampling_is_canonical_round_trips_and_is_uniform_over_networks():
    rng = np.random.default_rng(1)
    m = FAMILY.sample_matrix(20000, rng, OFA_RESOLUTIONS)
    assert m.shape == (20000, 49) and m.dtype == np.int64
    assert np.array_equal(FAMILY.canonical(m), m)
    assert np.array_equal(FAMILY.check_rows(m), m)
    assert set(m[:, 0].tolist()) == set(OFA_RESOLUTIONS) and (m[:, -1] == 2).all()
    # a stage of depth d has 9^d networks: depths drawn with weights 81 : 729 : 6561
    freq = np.stack([(m[:, 43:48] == d).mean() for d in D])
    assert np.allclose(freq, np.array([81, 729, 6561]) / 7371, atol=0.01), freq
    # every used slot uniform over its choices
    used = FAMILY.active_mask(m)[:, :21]
    for group, cols in ((KS, slice(1, 22)), (E, slice(22, 43))):
        values = m[:, cols][used]
        assert np.allclose([(values == v).mean() for v in group], 1 / 3, atol=0.01)
    for row in m[:50]:
        arch = GeneArch.from_codes(FAMILY, row, 1.3)
        again = FAMILY.arch_from_dict(arch.to_ofa_dict())
        assert again == arch and again.to_row() == tuple(row) and again.id == arch.id
    assert np.array_equal(FAMILY.sample_matrix(5, 7, [128]), FAMILY.sample_matrix(5, 7, [128]))


# -- Once-for-All's layout ------------------------------------------------------------------------
@pytest.mark.parametrize("width, n_classes", [(1.3, 1000), (1.3, 10), (1.0, 1000)])
def test_layout_is_the_official_state_dict(width, n_classes):
    ref = {k: tuple(v.shape) for k, v in official_net(width, n_classes, randomise=False).state_dict().items()}
    layout = FAMILY.ofa_layout(width, n_classes)
    model = FAMILY.build_supernet(n_classes=n_classes, width_mult=width)
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert layout == ref and list(layout) == list(ref) and len(ref) == 446
    assert {FAMILY.hwnas_key(k): s for k, s in layout.items()} == ours
    assert model.family is FAMILY and model.width_mult == width and model.n_classes == n_classes


# -- networks -------------------------------------------------------------------------------------
def _parity_archs(net, n_random: int, seed: int) -> list[dict]:
    """Max and min nets, Once-for-All's own samples (d_5 = 1) and the family's, at random resolutions
    128..224 (OFA dicts plus "r")."""
    import random

    rng = np.random.default_rng(seed)
    random.seed(seed)

    def r() -> int:
        return int(rng.choice(OFA_RESOLUTIONS))

    archs = [ofa_dict([7] * 21, [6] * 21, [4] * 6, r()), ofa_dict([3] * 21, [3] * 21, [2] * 6, r())]
    for _ in range(n_random):
        archs.append({**net.sample_active_subnet(), "r": [r()]})
    for row in FAMILY.sample_matrix(n_random, rng, OFA_RESOLUTIONS):
        archs.append(GeneArch.from_codes(FAMILY, row, 1.3).to_ofa_dict())
    return archs


def _check_parity(net, model, archs: list[dict]) -> dict[str, float]:
    worst = {"logits": 0.0, "features": 0.0}
    with torch.no_grad():
        for i, arch in enumerate(archs):
            x = images(2, arch["r"][0])
            net.set_active_subnet(ks=arch["ks"], e=arch["e"], d=arch["d"])
            ref_net = net.get_active_subnet(preserve_weight=True).eval()
            ref, ref_maps = net(x), features(ref_net, x)
            assert rel_diff(ref_net(x), ref) <= TOL  # official: dynamic == static
            assert rel_diff(ref_maps[0], ref_maps[1]) > 0.02, "the feature maps ignore the input"
            # even rows as the OFA dict, odd ones as a GeneArch
            ours_arch = arch if i % 2 == 0 else FAMILY.arch_from_dict(arch)
            sub = model.get_subnet(ours_arch)
            assert not sub.training and isinstance(sub.arch, GeneArch)
            model.set_active_subnet(ours_arch)
            worst["logits"] = max(worst["logits"], rel_diff(sub(x), ref), rel_diff(model(x), ref))
            worst["features"] = max(worst["features"], rel_diff(features(sub, x), ref_maps))
    return worst


def test_subnets_compute_what_once_for_all_computes(official):
    net, model = official
    archs = _parity_archs(net, 2, seed=0)
    worst = _check_parity(net, model, archs)
    print(f"worst relative difference over {len(archs)} subnets: logits {worst['logits']:.2e}, "
          f"feature maps {worst['features']:.2e}")
    assert max(worst.values()) <= TOL


@pytest.mark.slow
def test_many_subnets_compute_what_once_for_all_computes(official):
    net, model = official
    archs = _parity_archs(net, 15, seed=1)
    worst = _check_parity(net, model, archs)
    print(f"worst relative difference over {len(archs)} subnets: {worst}")
    assert max(worst.values()) <= TOL


def test_recalibrated_subnets_match_where_outputs_depend_on_the_input():
    """With random BN statistics a deep random subnet's output hardly depends on its input, which
    makes agreement cheap; with BN recalibrated for the subnet (as Once-for-All evaluates subnets)
    outputs depend on the input, and still agree."""
    net = official_net(seed=3)
    rng = np.random.default_rng(3)
    archs = [ofa_dict([3] * 21, [3] * 21, [2] * 6, 128)]
    archs += [GeneArch.from_codes(FAMILY, row, 1.3).to_ofa_dict()
              for row in FAMILY.sample_matrix(1, rng, range(128, 161, 4))]
    worst, spread = 0.0, float("inf")
    for arch in archs:
        recalibrate_(net, arch)
        model = FAMILY.build_supernet()
        model.load_state_dict(net.state_dict(), strict=True)
        x = images(2, arch["r"][0])
        with torch.no_grad():
            ref_net = net.get_active_subnet(preserve_weight=True).eval()
            sub = model.eval().get_subnet(arch)
            ref, ref_maps = ref_net(x), features(ref_net, x)
            worst = max(worst, rel_diff(sub(x), ref), rel_diff(features(sub, x), ref_maps))
            spread = min(spread, rel_diff(ref[0], ref[1]))
            assert rel_diff(ref_maps[0], ref_maps[1]) > 0.1, "the feature maps ignore the input"
    print(f"worst relative difference over {len(archs)} recalibrated subnets: {worst:.2e} "
          f"(two images' logits differ by {spread:.2e} or more)")
    assert spread > 100 * TOL, "the logits ignore the input"
    assert worst <= TOL


def test_the_comparison_sees_the_kernel_transform(official):
    """Identity kernel-transformation matrices change ks=3/5 subnets far beyond the tolerance: the
    parity check would catch a dropped or transposed transform."""
    net, _ = official
    model = FAMILY.build_supernet()
    model.load_state_dict(net.state_dict(), strict=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("_matrix"):
                p.copy_(torch.eye(p.shape[0]))
        arch = ofa_dict([3, 5] * 10 + [5], [4] * 21, [3] * 6, 128)
        net.set_active_subnet(ks=arch["ks"], e=arch["e"], d=arch["d"])
        x = images(2, 128)
        ours, ref = model.eval().get_subnet(arch), net.get_active_subnet(preserve_weight=True).eval()
        assert rel_diff(features(ours, x), features(ref, x)) > 100 * TOL


def test_supernet_state_follows_the_arch_and_extraction_follows_the_supernet():
    model = FAMILY.build_supernet(n_classes=10)
    arch = FAMILY.arch_from_dict(ofa_dict([5] * 21, [4] * 21, [3, 2, 4, 2, 3, 1], 144))
    model.set_active_subnet(arch)
    assert model.active_arch() == arch and model.active_arch(200).r == 200
    assert model.runtime_depth == [3, 2, 4, 2, 3, 1]
    model.double().train()
    sub = model.get_subnet(FAMILY.arch_from_dict(ofa_dict([3] * 21, [3] * 21, [2] * 6, 128)))
    assert sub.training and next(sub.parameters()).dtype == torch.float64
    assert model.active_arch() == arch  # extraction leaves the active subnet alone
    assert len(sub.blocks) == 1 + 2 * 5 + 1
    assert all(type(m) is not torch.nn.ReLU for m in model.modules())
    assert sum(type(m) is torch.nn.ReLU6 for m in sub.modules()) == 2 + 1 + 2 * 11
    bns = [m for m in sub.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert {(m.eps, m.momentum) for m in bns} == {(1e-3, 0.1)}  # OFA's bn_param for ProxylessNAS
    model.set_min_net()
    assert model.active_arch().to_ofa_dict()["d"] == [2] * 6


def test_bad_archs_and_options_are_one_line():
    model = FAMILY.build_supernet(n_classes=10)
    good = FAMILY.arch_from_dict(ofa_dict([3] * 21, [3] * 21, [2] * 6, 128))
    bad = [
        (ofa_dict([4] * 21, [3] * 21, [2] * 6, 128), r"ks\[0\]=4"),
        (dataclasses.replace(good, family_name="ofa-mbv3"), r"expected an ofa-proxyless arch.*got ofa-mbv3"),
        (GeneArch.from_codes(FAMILY, good.to_row(), 1.0), r"width 1\.0, the ofa-proxyless supernet at 1\.3"),
        ([3] * 49, r"a GeneArch, or Once-for-All's arch dict"),
    ]
    with pytest.raises(InputError, match=r"ks_20=9"):  # codes are checked when an arch is made
        GeneArch.from_codes(FAMILY, (128,) + (3,) * 20 + (9,) + good.codes[21:], 1.3)
    for arch, expected in bad:
        for call in (model.set_active_subnet, model.get_subnet):
            with pytest.raises(InputError, match=expected) as err:
                call(arch)
            assert "\n" not in str(err.value)
    for kwargs, expected in (({"width_mult": 1.2}, r"width multiplier 1\.2 is not a width of ofa-proxyless"),
                             ({"n_classes": 0}, r"n_classes"), ({"dropout": 1.5}, r"dropout")):
        with pytest.raises(InputError, match=expected):
            FAMILY.build_supernet(**kwargs)
    with pytest.raises(InputError, match=r"\[n, 49\]"):
        FAMILY.count_params_macs(np.zeros((2, 46), dtype=np.int64), 1.3, 1000)
    with pytest.raises(InputError, match=r"row 1: e_3=5"):
        rows = FAMILY.sample_matrix(2, 0, [128])
        rows[1, 22 + 3] = 5
        FAMILY.count_params_macs(rows, 1.3, 1000)


# -- costs ----------------------------------------------------------------------------------------
def ofa_counts(net, arch: GeneArch) -> tuple[int, int, float]:
    """Once-for-All's params and MACs of `arch`'s static subnet: ``count_parameters`` and
    ``count_net_flops`` with its own hooks, run in float64 so its sum is exact (its float32 total
    rounds: off by tens of MACs at ~5e8), and the plain float32 value."""
    from ofa.utils import count_net_flops, count_parameters

    d = arch.to_ofa_dict()
    net.set_active_subnet(ks=d["ks"], e=d["e"], d=d["d"])
    sub = net.get_active_subnet(preserve_weight=False)
    shape = (1, 3, arch.r, arch.r)
    flops32 = count_net_flops(sub, shape)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the profiler's counters and input become float64
    try:
        flops64 = count_net_flops(sub.double(), shape)
    finally:
        torch.set_default_dtype(default)
    assert flops64 == int(flops64)
    return count_parameters(sub), int(flops64), flops32


@pytest.mark.parametrize("n_classes", [1000, 10])
def test_costs_are_once_for_alls(n_classes):
    net = official_net(n_classes=n_classes, randomise=False)
    rng = np.random.default_rng(n_classes)
    rows = FAMILY.sample_matrix(20, rng, OFA_RESOLUTIONS)
    extremes = [FAMILY.arch_from_dict(ofa_dict([k] * 21, [e] * 21, [d] * 6, r)).to_row()
                for k, e, d, r in ((7, 6, 4, 224), (3, 3, 2, 128), (7, 6, 4, 128), (3, 3, 2, 224))]
    rows = np.concatenate([np.asarray(extremes), rows])
    params, macs = FAMILY.count_params_macs(rows, 1.3, n_classes)
    assert params.dtype == np.int64 and macs.dtype == np.int64
    for row, p, m in zip(rows, params, macs):
        ref_p, ref_m, ref_m32 = ofa_counts(net, GeneArch.from_codes(FAMILY, row, 1.3))
        assert (p, m) == (ref_p, ref_m), row.tolist()
        assert abs(m - ref_m32) <= 1e-6 * m
    print(f"n_classes={n_classes}: max net {params[0]:,} params {macs[0]:,} MACs at 224, "
          f"min net {params[1]:,} / {macs[1]:,} at 128")


def test_costs_of_many_rows_are_the_single_row_costs():
    m = FAMILY.sample_matrix(3000, np.random.default_rng(5), range(96, 257, 4))
    start = time.perf_counter()
    params, macs = FAMILY.count_params_macs(m, 1.3, 1000)
    took = time.perf_counter() - start
    for i in range(0, 3000, 300):
        assert (params[i], macs[i]) == tuple(x[0] for x in FAMILY.count_params_macs(m[i:i + 1], 1.3, 1000))
    empty = FAMILY.count_params_macs(m[:0], 1.3, 1000)
    assert empty[0].shape == (0,) and empty[1].shape == (0,)
    print(f"3000 rows costed in {took * 1000:.0f} ms")


def test_static_subnet_has_the_counted_parameters():
    from hwnas.families.ofa_proxyless.network import ProxylessNASSubnet

    rng = np.random.default_rng(3)
    for row in FAMILY.sample_matrix(3, rng, OFA_RESOLUTIONS):
        arch = GeneArch.from_codes(FAMILY, row, 1.3)
        sub = ProxylessNASSubnet(arch, n_classes=10)
        params, _ = FAMILY.count_params_macs(row[None, :], 1.3, 10)
        assert sum(p.numel() for p in sub.parameters()) == params[0]
