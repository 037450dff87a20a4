"""The families through the commands users run: import Once-for-All's published supernets of every
registered family that has them (`Family.published`), load them, take subnets by Once-for-All's
arch dicts, count params/MACs of a table; for every family (`family_runs.every_family`, the
test-only one too): describe the space, refuse bad tables in one line, evaluate a table of subnets.
Once-for-All's own code (dev extra) is the reference where there is one."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pandas as pd
import pytest
import torch

from hwnas.families import family_names, get_family
from hwnas.space import Arch
from hwnas.supernet.pretrained import load_supernet

TOL = 1e-4
#: the registered families Once-for-All publishes supernets of (the others have no reference)
PUBLISHED = [name for name in family_names() if get_family(name).published]


def published_width(fam) -> float:
    return next(iter(fam.published))


def official_net(fam, **kw):
    """Once-for-All's own supernet of `fam` at its first published width (skipped without `ofa`)."""
    from ofa_reference import official_supernet

    return official_supernet(fam.ofa_class, published_width(fam), **kw)


def cli(capsys, *args: str) -> tuple[int, list[str]]:
    from hwnas.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    captured = capsys.readouterr()
    return done.value.code, [line for line in (captured.out + captured.err).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """{family: (official net, its file as ofa_net loads it, the imported hwnas stem)}."""
    from hwnas.supernet.ofa_import import import_ofa_checkpoint

    folder = tmp_path_factory.mktemp("ofa")
    out = {}
    for family in PUBLISHED:
        fam = get_family(family)
        net = official_net(fam, seed=7)
        path = folder / fam.published[published_width(fam)]
        torch.save({"state_dict": net.state_dict(), "epoch": 120}, path)
        stem = folder / f"{family}-imported"
        import_ofa_checkpoint(path, stem, width_mult=published_width(fam), family=family)
        out[family] = (net, path, stem)
    return out


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("family", PUBLISHED)
def test_imported_supernet_gives_once_for_alls_outputs(imported, family):
    """What a user does: load the checkpoint, pass Once-for-All's arch dict plus r (also through
    `Arch.from_ofa_dict`), compare with Once-for-All's own subnet."""
    net, _, stem = imported[family]
    model, meta = load_supernet(stem)
    assert meta["family"] == family and meta["n_classes"] == 1000 and model.family.name == family
    random.seed(3)
    torch.manual_seed(3)
    worst = 0.0
    for i in range(4):
        arch = net.sample_active_subnet()
        r = random.choice(range(128, 225, 4))
        x = torch.randn(1, 3, r, r)
        net.set_active_subnet(**arch)
        with torch.no_grad():
            want = net(x)
            mine = model.get_subnet({**arch, "r": [r]}).eval()(x) if i % 2 == 0 else \
                model.get_subnet(Arch.from_ofa_dict({**arch, "r": [r]}, w=published_width(model.family))).eval()(x)
        worst = max(worst, rel_diff(mine, want))
    assert worst <= TOL, worst


@pytest.mark.parametrize("family", PUBLISHED)
def test_a_file_of_another_family_is_one_line(family, imported, tmp_path, capsys):
    """A family's published file imported as the next published family: one line naming its own."""
    fam = get_family(family)
    other = PUBLISHED[(PUBLISHED.index(family) + 1) % len(PUBLISHED)]
    _, path, _ = imported[family]
    code, lines = cli(capsys, "supernet", "import", "--from-ofa", str(path), "--family", other,
                      "--out", str(tmp_path / "x"))
    assert code == 2 and len(lines) == 1, lines
    assert f"looks like {fam.title} W={published_width(fam)} (--family {family}" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("family", PUBLISHED)
def test_stats_of_a_table_of_once_for_all_arch_dicts(family, tmp_path, capsys):
    """A table flattened from Once-for-All's arch dicts (values, ResNet's expand ratios as floats)
    gets the family's exact counts, which equal Once-for-All's on its extracted subnets."""
    fam = get_family(family)
    width = published_width(fam)
    net = official_net(fam, n_classes=10, randomise=False)
    from ofa.utils import count_net_flops, count_parameters

    random.seed(0)
    rows, reference = [], []
    for i in range(6):
        arch = net.sample_active_subnet()
        r = random.choice(range(128, 225, 4))
        rows.append({"r": r, **{f"{k}_{j}": v for k in arch for j, v in enumerate(arch[k])}})
        if i < 2:
            net.set_active_subnet(**arch)
            sub = net.get_active_subnet().double()
            torch.set_default_dtype(torch.float64)  # Once-for-All sums in float32: exact in float64
            try:
                reference.append((count_parameters(sub), int(count_net_flops(sub, (1, 3, r, r)))))
            finally:
                torch.set_default_dtype(torch.float32)
    table, out = tmp_path / "t.csv", tmp_path / "stats.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    code, lines = cli(capsys, "supernet", "stats", "--family", family, "--table", str(table),
                      "--classes", "10", "--out", str(out))
    assert code == 0, lines
    got = pd.read_csv(out)
    assert list(got.columns) == list(fam.flat_columns()) + ["params", "macs"]
    m = fam.table_codes(pd.DataFrame(rows))
    params, macs = fam.count_params_macs(m, width, 10)
    assert got["params"].tolist() == params.tolist() and got["macs"].tolist() == macs.tolist()
    assert [tuple(x) for x in got[["params", "macs"]].to_numpy()[:2]] == reference


