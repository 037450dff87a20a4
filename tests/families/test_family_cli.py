"""The families through the commands users run: import Once-for-All's published ProxylessNAS and
ResNet50 supernets, load them, take subnets by Once-for-All's arch dicts, count params/MACs of a
table, describe the space. Once-for-All's own code (dev extra) is the reference."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("ofa.imagenet_classification.elastic_nn.networks",
                    reason="Once-for-All's code (pip extra dev: ofa) is not installed")

from ofa_reference import official_proxyless, official_resnet50  # noqa: E402

from hwnas.families import get_family  # noqa: E402
from hwnas.space import Arch  # noqa: E402
from hwnas.supernet.pretrained import load_supernet  # noqa: E402

TOL = 1e-4
CASES = {  # family -> (official net builder, --width-mult, published file name)
    "ofa-proxyless": (official_proxyless, 1.3, "ofa_proxyless_d234_e346_k357_w1.3"),
    "ofa-resnet50": (official_resnet50, 1.0, "ofa_resnet50"),
}


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
    for family, (build, width, name) in CASES.items():
        net = build(seed=7)
        path = folder / name
        torch.save({"state_dict": net.state_dict(), "epoch": 120}, path)
        stem = folder / f"{family}-imported"
        import_ofa_checkpoint(path, stem, width_mult=width, family=family)
        out[family] = (net, path, stem)
    return out


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("family", list(CASES))
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
                model.get_subnet(Arch.from_ofa_dict({**arch, "r": [r]}, w=CASES[family][1])).eval()(x)
        worst = max(worst, rel_diff(mine, want))
    assert worst <= TOL, worst


def test_a_file_of_another_family_is_one_line(imported, tmp_path, capsys):
    _, path, _ = imported["ofa-resnet50"]
    code, lines = cli(capsys, "supernet", "import", "--from-ofa", str(path), "--family", "ofa-proxyless",
                      "--out", str(tmp_path / "x"))
    assert code == 2 and len(lines) == 1, lines
    assert "looks like OFA-ResNet50 W=1.0 (--family ofa-resnet50" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("family", list(CASES))
def test_stats_of_a_table_of_once_for_all_arch_dicts(family, tmp_path, capsys):
    """A table flattened from Once-for-All's arch dicts (values, ResNet's expand ratios as floats)
    gets the family's exact counts, which equal Once-for-All's on its extracted subnets."""
    from ofa.utils import count_net_flops, count_parameters

    fam = get_family(family)
    build, width, _ = CASES[family]
    net = build(n_classes=10, randomise=False)
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


@pytest.mark.parametrize("family, column, value, expected", [
    ("ofa-resnet50", "e_0", 0.3, r"row 1, column e_0: 0\.3 is not one of \[0\.2, 0\.25, 0\.35\]"),
    ("ofa-proxyless", "d_2", 5, r"row 1, column d_2: 5 is not one of \[2, 3, 4\]"),
    ("ofa-proxyless", "r", 7, r"row 1, column r: 7 is not a resolution"),
])
def test_bad_tables_are_one_line(family, column, value, expected, tmp_path, capsys):
    fam = get_family(family)
    row = dict(zip(fam.flat_columns(), fam.sample_matrix(1, np.random.default_rng(0), [160])[0]))
    row = {k: (fam.gene_groups()[1].choices[v] if family == "ofa-resnet50" and k.startswith("e_") else v)
           for k, v in row.items()}
    row[column] = value
    pd.DataFrame([row]).to_csv(tmp_path / "t.csv", index=False)
    code, lines = cli(capsys, "supernet", "stats", "--family", family, "--table", str(tmp_path / "t.csv"),
                      "--out", str(tmp_path / "o.csv"))
    assert code == 2 and len(lines) == 1, lines
    import re

    assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("family, genes", [("ofa-proxyless", {"ks": 21, "e": 21, "d": 6}),
                                           ("ofa-resnet50", {"d": 5, "e": 18, "w": 6})])
def test_space_info_describes_the_family(family, genes, capsys):
    import json

    code, lines = cli(capsys, "space", "info", "--family", family, "--json")
    assert code == 0
    info = json.loads("\n".join(lines))
    assert {k: v["count"] for k, v in info["genes"].items()} == genes
    assert int(info["networks_per_resolution"]) > 10**10


def test_supernet_eval_takes_any_familys_table(imported, tmp_path, capsys):
    """`hwnas supernet eval --checkpoint STEM --table CSV --data ...` on a ResNet50 supernet: the
    table in its own columns (expand ratios as values), rows with top-1 back in the same layout."""
    from PIL import Image

    _, _, stem = imported["ofa-resnet50"]
    fam = get_family("ofa-resnet50")
    for split, n in (("train", 3), ("val", 1)):
        for name in ("1", "2"):
            (tmp_path / "img" / split / name).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(np.full((40, 40, 3), 60 * int(name), np.uint8)).save(
                    tmp_path / "img" / split / name / f"{i}.png")
    rows = [dict(zip(fam.flat_columns(), row)) for row in fam.sample_matrix(2, np.random.default_rng(1), [128])]
    for row in rows:
        for j in range(18):
            row[f"e_{j}"] = fam.gene_groups()[1].choices[row[f"e_{j}"]]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    code, lines = cli(capsys, "supernet", "eval", "--checkpoint", str(stem), "--table", str(tmp_path / "t.csv"),
                      "--data", f"imagefolder:{tmp_path / 'img'}", "--split", "test", "--out", str(tmp_path / "o.csv"))
    assert code == 0, lines
    out = pd.read_csv(tmp_path / "o.csv")
    assert list(out.columns) == list(fam.flat_columns()) + ["top1", "loss"] and len(out) == 2
    assert out["e_0"].isin([0.2, 0.25, 0.35]).all() and out["top1"].between(0, 100).all()
