"""The shipped supernet's precomputed evaluations: used only where they are exactly what would be
computed, ignored (and everything evaluated) otherwise."""

from __future__ import annotations

import json

import pytest

import hwnas.accuracy.precomputed as precomputed
import hwnas.supernet.evaluation as evaluation
from hwnas.accuracy.table import ACCURACY_TABLE, build_accuracy_table, read_accuracy_table
from hwnas.run import open_run
from hwnas.supernet.data import BN_IMAGES


@pytest.fixture()
def shipped_table(tmp_path, monkeypatch):
    """3 subnets of the shipped supernet evaluated for real, written as the package's assets."""
    run = open_run(tmp_path / "source")
    build_accuracy_table(run, 3)
    csv, key = tmp_path / "assets.csv", tmp_path / "assets.json"
    csv.write_bytes((tmp_path / "source" / ACCURACY_TABLE).read_bytes())
    key.write_text(json.dumps({"key": precomputed.precomputed_key(run, split="val", seed=0, bn_images=BN_IMAGES)}))
    monkeypatch.setattr(precomputed, "precomputed_paths", lambda: (csv, key))
    return read_accuracy_table(tmp_path / "source"), key


def _count_evaluations(monkeypatch, *, evaluate: bool = True) -> list:
    """The archs evaluated from now on; `evaluate=False`: counted only, each given a top-1 of 50
    (for tests where only which rows are evaluated matters: 12 real evaluations took 100 s)."""
    calls: list = []
    real = evaluation.evaluate_subnets

    def counting(model, archs, *a, **kw):
        calls.extend(archs)
        if not evaluate:
            return [{"id": arch.id, "top1": 50.0, "loss": 1.0, "n": 1} for arch in archs]
        return real(model, archs, *a, **kw)

    monkeypatch.setattr(evaluation, "evaluate_subnets", counting)
    return calls


def test_a_fresh_run_on_the_shipped_supernet_takes_the_shipped_rows(tmp_path, shipped_table, monkeypatch):
    table, _ = shipped_table
    calls = _count_evaluations(monkeypatch)
    run = open_run(tmp_path / "fresh")
    got = build_accuracy_table(run, 4)  # 3 shipped, 1 more evaluated here
    assert len(calls) == 1 and len(got) == 4
    assert got.set_index("id").loc[table["id"], "top1"].tolist() == table["top1"].tolist()


def test_rows_are_ignored_when_anything_that_decides_them_differs(tmp_path, shipped_table, monkeypatch):
    _, key_file = shipped_table
    recorded = json.loads(key_file.read_text())
    recorded["key"]["supernet_sha256"] = "0" * 64  # e.g. the shipped supernet was retrained
    key_file.write_text(json.dumps(recorded))
    calls = _count_evaluations(monkeypatch, evaluate=False)
    build_accuracy_table(open_run(tmp_path / "fresh"), 3)
    assert len(calls) == 3
    key_file.write_text("{")  # a damaged asset costs only the time to evaluate
    build_accuracy_table(open_run(tmp_path / "other"), 3)
    assert len(calls) == 6
    calls.clear()
    build_accuracy_table(open_run(tmp_path / "limited"), 3, max_batches=1)  # not the same evaluation
    assert len(calls) == 3
