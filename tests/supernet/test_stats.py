"""Analytic parameter/MAC counts: Once-for-All's published numbers, and agreement with built networks."""

from __future__ import annotations


import numpy as np
import pytest
import torch
import torch.nn as nn

from hwnas.errors import InputError, TableError
from hwnas.space import Arch, SearchSpace, archs_to_frame
from hwnas.supernet import MobileNetV3Subnet, count_macs, count_params, make_divisible, stats_frame

# (which, W, r, params, MACs) from OFA_MBV3.md, 1000 classes.
CHECK_VALUES = [
    ("max", 1.0, 224, 7_664_760, 566_170_656),
    ("max", 1.0, 128, 7_664_760, 188_248_320),
    ("min", 1.0, 128, 3_410_792, 41_476_224),
    ("min", 1.0, 224, 3_410_792, 121_278_672),
    ("max", 1.2, 224, 10_701_632, 843_101_040),
    ("min", 1.2, 128, 4_602_456, 65_536_896),
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Two-thread torch collapses when another process holds a core (shared CI machines): use one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _check_arch(which: str, w: float, r: int) -> Arch:
    space = SearchSpace(width_mult=w)
    return space.max_arch(r) if which == "max" else space.min_arch(r)


def built_counts(model: nn.Module, r: int) -> tuple[int, int]:
    """Params by summing numel; MACs with forward hooks on every Conv2d/Linear, in exact ints."""
    macs = 0

    def conv_hook(m: nn.Conv2d, inputs, out: torch.Tensor) -> None:
        nonlocal macs
        kh, kw = m.kernel_size
        macs += out.shape[1] * out.shape[2] * out.shape[3] * (m.in_channels // m.groups) * kh * kw

    def linear_hook(m: nn.Linear, inputs, out: torch.Tensor) -> None:
        nonlocal macs
        macs += m.in_features * m.out_features

    handles = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            handles.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            handles.append(m.register_forward_hook(linear_hook))
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, r, r))
    for h in handles:
        h.remove()
    return sum(p.numel() for p in model.parameters()), macs


@pytest.mark.parametrize("which,w,r,params,macs", CHECK_VALUES)
def test_analytic_counts_match_ofa(which: str, w: float, r: int, params: int, macs: int) -> None:
    arch = _check_arch(which, w, r)
    assert count_params(arch) == params
    assert count_macs(arch) == macs
    assert isinstance(count_macs(arch), int)


@pytest.mark.parametrize("which,w,r,params,macs", CHECK_VALUES)
def test_built_subnet_counts_match_ofa(which: str, w: float, r: int, params: int, macs: int) -> None:
    assert built_counts(MobileNetV3Subnet(_check_arch(which, w, r)), r) == (params, macs)


def test_analytic_equals_built_for_random_archs() -> None:
    rng = np.random.default_rng(0)
    for i in range(20):
        w = (1.0, 1.2)[i % 2]
        n_classes = (10, 1000)[(i // 2) % 2]
        space = SearchSpace(width_mult=w, r_choices=tuple(range(32, 129, 4)))
        arch = space.sample(rng=rng)
        built = built_counts(MobileNetV3Subnet(arch, n_classes=n_classes), arch.r)
        assert (count_params(arch, n_classes), count_macs(arch, n_classes)) == built, arch.to_json()


def test_odd_resolution_follows_conv_arithmetic() -> None:
    arch = SearchSpace().sample(rng=3)
    for r in (33, 37, 61):
        odd = Arch(arch.ks, arch.e, arch.d, r)
        assert (count_params(odd, 10), count_macs(odd, 10)) == built_counts(MobileNetV3Subnet(odd, 10), r)


def test_stats_frame_matches_single_counts_for_a_whole_table() -> None:
    """Behaviour only: speed is a benchmark's business (a busy machine must not fail the suite)."""
    archs = SearchSpace().sample(1000, rng=1)
    df = archs_to_frame(archs)
    df["latency_ms"] = np.arange(len(df), dtype=float)
    out = stats_frame(df, width_mult=1.0, n_classes=1000)
    assert list(out.columns[-3:]) == ["latency_ms", "params", "macs"]
    assert "params" not in df.columns  # input left untouched
    for i in range(0, 1000, 97):
        assert out["params"].iat[i] == count_params(archs[i])
        assert out["macs"].iat[i] == count_macs(archs[i])


def test_stats_frame_inputs_and_widths() -> None:
    archs = SearchSpace(width_mult=1.2).sample(20, rng=2) + SearchSpace().sample(20, rng=3)
    out = stats_frame(archs, n_classes=10)  # each Arch counted at its own width
    assert out["params"].tolist() == [count_params(a, 10) for a in archs]
    assert out["macs"].tolist() == [count_macs(a, 10) for a in archs]
    m = SearchSpace.to_matrix(archs[:20])
    from_matrix = stats_frame(m, width_mult=1.2, n_classes=10)
    assert from_matrix["macs"].tolist() == out["macs"].tolist()[:20]


def test_stats_frame_rejects_bad_tables() -> None:
    df = archs_to_frame(SearchSpace().sample(3, rng=0))
    with pytest.raises(TableError, match="ks_3"):
        stats_frame(df.drop(columns=["ks_3"]))
    bad = df.copy()
    bad.loc[1, "d_2"] = 7
    with pytest.raises(TableError, match="row 2, column d_2"):
        stats_frame(bad)
    bad = df.astype(object)
    bad.loc[0, "r"] = "big"
    with pytest.raises(TableError, match="row 1, column r"):
        stats_frame(bad)
    with pytest.raises(InputError):
        stats_frame("not a table")
    with pytest.raises(InputError):
        count_macs({"ks": [3] * 20})


def test_make_divisible_is_ofas_rule() -> None:
    assert [make_divisible(v) for v in (16 * 1.2, 24 * 1.2, 112 * 1.2, 960 * 1.2, 3, 30, 35, 36)] == \
        [24, 32, 136, 1152, 8, 32, 32, 40]
