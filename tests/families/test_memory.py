"""RAM arena and flash bytes (`hwnas.families.memory`): the planner against ExecuTorch's, the
families' traces against exported programs, `supernet stats --precision`, searching under limits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hwnas.families import family_names, get_family
from hwnas.families.memory import KB, family_memory, plan_arena
from hwnas.families.sampling import sample_mixed

FASHION = {"ks": [3, 5, 7], "e": [3, 4, 6], "d": [2, 3, 4], "r": [20, 24, 28, 32, 36, 40, 44], "width_mult": 1.0}


def test_the_planner_places_tensors_as_exir_greedy_does():
    assert plan_arena([64, 32], [0, 0], [1, 1]) == 96  # alive together: two buffers
    assert plan_arena([64, 32], [0, 2], [1, 3]) == 64  # one after the other: one buffer
    # the second 32 overlaps the first, not the 128: stacked above it inside the 128 buffer
    assert plan_arena([128, 32, 32], [0, 2, 2], [1, 3, 3]) == 128
    assert plan_arena([48, 32, 32], [0, 0, 0], [1, 1, 1]) == 112  # no room left above: new buffers
    assert plan_arena([], [], []) == 0


def test_the_shipped_space_spans_the_documented_arenas():
    """The smallest OFA-MobileNetV3 subnet at r20 and the largest at r44, fp32, 10 classes: the
    arenas ExecuTorch plans for them (70,400 and 371,712 bytes, measured)."""
    fam = get_family("ofa-mbv3")
    space = fam.space_from_dict(FASHION)
    m = space.to_matrix([space.min_arch(20), space.max_arch(44)])
    ram, flash = family_memory(fam, m, 1.0, 10)
    assert ram.tolist() == [70400, 371712]
    assert (ram / KB).tolist() == [68.75, 363.0]
    assert 8.0e6 < flash[0] < flash[1] < 2.6e7
    ram16, flash16 = family_memory(fam, m, 1.0, 10, "bf16")
    assert (flash16 * 2 == flash).all() and (ram16 < ram).all()
    ram8, flash8 = family_memory(fam, m, 1.0, 10, "int8")
    assert (flash8 < flash16).all() and (ram8 < ram16).all()


def test_memory_is_per_distinct_row_and_cached():
    fam = get_family("ofa-mbv3")
    space = fam.space_from_dict(FASHION)
    m = sample_mixed(space, 40, np.random.default_rng(0))
    cache: dict = {}
    ram, flash = family_memory(fam, np.concatenate([m, m]), 1.0, 10, cache=cache)
    assert len(cache) == len(np.unique(m, axis=0))
    assert (ram[:40] == ram[40:]).all() and (flash[:40] == flash[40:]).all()


_CASES = [(n, "fp32") for n in family_names() if get_family(n).has_memory_model] + [("ofa-mbv3", "bf16")]


@pytest.mark.parametrize("name,precision", _CASES)
def test_the_trace_equals_executorchs_memory_plan(name, precision):
    """One subnet per family exported with portable kernels (and an OFA-MobileNetV3 one in bf16,
    whose h_swish runs in fp32): ExecuTorch's planned arena, byte for byte; constants within 2% (a
    static subnet's fresh BN statistics are shared between equal tensors, which trained weights
    are not)."""
    pytest.importorskip("executorch.exir")
    import torch
    from executorch import exir

    from hwnas.devices.executorch_backend import program_memory

    fam = get_family(name)
    space = fam.space_from_dict({**fam.default_space().to_dict(), "r": [36 if precision == "bf16" else 32]})
    arch = space.from_matrix(sample_mixed(space, 1, np.random.default_rng(4)))[0]
    net = fam.static_subnet(arch, 10).eval()
    x = torch.randn(1, 3, arch.r, arch.r)
    if precision == "bf16":
        net, x = net.to(torch.bfloat16), x.to(torch.bfloat16)
    program = exir.to_edge(torch.export.export(net, (x,))).to_executorch()
    got = program_memory(program)
    ram, flash = family_memory(fam, space.to_matrix([arch]), space.width_mult, 10, precision)
    assert got["arena_bytes"] == int(ram[0])
    assert abs(got["constant_bytes"] / int(flash[0]) - 1) < 0.02


def test_stats_writes_ram_and_flash(tmp_path, capsys):
    from cli_calls import cli

    fam = get_family("ofa-mbv3")
    space = fam.space_from_dict(FASHION)
    from hwnas.accuracy.table import values_frame

    table, out = tmp_path / "t.csv", tmp_path / "o.csv"
    m = space.to_matrix([space.min_arch(20), space.max_arch(44)])
    values_frame(space, m).to_csv(table, index=False)
    code, text = cli(capsys, "supernet", "stats", "--table", str(table), "--out", str(out), "--classes", "10",
                     "--precision", "fp32")
    assert code == 0, text
    got = pd.read_csv(out)
    assert got["ram_kb"].tolist() == [68.75, 363.0] and (got["flash_kb"] > 8000).all()
    code, text = cli(capsys, "supernet", "stats", "--table", str(table), "--out", str(tmp_path / "x.csv"),
                     "--precision", "fp16")
    assert code == 2 and "--precision must be one of fp32, bf16, int8" in text
    assert not (tmp_path / "x.csv").exists()


def test_a_family_without_a_memory_model_says_so():
    """The tests' own TinyConvNet has none: one line, before anything is computed."""
    from family_runs import tiny_family_class

    from hwnas.errors import InputError
    from hwnas.families import registered_family
    from hwnas.families.tables import stats_frame

    with registered_family(tiny_family_class()) as fam:
        assert not fam.has_memory_model
        with pytest.raises(InputError, match="has no memory model"):
            stats_frame(fam, pd.DataFrame(), precision="fp32")
        with pytest.raises(InputError, match="has no memory model"):
            family_memory(fam, np.zeros((1, 3), dtype=np.int64), 1.0, 10)


