from __future__ import annotations

import json
import time

import numpy as np
import pytest

from hwnas.errors import CheckpointError, InputError
from hwnas.search.accuracy import (ACCURACY_TABLE, MLPAccuracyPredictor, accuracy_sample, build_accuracy_table,
                                   fit_accuracy_predictor, read_accuracy_table)
from hwnas.latency.metrics import kendall_tau
from hwnas.space import FLAT_COLUMNS


def test_sample_is_distinct_and_prefix_stable(small_space):
    big = accuracy_sample(small_space, 300, seed=1)
    assert len({r.tobytes() for r in big}) == 300
    assert (accuracy_sample(small_space, 120, seed=1) == big[:120]).all()
    assert (big[0] == small_space.to_matrix([small_space.min_arch()])[0]).all()


def test_mlp_learns_a_ranking_predicts_in_bulk_and_round_trips(small_space, tmp_path):
    from search_stubs import SynthAccuracy

    rng = np.random.default_rng(0)
    m = accuracy_sample(small_space, 500, seed=0)
    y = SynthAccuracy().predict(m) + rng.normal(0, 0.3, len(m))
    pred = MLPAccuracyPredictor.fit(small_space, m[:400], y[:400], hidden=(64, 64, 64), epochs=60, seed=0)
    assert kendall_tau(pred.predict(m[400:]), y[400:]) > 0.7
    many = small_space.sample_matrix(5000, 1)
    t = time.perf_counter()
    out = pred.predict(many)
    assert out.shape == (5000,) and time.perf_counter() - t < 2.0
    path = pred.save(tmp_path / "predictors" / "accuracy.json")
    doc = json.loads(path.read_text())
    assert doc["hidden"] == [64, 64, 64] and doc["arrays"] == "accuracy.npz"
    with np.load(tmp_path / "predictors" / "accuracy.npz", allow_pickle=False) as z:  # no pickle inside
        assert sorted(z.files) == ["b0", "b1", "b2", "b3", "w0", "w1", "w2", "w3"]
    again = MLPAccuracyPredictor.load(path)
    assert np.array_equal(again.predict(many), out)
    archs = small_space.from_matrix(many[:10])  # a list of Arch works too
    np.testing.assert_allclose(pred.predict(archs), out[:10], rtol=1e-5)


def test_predictor_files_fail_with_one_line_errors(small_space, tmp_path):
    w = [np.zeros((len(small_space.encoding_names()), 4), np.float32), np.zeros((4, 1), np.float32)]
    pred = MLPAccuracyPredictor(small_space, w, [np.zeros(4), np.zeros(1)], 50.0, 1.0)
    path = pred.save(tmp_path / "acc.json")
    (tmp_path / "acc.npz").unlink()
    with pytest.raises(CheckpointError, match="missing"):
        MLPAccuracyPredictor.load(path)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        MLPAccuracyPredictor.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="does not exist"):
        MLPAccuracyPredictor.load(tmp_path / "nope.json")


def test_accuracy_table_is_built_in_chunks_and_resumes(tiny_supernet, tmp_path, monkeypatch):
    import hwnas.supernet.evaluation as evaluation
    from hwnas.run import open_run

    run = open_run(tmp_path / "run", supernet=tiny_supernet)
    evaluated = []
    real = evaluation.evaluate_subnets

    def counting(model, archs, loaders, **kw):
        evaluated.extend(a.id for a in archs)
        return real(model, archs, loaders, **kw)

    monkeypatch.setattr(evaluation, "evaluate_subnets", counting)
    table = build_accuracy_table(run, 3, bn_images=16, max_batches=1, chunk=2)
    assert len(table) == 3 and len(evaluated) == 3
    df = read_accuracy_table(run.run_dir)
    assert list(df.columns) == [*FLAT_COLUMNS, "id", "top1", "loss", "n"]
    assert df["top1"].between(0, 100).all() and (df["n"] > 0).all()
    assert not list(run.run_dir.glob(f".{ACCURACY_TABLE}*"))  # no temp files left behind
    more = build_accuracy_table(run, 4, bn_images=16, max_batches=1, chunk=2)
    assert len(more) == 4 and len(evaluated) == 4  # only the new subnet was evaluated
    with pytest.raises(InputError, match="build_accuracy_table"):
        fit_accuracy_predictor(run)  # 4 rows are too few to fit on


def test_missing_predictor_is_built_from_a_new_table(tiny_supernet, tmp_path):
    from hwnas.run import open_run
    from hwnas.search.api import ensure_accuracy_predictor

    run = open_run(tmp_path / "run", supernet=tiny_supernet)
    events = []
    pred = ensure_accuracy_predictor(run, 20, bn_images=16, max_batches=1,
                                     progress=lambda ev, **f: events.append(ev))
    assert (run.run_dir / "predictors" / "accuracy.json").exists()
    assert len(read_accuracy_table(run.run_dir)) == 20 and "accuracy" in events and "fit-accuracy" in events
    assert pred.meta["metrics"]["test"]["n"] == 4  # 20 % held out, reported
    again = ensure_accuracy_predictor(run, 20)  # now it is loaded, nothing evaluated
    probe = run.space.sample_matrix(5, 0)
    assert np.array_equal(again.predict(probe), pred.predict(probe))
