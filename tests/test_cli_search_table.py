"""`hwnas search` uses the accuracy table that exists (issue 30): it never grows it unasked, says
what the predictor stands on, refuses a run without a usable table in one line before any work,
and grows the table only to an --accuracy-samples given. Also `search --finetune-epochs` (issue 27).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_calls import cli
from hwnas.families import NetworkSpec
from hwnas.accuracy import ACCURACY_PREDICTOR, ACCURACY_TABLE, build_accuracy_table, ensure_accuracy_predictor
from hwnas.errors import InputError
from hwnas.run import open_run

DEV = "cpu-ort"
ROWS = 12


def _with_latency_predictor(run) -> float:
    """Save an analytic latency predictor for DEV (ms proportional to MACs); returns a budget that
    half the subnets meet. Searches here skip verification, so no device is timed."""
    from hwnas.accuracy import accuracy_sample
    from hwnas.latency import AnalyticPredictor
    from hwnas.search.problem import latency_predictor_path

    m = accuracy_sample(run.space, 200, seed=0)
    _, macs = run.family.count_params_macs(m, run.space.width_mult, run.n_classes)
    lat = AnalyticPredictor(features="stage", net=NetworkSpec("ofa-mbv3", 1.0, run.n_classes)).fit(m, macs / 1e8)
    lat.save(latency_predictor_path(run.run_dir, DEV))
    return float(np.median(lat.predict(m)))


@pytest.fixture(scope="module")
def small_run(tiny_supernet, tmp_path_factory):
    """A run with a 12-row accuracy table (one batch per subnet: seconds) and a latency predictor,
    made once; tests work on copies."""
    run = open_run(tmp_path_factory.mktemp("small") / "run", supernet=tiny_supernet)
    budget = _with_latency_predictor(run)
    build_accuracy_table(run, ROWS, bn_images=16, max_batches=1)
    return run.run_dir, budget


@pytest.fixture
def run_copy(small_run, tmp_path):
    src, budget = small_run
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst, budget


def hwnas(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "hwnas", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def _search_args(run: Path, budget: float, *extra: str) -> list[str]:
    return ["search", "--run", str(run), "--device", DEV, "--latency-ms", f"{budget:.4f}", "--no-verify",
            "--population", "8", "--generations", "2", "--top-k", "2", "--no-plot", *extra]


def _rows(run: Path) -> int:
    return len(pd.read_csv(run / ACCURACY_TABLE))


def test_search_on_a_12_row_table_keeps_it_and_says_what_the_predictor_stands_on(run_copy):
    run, budget = run_copy
    proc = hwnas(*_search_args(run, budget))
    assert proc.returncode == 0, proc.stderr
    assert _rows(run) == ROWS  # nothing evaluated: the table is as it was
    text = " ".join(proc.stderr.split())
    assert f"accuracy table: {ROWS} subnets; predictor" in text and "out-of-fold MAE" in text
    assert "a small table" in text and f"hwnas accuracy build --run {run}" in text
    meta = json.loads((run / ACCURACY_PREDICTOR).read_text())["meta"]
    assert meta["n_train"] == ROWS
    assert (run / "pareto.csv").exists()


@pytest.mark.parametrize("rows", [0, 5])
def test_search_without_a_usable_table_refuses_in_one_line_before_any_work(run_copy, rows):
    run, budget = run_copy
    if rows:
        df = pd.read_csv(run / ACCURACY_TABLE)
        df.head(rows).to_csv(run / ACCURACY_TABLE, index=False)
    else:
        (run / ACCURACY_TABLE).unlink()
    before = sorted(p.name for p in run.rglob("*"))
    proc = hwnas(*_search_args(run, budget))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert f"hwnas accuracy build --run {run} --samples 100" in lines[0] and "on a 2-core CPU" in lines[0]
    assert ("has no accuracy table" if rows == 0 else f"has {rows} subnets") in lines[0]
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing written
    if rows:
        assert _rows(run) == rows


def test_accuracy_samples_grows_the_table_only_when_asked(run_copy):
    run_dir, _ = run_copy
    run = open_run(run_dir, create=False)
    events = []
    pred = ensure_accuracy_predictor(run, progress=lambda ev, **f: events.append((ev, f)))
    assert pred.meta["n_train"] == ROWS and _rows(run_dir) == ROWS and "accuracy" not in [e for e, _ in events]
    notes = [f["message"] for e, f in events if e == "accuracy-predictor"]
    assert len(notes) == 1 and notes[0].startswith(f"accuracy table: {ROWS} subnets")
    grown = ensure_accuracy_predictor(run, ROWS + 2, bn_images=16, max_batches=1)
    assert _rows(run_dir) == ROWS + 2 and grown.meta["n_train"] == ROWS + 2  # grown, then refitted
    assert ensure_accuracy_predictor(run, ROWS).meta["n_train"] == ROWS + 2  # never shrunk or rebuilt
    with pytest.raises(InputError, match="at least 10"):
        ensure_accuracy_predictor(open_run(run_dir, create=False), 0)


def test_search_accuracy_samples_below_the_floor_is_one_line(run_copy):
    run, budget = run_copy
    (run / ACCURACY_TABLE).unlink()
    proc = hwnas(*_search_args(run, budget, "--accuracy-samples", "5"))
    assert proc.returncode == 2 and "--accuracy-samples must be at least 10" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (run / ACCURACY_TABLE).exists()


def test_search_finetune_epochs_finetunes_every_returned_subnet(run_copy, capsys, monkeypatch):
    import hwnas.supernet.finetune as finetune

    run, budget = run_copy
    calls = []

    def fake_finetune(cfg, arch, settings, data=None, progress=None):
        calls.append((arch.id, settings.epochs))
        progress(1, 1, "epoch 1")
        return {"top1_before": {"val": 10.0, "test": 11.0}, "top1_after": {"val": 20.0, "test": 21.0},
                "seconds": 1.0}

    monkeypatch.setattr(finetune, "finetune_subnet", fake_finetune)
    code, text = cli(capsys, *_search_args(run, budget, "--finetune-epochs", "3"))
    assert code == 0, text
    best = [b["id"] for b in json.loads((run / "search.json").read_text())["best"]]
    assert [c[0] for c in calls] == best and all(c[1] == 3 for c in calls)
    assert "this takes a while" in text and "11.00 → 21.00" in text


def test_search_finetune_epochs_is_checked_before_the_search(run_copy):
    run, budget = run_copy
    proc = hwnas(*_search_args(run, budget, "--finetune-epochs", "-1"))
    assert proc.returncode == 2 and "--finetune-epochs must be 0" in proc.stderr
    assert not (run / "pareto.csv").exists()
