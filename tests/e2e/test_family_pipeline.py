"""Every stage for every family (`family_runs.every_family`: the registry and the test-only
TinyConvNet): one run per family on a tiny, briefly trained supernet.

`hwnas train --family F` (progressive shrinking with the family's phases, MNIST-embedded, r 32-40),
then as a user would: profile (with lookup-table entries where the family has few), latency fit
(the chosen predictor, the analytic model and the lookup table), accuracy table, search with
verification (measured latency and top-1), export with verification, and the dashboard's readers on
the run. The accuracy of a few training steps means nothing; that each stage runs on each family's
run and keeps its columns is the point.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_calls import cli, export_verified

pytestmark = pytest.mark.slow

TINY = ["phases.full.epochs=1", "phases.kernel.epochs=1", "phases.depth.epochs=1",
        "phases.expand.epochs=1", "phases.width={epochs: 1, lr: 0.01}", "max_steps_per_epoch=1",
        "data.batch_size=8", "eval_batches=1", "bn_batches=1", "threads=1", "space.r=32:40:4",
        "data.name=mnist-embedded"]  # 500 validation and 500 test images: the embedded default's
# 5,000 / 10,000 made the ResNet50 run spend 10 of its 11 minutes evaluating
#: `profile --blocks` times every lookup-table entry of the run's space; a family with more than this
#: many is covered on a narrowed space (tests/latency/test_families_latency.py, every family) and
#: OFA-MobileNetV3's whole space in tests/test_profile.py. (At 600, the OFA-MobileNetV3 and
#: ProxylessNAS runs here timed ~500 entries each: 100 of their ~190 s.)
MAX_BLOCK_ENTRIES = 100


def block_entries_bound(space, n_classes: int) -> int:
    """At most how many entries `profile --blocks` times: 3 resolutions x, per part of the family's
    cost layout, the product of its key genes' choices."""
    layout = space.family.cost_layout(space.width_mult, n_classes)
    choices = space.column_choices()
    return 3 * sum(int(np.prod([len(choices[c]) for c in part.columns[1:]])) for part in layout.parts)


def test_every_stage_runs_on_a_run_of_the_family(family, tmp_path, capsys):
    from hwnas.supernet.checkpoint import load_checkpoint_meta

    fam, family = family, family.name
    sets = [x for item in TINY for x in ("--set", item)]
    code, out = cli(capsys, "train", "--family", family, "--out", str(tmp_path / "sn"), *sets)
    assert code == 0, out
    stem = tmp_path / "sn" / "supernet"
    run = tmp_path / "run"

    space = fam.space_from_dict(load_checkpoint_meta(stem)["space"])
    blocks = ["--blocks"] if block_entries_bound(space, 10) <= MAX_BLOCK_ENTRIES else []
    code, out = cli(capsys, "profile", "--run", str(run), "--supernet", str(stem), "--device", "cpu-ort",
                    "--samples", "8", "--rounds", "3", "--runs", "3", *blocks)
    assert code == 0, out
    ms = pd.read_parquet(run / "measurements.parquet")
    subnets = ms[ms["kind"] == "subnet"]
    assert len(subnets) == 8 and set(fam.flat_columns()) <= set(ms.columns)
    m = fam.table_codes(subnets)  # the store holds the family's own rows, values as in its CSVs
    params, macs = fam.count_params_macs(m, space.width_mult, 10)
    assert (subnets["macs"].to_numpy() == macs).all()
    if blocks:
        assert (ms["kind"] == "block").sum() >= len(fam.cost_layout(space.width_mult, 10).parts)

    code, out = cli(capsys, "latency", "fit", "--run", str(run), "--device", "cpu-ort")
    assert code == 0, out
    assert (run / "predictors" / "latency-cpu-ort.json").exists()
    for kind in ("analytic", "lut"):  # the lookup table from the entries where profiled, else from subnets
        code, out = cli(capsys, "latency", "fit", "--run", str(run), "--device", "cpu-ort", "--kind", kind,
                        "--out", str(tmp_path / f"{kind}.json"))
        assert code == 0, out
        assert json.loads((tmp_path / f"{kind}.json").read_text())["kind"] == kind

    # 12 rows (a predictor is chosen from 10): the ResNet50 run spent 69 s building 20
    code, out = cli(capsys, "accuracy", "build", "--run", str(run), "--samples", "12", "--bn-images", "64")
    assert code == 0, out
    table = pd.read_csv(run / "accuracy.csv")
    assert len(table) == 12 and table["top1"].between(0, 100).all()
    assert set(fam.flat_columns()) <= set(table.columns)

    # generous: 8 subnets timed 3 times give a wide latency bound when the machine is busy
    budget = float(subnets["corrected_ms"].max()) * 4
    code, out = cli(capsys, "search", "--run", str(run), "--device", "cpu-ort", "--latency-ms",
                    f"{budget:.3f}", "--population", "16", "--generations", "3", "--top-k", "1",
                    "--accuracy-samples", "12", "--accuracy-checks", "2")
    assert code == 0, out
    pareto = pd.read_csv(run / "pareto.csv")
    fam.table_codes(pareto)  # the family's columns, as values
    returned = pareto[pareto["selected"]]  # measured on the device, then evaluated on the test split
    assert len(returned) >= 1 and returned["measured_ms"].notna().all() and returned["measured_top1"].notna().all()

    subnet = str(returned["id"].iloc[0])
    bundle = tmp_path / "bundle"
    meta = export_verified(capsys, run, subnet, bundle)
    assert meta["family"] == family and meta["id"] == subnet

    from hwnas.export.bundle import load

    loaded = load(bundle)
    assert loaded.arch.id == subnet
    classes, probs = loaded.predict(np.zeros((2, 28, 28, 3), np.uint8))
    assert classes.shape == (2,) and probs.shape == (2, 10)

    from hwnas.dashboard import data as dash

    files = dash.RunFiles(run)
    assert run in dash.find_runs(tmp_path)
    front = dash.load_pareto(files)
    assert subnet in set(front["id"]) and loaded.arch.describe() in set(front["arch"])  # as the family describes it
    assert dash.latency_pairs(files, "cpu-ort")["predicted_ms"].gt(0).all()
    assert not dash.front_on(files, "cpu-ort").empty
    grid = dash.arch_grid(loaded.arch)  # stages x blocks where every slot has a depth gene, else per gene
    assert grid["used"].any() and ((grid["label"] == "—") == ~grid["used"]).all()
