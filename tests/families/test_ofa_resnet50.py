"""The ofa-resnet50 family computes what Once-for-All's ``OFAResNets`` computes, and counts alike.

Once-for-All's own code (PyPI `ofa`, a dev-only dependency) builds the official supernet with the
published choices (``ofa_resnet50``) and every tensor random; its state dict loads strictly into
hwnas's supernet, whose subnets (static and elastic) must give Once-for-All's outputs. Params and
MACs, counted without a network, must equal Once-for-All's counts on its extracted subnets.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ofa_networks = pytest.importorskip("ofa.imagenet_classification.elastic_nn.networks",
                                   reason="Once-for-All's code (pip extra dev: ofa) is not installed")
ofa_utils = pytest.importorskip("ofa.utils")

from hwnas.errors import InputError  # noqa: E402
from hwnas.families import get_family  # noqa: E402
from hwnas.families.base import OFA_RESOLUTIONS, GeneArch  # noqa: E402
from hwnas.families.ofa_resnet50 import plan  # noqa: E402

ROOT = Path(__file__).parents[2]
TOL = 1e-4
from ofa_reference import official_resnet50 as official_net  # noqa: E402

FAMILY = get_family("ofa-resnet50")
MAX_DICT = {"d": [2] * 5, "e": [0.35] * 18, "w": [2] * 6}
MIN_DICT = {"d": [0] * 5, "e": [0.2] * 18, "w": [0] * 6}


@pytest.fixture(scope="module")
def nets():
    """(Once-for-All's net, hwnas's supernet holding the same weights), in eval mode."""
    net = official_net()
    model = FAMILY.build_supernet()
    model.load_state_dict({FAMILY.hwnas_key(k): v for k, v in net.state_dict().items()}, strict=True)
    return net, model.eval()


def images(n: int, r: int) -> torch.Tensor:
    """Smooth random images: pooled features differ from image to image (unlike white noise)."""
    coarse = torch.nn.functional.interpolate(torch.randn(n, 3, 8, 8), size=(r, r), mode="bilinear",
                                             align_corners=False)
    return 2.0 * coarse + 0.2 * torch.randn(n, 3, r, r)


def rel_diff(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours - ref).abs().max() / ref.abs().max())


def features(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A static subnet's last feature map (hwnas and Once-for-All name these parts alike): errors
    show here before global pooling averages them away."""
    for layer in net.input_stem:
        x = layer(x)
    x = net.max_pooling(x)
    for block in net.blocks:
        x = block(x)
    return x


def compare(net, model, arch_dict: dict, r: int) -> float:
    """Worst relative difference of hwnas's static subnet and elastic supernet against Once-for-All's
    elastic supernet and extracted subnet, on one arch at resolution r."""
    x = images(2, r)
    net.set_active_subnet(**arch_dict)
    ofa_sub = net.get_active_subnet().eval()
    ref = net(x)
    sub = model.get_subnet({**arch_dict, "r": r})
    model.set_active_subnet({**arch_dict, "r": r})
    worst = max(rel_diff(model(x), ref), rel_diff(sub(x), ref), rel_diff(ofa_sub(x), ref),
                rel_diff(features(sub, x), features(ofa_sub, x)))
    # the extracted weights are Once-for-All's, key for key (its num_batches_tracked are not copied)
    ours, theirs = sub.state_dict(), ofa_sub.state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours if not k.endswith("num_batches_tracked"))
    return worst


def ofa_samples(net, n: int, seed: int) -> list[dict]:
    random.seed(seed)
    return [net.sample_active_subnet() for _ in range(n)]


# -- parity --------------------------------------------------------------------------------------
def test_subnets_compute_what_once_for_all_computes(nets):
    net, model = nets
    special = {"d": [1, 0, 2, 1, 0], "e": [0.25, 0.2, 0.35] * 6, "w": [1, 1, 2, 0, 1, 2]}  # d_0, w_0 = 1
    cases = [(MAX_DICT, 224), (MIN_DICT, 132), (special, 140)]
    cases += list(zip(ofa_samples(net, 3, seed=1), (128, 180, 196)))
    worst = 0.0
    with torch.no_grad():
        for arch_dict, r in cases:
            worst = max(worst, compare(net, model, arch_dict, r))
            assert worst <= TOL, (arch_dict, r, worst)


