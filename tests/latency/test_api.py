"""The library functions `hwnas latency fit | predict | eval` wrap: tables in, files out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwnas.families import NetworkSpec
from hwnas.errors import InputError, TableError
from hwnas.latency import load_predictor
from hwnas.latency.api import evaluate_predictor, fit_from_run, fit_from_table, predict_table
from hwnas.latency.metrics import within
from hwnas.space import FLAT_COLUMNS

DATA = Path(__file__).parent / "data"
SUBNETS, BLOCKS = DATA / "ofa_cpu_subnets.csv", DATA / "ofa_cpu_blocks.csv"


@pytest.fixture()
def small_table(tmp_path):
    df = pd.read_csv(SUBNETS).head(60)
    df["note"] = "extra columns are ignored"
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    return path, df


def test_fit_predict_roundtrip(small_table, tmp_path):
    path, df = small_table
    pred, report = fit_from_table(path, "ort_ms", tmp_path / "p.json", net=NetworkSpec("ofa-mbv3", 1.0, 10), kinds=["analytic"],
                                  device="cpu-ort")
    loaded = load_predictor(tmp_path / "p.json")
    assert loaded.meta.device == "cpu-ort" and loaded.meta.target == "ort_ms"
    assert loaded.meta.cv.chosen == report["chosen"] and loaded.meta.n_classes == 10
    out = predict_table(tmp_path / "p.json", path, tmp_path / "out.csv")
    written = pd.read_csv(tmp_path / "out.csv")
    assert list(written.columns) == list(df.columns) + ["predicted_ms"]
    assert np.allclose(written["predicted_ms"], out["predicted_ms"])
    assert within(written["predicted_ms"], df["ort_ms"], 0.10) > 0.7
    assert not list(tmp_path.glob(".*tmp"))  # atomic writes leave no temporaries


def test_fit_with_base_and_entries(small_table, tmp_path):
    path, _ = small_table
    fit_from_table(path, "ort_ms", tmp_path / "src.json", net=NetworkSpec("ofa-mbv3", 1.0, 10), kinds=["analytic"])
    pred, report = fit_from_table(path, "ort_median_ms", tmp_path / "dst.json", net=NetworkSpec("ofa-mbv3", 1.0, 10),
                                  base=tmp_path / "src.json", kinds=["transfer", "analytic"])
    assert {r["kind"] for r in report["candidates"]} == {"transfer", "analytic"}
    _, report = fit_from_table(path, "ort_ms", tmp_path / "lut.json", net=NetworkSpec("ofa-mbv3", 1.0, 10), entries=BLOCKS,
                               kinds=["lut"])
    assert any("entries" in r["name"] for r in report["candidates"])


@pytest.mark.parametrize("mutate, pattern", [
    (lambda df: df.drop(columns=["ort_ms"]), "no latency column 'ort_ms'"),
    (lambda df: df.assign(ort_ms=df["ort_ms"].astype(object).where(df.index != 4, "fast")),
     "row 5, column ort_ms: 'fast' is not a positive latency"),
    (lambda df: df.assign(ort_ms=df["ort_ms"].where(df.index != 2, -1.0)), "row 3, column ort_ms: -1.0 is not a positive"),
    (lambda df: df.assign(ort_ms=df["ort_ms"].where(df.index != 0, np.nan)), "row 1, column ort_ms"),
    (lambda df: df.drop(columns=["ks_7"]), "lacks the column.*ks_7"),
    (lambda df: df.assign(e_0=df["e_0"].astype(object).where(df.index != 1, "x")), "row 2, column e_0"),
    (lambda df: df.head(0), "no rows"),
])
def test_bad_tables_are_one_line_errors(mutate, pattern, small_table, tmp_path):
    path, df = small_table
    mutate(df).to_csv(path, index=False)
    with pytest.raises(TableError, match=pattern) as err:
        fit_from_table(path, "ort_ms", tmp_path / "p.json", net=NetworkSpec("ofa-mbv3", 1.0, 10))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "p.json").exists()


def test_missing_files(tmp_path):
    with pytest.raises(TableError, match="does not exist"):
        fit_from_table(tmp_path / "none.csv", "ms", tmp_path / "p.json", net=NetworkSpec("ofa-mbv3", 1.0, 10))
    with pytest.raises(InputError, match="does not exist"):
        predict_table(tmp_path / "none.json", SUBNETS, tmp_path / "o.csv")


def test_evaluate_learning_curve(tmp_path):
    report = evaluate_predictor(SUBNETS, "ort_ms", kind="analytic", sizes=(10, 20, 50, 500),
                                repeat_column="ort_ms_repeat", net=NetworkSpec("ofa-mbv3", 1.0, 10),
                                out_json=tmp_path / "r.json")
    curve = report["learning_curve"]
    assert [row["n_train"] for row in curve] == [10, 20, 50]  # 500 > the 225 training rows
    for row in curve:
        assert row["n_test"] == 75
        for key in ("within_5", "within_10", "rmse_ms", "mape", "kendall_tau", "spearman_rho"):
            assert np.isfinite(row[key])
        assert row["kendall_tau"] > row["flops_baseline"]["kendall_tau"]
    assert 0 < report["repeatability"]["within_10"] <= 1
    assert json.loads((tmp_path / "r.json").read_text())["rows"] == 300


def test_evaluate_a_saved_predictor(small_table, tmp_path):
    path, _ = small_table
    fit_from_table(path, "ort_ms", tmp_path / "p.json", net=NetworkSpec("ofa-mbv3", 1.0, 10), kinds=["analytic"])
    report = evaluate_predictor(SUBNETS, "ort_ms", predictor_json=tmp_path / "p.json", sizes=(),
                                net=NetworkSpec("ofa-mbv3", 1.0, 10))
    assert report["heldout"]["n"] == 300 and report["heldout"]["within_10"] > 0.6


def test_fit_from_run_reads_the_store(tmp_path):
    """A run's measurements.parquet (the store's format): repeated subnets are merged, block rows
    whose JSON `block` describes a lookup-table entry become an entries table, other devices and
    reference models are ignored."""
    subnets = pd.read_csv(SUBNETS).head(40)
    rows = pd.DataFrame(subnets[list(FLAT_COLUMNS)])
    rows["corrected_ms"], rows["median_ms"] = subnets["ort_ms"], subnets["ort_median_ms"]
    rows["kind"], rows["device"], rows["block"] = "subnet", "cpu-ort", "{}"
    rows["key"] = [f"s{i}" for i in range(len(rows))]
    repeat = rows.head(5).assign(corrected_ms=rows.head(5)["corrected_ms"] * 1.02)  # measured twice
    entries = pd.read_csv(BLOCKS)
    blocks = pd.DataFrame({"corrected_ms": entries["ms"], "median_ms": entries["median_ms"],
                           "kind": "block", "device": "cpu-ort",
                           "key": [f"b{i}" for i in range(len(entries))],
                           "block": [json.dumps({c: (str(v) if c == "part" else int(v)) for c, v in r.items()})
                                     for r in entries[["part", "stage", "j", "in_ch", "k", "e", "size"]]
                                     .to_dict("records")]})
    for col in FLAT_COLUMNS:
        blocks[col] = -1
    other = rows.head(3).assign(device="gpu", corrected_ms=100.0)
    model = rows.head(1).assign(kind="model", key="timm", corrected_ms=50.0)
    table = pd.concat([rows, repeat, blocks, other, model], ignore_index=True)
    table.to_parquet(tmp_path / "measurements.parquet", index=False)
    pred, report = fit_from_run(tmp_path, "cpu-ort", n_classes=10, kinds=["analytic", "lut"])
    assert pred.meta.n_train == 40 and pred.meta.device == "cpu-ort"  # repeats merged
    assert pred.meta.notes.block_entries == len(entries)
    assert any("entries" in r["name"] for r in report["candidates"])
    assert (tmp_path / "predictors" / "latency-cpu-ort.json").exists()
    with pytest.raises(InputError, match="no measurements"):
        fit_from_run(tmp_path, "phone")
