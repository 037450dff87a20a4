"""The search space: canonical form, exact round-trips, sampling, size, encoding."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwnas.errors import InputError, TableError
from hwnas.space import (FLAT_COLUMNS, N_SLOTS, Arch, SearchSpace, read_arch_table,
                         write_arch_table)

SPACE = SearchSpace()

raw_archs = st.builds(
    lambda ks, e, d, r: Arch(tuple(ks), tuple(e), tuple(d), r),
    st.lists(st.sampled_from([3, 5, 7]), min_size=20, max_size=20),
    st.lists(st.sampled_from([3, 4, 6]), min_size=20, max_size=20),
    st.lists(st.sampled_from([2, 3, 4]), min_size=5, max_size=5),
    st.sampled_from(SPACE.r_choices),
)


@given(raw_archs, st.data())
def test_unused_slots_do_not_change_identity(arch, data):
    """Any values in slots past a stage's depth build the same network: same arch, same id."""
    ks, e = list(arch.ks), list(arch.e)
    for i in range(N_SLOTS):
        if not arch.used(i):
            ks[i] = data.draw(st.sampled_from([3, 5, 7]))
            e[i] = data.draw(st.sampled_from([3, 4, 6]))
    other = Arch(tuple(ks), tuple(e), arch.d, arch.r)
    assert other == arch and other.id == arch.id and hash(other) == hash(arch)


@given(raw_archs, st.integers(0, N_SLOTS - 1))
def test_used_slot_change_changes_identity(arch, slot):
    if not arch.used(slot):
        return
    ks = list(arch.ks)
    ks[slot] = 5 if ks[slot] != 5 else 7
    other = Arch(tuple(ks), arch.e, arch.d, arch.r)
    assert other != arch and other.id != arch.id


@given(raw_archs)
def test_round_trips_are_exact(arch):
    assert Arch.from_ofa_dict(arch.to_ofa_dict()) == arch
    assert Arch.from_ofa_dict(json.loads(json.dumps(arch.to_ofa_dict()))).to_ofa_dict() == arch.to_ofa_dict()
    assert Arch.from_json(arch.to_json()) == arch
    assert Arch.from_row(arch.to_row()) == arch
    assert Arch.from_row(arch.to_row()).to_row() == arch.to_row()
    assert arch in SPACE


@given(raw_archs, st.sampled_from([1.0, 1.2]))
def test_width_multiplier_is_part_of_identity(arch, w):
    wide = Arch(arch.ks, arch.e, arch.d, arch.r, w)
    assert Arch.from_json(wide.to_json()) == wide
    assert (wide.id == arch.id) == (w == 1.0)


def test_ofa_dict_format():
    arch = SPACE.max_arch()
    d = arch.to_ofa_dict()
    assert set(d) == {"ks", "e", "d", "r"} and d["r"] == [224]
    assert len(d["ks"]) == 20 and len(d["e"]) == 20 and len(d["d"]) == 5
    assert Arch.from_ofa_dict({**d, "r": 224}) == arch  # a bare int resolution is accepted too


def test_size_is_exact():
    assert SPACE.stage_count() == 9**2 + 9**3 + 9**4 == 7371
    assert SPACE.size(per_resolution=True) == 7371**5
    assert SPACE.size() == 7371**5 * 25
    small = SearchSpace(ks_choices=(3,), e_choices=(3, 6), d_choices=(1, 2), r_choices=(32,))
    # brute force: per stage, depth 1 -> 2 configs, depth 2 -> 4 configs
    assert small.size() == (2 + 4) ** 5


def test_sampling_is_uniform_over_networks():
    """Depth d must be drawn with weight 9^d (not 1/3), else deep stages are under-sampled."""
    m = SPACE.sample_matrix(60_000, rng=0)
    d = m[:, 41:46].ravel()
    freq = Counter(d.tolist())
    total = 81 + 729 + 6561
    for depth, weight in ((2, 81), (3, 729), (4, 6561)):
        assert abs(freq[depth] / len(d) - weight / total) < 0.01
    # used slots uniform over choices; unused slots carry the filler
    archs = SPACE.from_matrix(m[:2000])
    assert all(a in SPACE for a in archs)
    assert np.array_equal(SPACE.to_matrix(archs), m[:2000])


def test_training_draws_every_gene_uniformly():
    """Training's draw (Once-for-All's): each stage's depth uniform, so depth 1 is trained as often
    as depth 4 in a space that has it."""
    space = SearchSpace(d_choices=(1, 2, 3, 4))
    m = space.sample_genes_matrix(20_000, rng=0)
    freq = Counter(m[:, 41:46].ravel().tolist())
    assert all(abs(freq[d] / (5 * len(m)) - 0.25) < 0.01 for d in (1, 2, 3, 4))
    archs = space.from_matrix(m[:500])
    assert all(a in space for a in archs) and np.array_equal(space.to_matrix(archs), m[:500])
    assert np.array_equal(space.sample_genes_matrix(5, 3), space.sample_genes_matrix(5, 3))