@pytest.mark.slow
def test_subnets_compute_what_once_for_all_computes_sweep(nets):
    net, model = nets
    rng = np.random.default_rng(7)
    archs = ofa_samples(net, 12, seed=2)
    archs += [GeneArch.from_codes(FAMILY, row, 1.0).to_ofa_dict() for row in
              FAMILY.sample_matrix(12, rng, OFA_RESOLUTIONS)]
    with torch.no_grad():
        for arch_dict in archs:
            r = int(rng.choice(range(128, 225, 4)))
            arch_dict = {k: v for k, v in arch_dict.items() if k != "r"}
            assert compare(net, model, arch_dict, r) <= TOL, (arch_dict, r)


def test_equivalent_configs_are_one_row_and_one_network(nets):
    net, _ = nets
    a = FAMILY.arch_from_dict({"d": [1, 2, 2, 2, 2], "e": [0.25] * 18, "w": [1, 2, 2, 2, 2, 2], "r": 160})
    b = FAMILY.arch_from_dict({"d": [0, 2, 2, 2, 2], "e": [0.25] * 18, "w": [0, 2, 2, 2, 2, 2], "r": [160]})
    assert a == b and a.id == b.id and a.to_ofa_dict()["d"][0] == 0 and a.to_ofa_dict()["w"][0] == 0
    x = images(1, 160)
    outs = []
    with torch.no_grad():
        for d0, w0 in ((0, 0), (1, 1), (1, 0), (0, 1)):
            net.set_active_subnet(d=[d0] + [2] * 4, e=[0.25] * 18, w=[w0] + [2] * 5)
            outs.append(net(x))
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    # inactive expand ratios are normalised too
    c = FAMILY.arch_from_dict({"d": [2, 0, 0, 0, 0], "e": [0.35] * 18, "w": [2] * 6, "r": 160})
    assert c.group("e") == [0.35, 0.35, 0.2, 0.2] * 2 + [0.35] * 4 + [0.2] * 2 + [0.35, 0.35, 0.2, 0.2]


def test_get_subnet_follows_the_supernet_mode_and_dtype():
    model = FAMILY.build_supernet(n_classes=10)
    assert model.family is FAMILY and model.width_mult == 1.0 and model.n_classes == 10
    model.double().train()
    sub = model.get_subnet({**MIN_DICT, "r": 128})
    assert sub.training and next(sub.parameters()).dtype == torch.float64
    model.set_active_subnet({**MIN_DICT, "r": 128})
    x = torch.randn(2, 3, 128, 128, dtype=torch.float64)
    assert model(x).shape == (2, 10)  # training-mode BN on sliced channels
    model.eval()
    assert not model.get_subnet({**MAX_DICT, "r": [128]}).training


# -- layout ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_classes", [1000, 10])
def test_layout_is_the_official_state_dict(n_classes):
    ref = {k: tuple(v.shape) for k, v in official_net(n_classes, randomise=False).state_dict().items()}
    ours = {k: tuple(v.shape) for k, v in FAMILY.build_supernet(n_classes).state_dict().items()}
    layout = FAMILY.ofa_layout(1.0, n_classes)
    assert layout == ref == ours
    assert list(layout) == list(ref) == list(ours)
    assert all(FAMILY.hwnas_key(k) == k for k in layout)