def test_bad_tables_are_one_line(family, tmp_path, capsys):
    """r outside 16..512, and per gene group a gene its row runs set outside the choices: one line
    naming the row, the column and the value."""
    from hwnas.accuracy.table import values_frame

    space = family.space_from_dict({"r": [160]})
    m = space.sample_matrix(1, 0)
    active = family.active_mask(m)[0]
    good = values_frame(space, m).iloc[0].to_dict()
    cases = [("r", 7)]
    for g, sl in zip(family.gene_groups(), family.group_slices().values()):
        cases.append((next(c for c, on in zip(g.columns, active[sl.start - 1:sl.stop - 1]) if on), max(g.choices) + 1))
    for column, value in cases:
        pd.DataFrame([{**good, column: value}]).to_csv(tmp_path / "t.csv", index=False)
        code, lines = cli(capsys, "supernet", "stats", "--family", family.name, "--table", str(tmp_path / "t.csv"),
                          "--out", str(tmp_path / "o.csv"))
        assert code == 2 and len(lines) == 1, lines
        assert re.search(rf"row 1\W+column {column}: {re.escape(repr(value))} is not (one of|a resolution)", lines[0]), lines[0]
        assert not (tmp_path / "o.csv").exists()


def test_space_info_describes_the_family(family, capsys):
    code, lines = cli(capsys, "space", "info", "--family", family.name, "--json")
    assert code == 0
    info = json.loads("\n".join(lines))
    assert {k: v["count"] for k, v in info["genes"].items()} == {g.name: g.count for g in family.gene_groups()}
    count = family.networks_per_resolution()  # printed as a string: JSON readers lose big integers
    assert info["networks_per_resolution"] == (None if count is None else str(count))
    assert info["columns"] == list(family.flat_columns())


def test_a_space_file_narrows_any_familys_space(family, tmp_path, capsys):
    first = family.gene_groups()[0]
    (tmp_path / "space.yaml").write_text(f"{first.name}: [{first.choices[0]!r}]\nr: '32:40:4'\n")
    code, lines = cli(capsys, "space", "info", "--family", family.name, "--space", str(tmp_path / "space.yaml"),
                      "--format", "json")
    assert code == 0, lines
    info = json.loads("\n".join(lines))
    assert info["genes"][first.name]["choices"] == [first.choices[0]] and info["resolutions"] == [32, 36, 40]
    (tmp_path / "bad.yaml").write_text("nonsense: [1]\n")
    code, lines = cli(capsys, "space", "sample", "--family", family.name, "--space", str(tmp_path / "bad.yaml"))
    assert code == 2 and len(lines) == 1 and "nonsense" in lines[0], lines


def test_supernet_eval_takes_any_familys_table(family, family_supernet, tmp_path, capsys):
    """`hwnas supernet eval --checkpoint STEM --table CSV --data ...` on a tiny supernet of the
    family: the table in its own columns (index-coded genes as values), rows with top-1 back in the
    same layout."""
    from PIL import Image

    from hwnas.accuracy.table import values_frame

    stem = family_supernet(family.name)
    for split, n in (("train", 3), ("val", 1)):
        for name in ("1", "2"):
            (tmp_path / "img" / split / name).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(np.full((40, 40, 3), 60 * int(name), np.uint8)).save(
                    tmp_path / "img" / split / name / f"{i}.png")
    space = family.space_from_dict({"r": [32]})
    table = values_frame(space, space.sample_matrix(2, 1))
    table.to_csv(tmp_path / "t.csv", index=False)
    code, lines = cli(capsys, "supernet", "eval", "--checkpoint", str(stem), "--table", str(tmp_path / "t.csv"),
                      "--data", f"imagefolder:{tmp_path / 'img'}", "--split", "test", "--out", str(tmp_path / "o.csv"))
    assert code == 0, lines
    out = pd.read_csv(tmp_path / "o.csv")
    assert list(out.columns) == list(family.flat_columns()) + ["top1", "loss"] and len(out) == 2
    pd.testing.assert_frame_equal(out[table.columns], table, check_dtype=False)  # values as written
    assert out["top1"].between(0, 100).all()