def test_sampling_is_seeded():
    assert SPACE.sample(5, rng=7) == SPACE.sample(5, rng=7)
    assert SPACE.sample(5, rng=7) != SPACE.sample(5, rng=8)


def test_mutation_and_crossover_stay_in_space():
    rng = np.random.default_rng(0)
    parents = SPACE.sample(50, rng)
    children = [SPACE.mutate(p, rng, prob=0.5) for p in parents]
    children += [SPACE.crossover(a, b, rng) for a, b in zip(parents, parents[1:])]
    assert all(c in SPACE for c in children)
    assert sum(c != p for c, p in zip(children, parents)) > 40
    assert SPACE.mutate(parents[0], rng, prob=0.0) == parents[0]
    assert SPACE.crossover(parents[0], parents[0], rng) == parents[0]


def test_min_max_and_custom_space():
    assert SPACE.min_arch().describe().startswith("r128 | 3x3 3x3 /")
    assert SPACE.max_arch().d == (4,) * 5 and SPACE.max_arch().r == 224
    small = SearchSpace.from_dict({"r": "32:64:4", "width_mult": 1.2})
    assert small.r_choices == (32, 36, 40, 44, 48, 52, 56, 60, 64)
    a = small.sample(rng=1)
    assert a in small and a not in SPACE and a.w == 1.2


def test_encode_is_vectorised_and_correct():
    archs = SPACE.sample(100_000, rng=0)
    x = SPACE.encode(archs)
    assert x.shape == (100_000, 20 * 6 + 15 + 25)
    # each used slot has exactly one kernel and one expand bit; unused slots none
    a = archs[0]
    slots = x[0, :120].reshape(20, 6)
    for i in range(N_SLOTS):
        assert slots[i].sum() == (2 if a.used(i) else 0)
    assert x[0, 120:135].sum() == 5 and x[0, 135:].sum() == 1
    o = SPACE.encode(archs[:10], kind="ordinal")
    assert o.shape == (10, 46) and o[0, -1] == a.r
    assert len(SPACE.encoding_names()) == x.shape[1]


def test_bad_archs_raise_input_errors():
    with pytest.raises(InputError, match="20 kernel sizes"):
        Arch((3,) * 19, (3,) * 20, (2,) * 5, 128)
    with pytest.raises(InputError, match="d\\[0\\]=5"):
        Arch((3,) * 20, (3,) * 20, (5, 2, 2, 2, 2), 128)
    with pytest.raises(InputError, match="integer"):
        Arch((3,) * 20, (3,) * 20, (2,) * 5, "big")
    with pytest.raises(InputError, match="missing"):
        Arch.from_ofa_dict({"ks": [3] * 20})
    with pytest.raises(InputError, match="outside the search space: ks\\[0\\]=9"):
        SPACE.validate(Arch((9,) + (3,) * 19, (3,) * 20, (2,) * 5, 128))


def test_another_familys_arch_is_refused_in_one_line():
    """A ResNet50 or ProxylessNAS dict given to a MobileNetV3 run (`from_ofa_dict` builds that
    family's arch) is named as such, not sliced into this family's 46 columns."""
    resnet = Arch.from_ofa_dict({"d": [0] * 5, "e": [0.2] * 18, "w": [0] * 6, "r": [128]})
    proxyless = Arch.from_ofa_dict({"ks": [3] * 21, "e": [3] * 21, "d": [2] * 6, "r": [128]})
    for other, name in ((resnet, "ofa-resnet50"), (proxyless, "ofa-proxyless")):
        assert other not in SPACE
        with pytest.raises(InputError, match=f"it is an {name} arch, not an ofa-mbv3 one") as err:
            SPACE.validate(other)
        assert "\n" not in str(err.value)


def test_table_round_trip_and_errors(tmp_path):
    archs = SPACE.sample(50, rng=3)
    path = tmp_path / "t.csv"
    write_arch_table(path, archs, extra={"ms": np.arange(50.0)})
    back, df = read_arch_table(path, SPACE)
    assert back == archs and list(df.columns[:46]) == list(FLAT_COLUMNS) and "ms" in df

    lines = path.read_text().splitlines()
    cells = lines[3].split(",")
    cells[FLAT_COLUMNS.index("ks_0")] = "x"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:3] + [",".join(cells)] + lines[4:]) + "\n")
    with pytest.raises(TableError, match="row 3, column ks_0: 'x' is not an integer"):
        read_arch_table(bad)

    cells = lines[2].split(",")
    cells[FLAT_COLUMNS.index("r")] = "999"
    bad.write_text("\n".join(lines[:2] + [",".join(cells)] + lines[3:]) + "\n")
    with pytest.raises(TableError, match="row 2: column r: 999 is not one of"):
        read_arch_table(bad, SPACE)

    bad.write_text("r,ks_0\n128,3\n")
    with pytest.raises(TableError, match="lacks the column"):
        read_arch_table(bad)
    with pytest.raises(TableError, match="does not exist"):
        read_arch_table(tmp_path / "nope.csv")