# -- costs ----------------------------------------------------------------------------------------
def exact_macs(subnet: torch.nn.Module, r: int) -> tuple[int, float]:
    """(MACs as exact integers by Once-for-All's formulas, Once-for-All's own float32-summed count).
    ``count_convNd``: C_in * output elements * k*k / groups; ``count_linear``: in * out; nothing else
    is counted. Once-for-All rounds each layer's count and the running sum to float32; replaying
    that rounding on the exact per-layer counts must give its number exactly."""
    per_layer: list[int] = []

    def conv(m, _, y):
        per_layer.append(m.in_channels * y.nelement() * m.kernel_size[0] * m.kernel_size[1] // m.groups)

    def linear(m, _, __):
        per_layer.append(m.in_features * m.out_features)

    hooks = [m.register_forward_hook(conv if isinstance(m, torch.nn.Conv2d) else linear)
             for m in subnet.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        subnet.eval()(torch.zeros(1, 3, r, r))
    for h in hooks:
        h.remove()
    total = torch.zeros(1)
    for v in per_layer:
        total = total + torch.zeros(1).fill_(v)
    return sum(per_layer), total.item()


@pytest.mark.parametrize("n_classes,n_archs", [(1000, 34), (10, 8)])
def test_counts_equal_once_for_all(n_classes, n_archs):
    net = official_net(n_classes, randomise=False)
    rng = np.random.default_rng(n_classes)
    rows = [GeneArch.from_codes(FAMILY, [128] + [0] * 29, 1.0).to_row(),
            FAMILY.arch_from_dict({**MAX_DICT, "r": 224}).to_row()]
    rows += [FAMILY.arch_from_dict({**d, "r": int(rng.choice(range(128, 225, 4)))}).to_row()
             for d in ofa_samples(net, n_archs // 2, seed=n_classes)]
    rows += FAMILY.sample_matrix(n_archs - len(rows), rng, [129, 131, 133, 140, 155, 200, 223, 224]).tolist()
    m = np.asarray(rows, dtype=np.int64)
    params, macs = FAMILY.count_params_macs(m, 1.0, n_classes)
    assert params.dtype == macs.dtype == np.int64
    for row, p, mac in zip(m, params, macs):
        arch = GeneArch.from_codes(FAMILY, row, 1.0)
        d = arch.to_ofa_dict()
        net.set_active_subnet(d=d["d"], e=d["e"], w=d["w"])
        sub = net.get_active_subnet(preserve_weight=False)
        assert p == ofa_utils.count_parameters(sub), arch.describe()
        ref, ofa_float = exact_macs(sub, arch.r)
        assert mac == ref, arch.describe()
        if n_classes == 10:  # Once-for-All's own counter (a deep copy and another forward)
            assert ofa_utils.count_net_flops(sub, (1, 3, arch.r, arch.r)) == ofa_float
    # the analytic counter is fast
    big = FAMILY.sample_matrix(20000, rng, OFA_RESOLUTIONS)
    p2, m2 = FAMILY.count_params_macs(big, 1.0, n_classes)
    assert len(p2) == len(m2) == 20000 and (p2 > 0).all() and (m2 > 0).all()


# -- genes and sampling ----------------------------------------------------------------------------
def test_gene_layout():
    assert FAMILY.name == "ofa-resnet50" and FAMILY.ofa_class == "OFAResNets"
    assert FAMILY.widths == (1.0,) and FAMILY.published == {1.0: "ofa_resnet50"}
    assert [(g.name, g.count, g.choices) for g in FAMILY.gene_groups()] == [
        ("d", 5, (0, 1, 2)), ("e", 18, (0.2, 0.25, 0.35)), ("w", 6, (0, 1, 2))]
    assert FAMILY.flat_columns()[:3] == ("r", "d_0", "d_1") and FAMILY.flat_columns()[-1] == "w_5"
    assert [g.by_index for g in FAMILY.gene_groups()] == [False, True, False]


def test_channel_tables_match_once_for_all():
    from ofa.utils import make_divisible as ofa_make_divisible

    from hwnas.channels import make_divisible

    for v in np.linspace(0.5, 3000, 20011):
        assert make_divisible(v) == ofa_make_divisible(v, 8)
    top = official_net(randomise=False)
    assert list(plan.STEM_MID) == top.input_stem[0].out_channel_list
    assert list(plan.STEM_OUT) == top.input_stem[2].out_channel_list
    for b, block in zip(plan.supernet_spec().blocks, top.blocks):
        assert list(plan.STAGE_WIDTHS[b.stage]) == block.out_channel_list
        for w, out in enumerate(block.out_channel_list):
            for e, ratio in enumerate(plan.E_CHOICES):
                block.active_out_channel, block.active_expand_ratio = out, ratio
                assert plan.MID[b.stage][w][e] == block.active_middle_channels
    # every expand ratio gives its own hidden width: distinct canonical rows are distinct networks
    assert all(len(set(row)) == len(row) for stage in plan.MID for row in stage)
    assert len(set(plan.STEM_OUT)) == 3 and all(len(set(s)) == 3 for s in plan.STAGE_WIDTHS)


def test_sampling_is_canonical_and_round_trips():
    rng = np.random.default_rng(0)
    m = FAMILY.sample_matrix(30000, rng, OFA_RESOLUTIONS)
    assert m.shape == (30000, 30) and m.dtype == np.int64
    assert np.array_equal(FAMILY.canonical(m), m)
    assert set(np.unique(m[:, 0])) == set(OFA_RESOLUTIONS)
    FAMILY.check_rows(m)
    for row in m[:300]:
        arch = GeneArch.from_codes(FAMILY, row, 1.0)
        back = FAMILY.arch_from_dict(arch.to_ofa_dict())
        assert back == arch and back.to_row() == tuple(row) and back.id == arch.id
    # uniform over distinct networks: the stem's twin choices collapse, depth d weighs 3^d
    assert set(np.unique(m[:, 1])) == {0, 2} and set(np.unique(m[:, 24])) == {0, 2}
    depth_freq = np.bincount(m[:, 2:6].ravel(), minlength=3) / m[:, 2:6].size
    assert np.allclose(depth_freq, np.array([1, 3, 9]) / 13, atol=0.01)
    active = FAMILY.active_mask(m)
    e = m[:, 6:24]
    assert (e[~active[:, 5:23]] == 0).all()
    assert np.allclose(np.bincount(e[active[:, 5:23]], minlength=3) / active[:, 5:23].sum(), 1 / 3, atol=0.01)


def test_bad_archs_are_one_clear_line():
    model = FAMILY.build_supernet(n_classes=10)
    good = {**MAX_DICT, "r": [160]}
    bad = [{**good, "d": [3, 2, 2, 2, 2]}, {**good, "e": [0.3] + [0.25] * 17}, {**good, "w": [0] * 5},
           {**good, "w": [0, 0, 0, 0, 0, 3]}, {k: v for k, v in good.items() if k != "e"},
           {**good, "r": [128, 160]}, {**good, "r": "big"}, [1, 2, 3]]
    for arch in bad:
        for call in (model.set_active_subnet, model.get_subnet):
            with pytest.raises(InputError) as err:
                call(arch)
            assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="d_1=7"):
        model.set_active_subnet(GeneArch.from_codes(FAMILY, [160, 2, 7] + [0] * 27, 1.0))
    with pytest.raises(InputError, match="e_0=5"):
        FAMILY.count_params_macs(np.array([[160] + [0] * 5 + [5] + [0] * 23]), 1.0, 1000)
    for call in (lambda: FAMILY.build_supernet(width_mult=1.2), lambda: FAMILY.ofa_layout(0.8),
                 lambda: FAMILY.count_params_macs(np.zeros((1, 30), dtype=int) + 128, 1.2, 1000),
                 lambda: FAMILY.build_supernet(n_classes=0)):
        with pytest.raises(InputError):
            call()


def test_gene_tools_do_not_import_torch():
    code = ("import sys, numpy as np; from hwnas.families import get_family; "
            "f = get_family('ofa-resnet50'); m = f.sample_matrix(5, np.random.default_rng(0), [160]); "
            "f.count_params_macs(m, 1.0, 1000); f.ofa_layout(1.0); "
            "f.arch_from_dict({'d': [2]*5, 'e': [0.2]*18, 'w': [1]*6, 'r': 160}); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