def test_a_search_under_a_ram_limit_returns_subnets_within_it():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "search"))
    from search_stubs import MacsLatency, SynthAccuracy

    from hwnas.search.algorithms import SearchRequest, get_algorithm
    from hwnas.search.problem import Problem

    fam = get_family("ofa-mbv3")
    space = fam.space_from_dict(FASHION)
    lat = MacsLatency()
    budget = float(np.quantile(lat.predict(space.sample_matrix(400, 0)), 0.8))
    ram_all, _ = family_memory(fam, sample_mixed(space, 300, np.random.default_rng(1)), 1.0, 10)
    limit = float(np.quantile(ram_all, 0.3)) / KB
    problem = Problem(space, SynthAccuracy(), {"dev": lat}, {"dev": budget}, objectives=("top1", "ms:dev", "ram"),
                      n_classes=10, max_ram_kb=limit, max_flash_kb=1e6)
    assert problem.objectives == ("top1", "ms:dev", "ram_kb")
    assert problem.cost_models.paths() == {"ms:dev": "table", "ram_kb": "direct", "flash_kb": "table"}
    out, _ = get_algorithm("nsga2").run(problem, SearchRequest(Path("."), seed=0, pareto=True, population=40,
                                                                generations=8))
    m = out.archive.m
    feasible = problem.costs(m)[1] == 0
    assert feasible.any()
    ram, _ = family_memory(fam, m[feasible], 1.0, 10)
    assert (ram / KB <= limit).all()


def test_memory_limits_are_checked_as_settings():
    from hwnas.search.checks import SettingError
    from hwnas.search.settings import SearchSettings

    with pytest.raises(SettingError, match="max_ram_kb must be a positive number of kB"):
        SearchSettings("cpu-ort", 1.0, max_ram_kb=-5)
    assert SearchSettings("cpu-ort", 1.0, objectives=("top1", "ms:cpu-ort", "flash")).goals.objectives[-1] == "flash_kb"
