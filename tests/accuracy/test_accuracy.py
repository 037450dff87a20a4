"""The accuracy table, the predictor kinds, selection by out-of-fold error, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from hwnas.accuracy import (ACCURACY_PREDICTOR, ACCURACY_TABLE, accuracy_predictor_kinds, accuracy_sample, anchor_rows,
                            build_accuracy_table, ensure_accuracy_predictor, fit_accuracy_predictor,
                            fit_best_accuracy, load_predictor_file, make_accuracy_predictor, read_accuracy_table)
from hwnas.errors import CheckpointError, InputError, TableError
from hwnas.latency.metrics import kendall_tau
from hwnas.space import FLAT_COLUMNS


def _noisy_table(space, n, noise=0.3, seed=0):
    from search_stubs import SynthAccuracy

    m = accuracy_sample(space, n, seed=seed)
    return m, SynthAccuracy().predict(m) + np.random.default_rng(seed).normal(0, noise, len(m))


def test_sample_is_distinct_and_prefix_stable(small_space):
    big = accuracy_sample(small_space, 300, seed=1)
    assert len({r.tobytes() for r in big}) == 300
    assert (accuracy_sample(small_space, 120, seed=1) == big[:120]).all()
    assert (big[0] == small_space.to_matrix([small_space.min_arch()])[0]).all()


def test_sample_holds_the_smallest_and_largest_subnet_at_every_resolution(small_space):
    anchors = anchor_rows(small_space)
    assert small_space.check_matrix(anchors) is None
    rs = small_space.r_choices
    expected = [small_space.min_arch(r) for r in rs] + [small_space.max_arch(r) for r in rs]
    assert sorted(a.id for a in small_space.from_matrix(anchors)) == sorted(a.id for a in expected)
    ids = {a.id for a in small_space.from_matrix(accuracy_sample(small_space, 100, seed=0))}
    assert {a.id for a in expected} <= ids
    spread = anchor_rows(small_space, most=3)[:, 0]  # at most 3 resolutions: the ends and the middle
    assert sorted(set(spread)) == [rs[0], rs[len(rs) // 2], rs[-1]]


@pytest.mark.parametrize("kind,settings", [("ridge", {"features": "compact"}), ("ridge", {"features": "full"}),
                                           ("gp", {"features": "compact"}),
                                           ("mlp-ensemble", {"features": "compact", "epochs": 100}),
                                           ("mlp", {"hidden": [32, 32, 32], "epochs": 60})])
def test_every_kind_ranks_clips_knows_its_spread_and_round_trips(small_space, tmp_path, kind, settings):
    m, y = _noisy_table(small_space, 300)
    pred = make_accuracy_predictor(kind, small_space, 10, **settings).fit(m[:240], y[:240])
    mean, std = pred.predict_with_std(m[240:])
    assert kendall_tau(mean, y[240:]) > 0.6
    assert mean.max() <= y[:240].max() and mean.min() >= y[:240].min()  # never beyond the table
    assert std.shape == mean.shape and np.all(std >= 0)
    path = pred.save(tmp_path / "predictors" / "accuracy.json")
    with np.load(path.with_suffix(".npz"), allow_pickle=False) as z:  # no pickle inside
        assert "x_mean" in z.files
    again = load_predictor_file(path)
    many = small_space.sample_matrix(2000, 1)
    np.testing.assert_allclose(again.predict_with_std(many)[0], pred.predict_with_std(many)[0])
    np.testing.assert_allclose(pred.predict(small_space.from_matrix(many[:5])), pred.predict(many[:5]))


def test_selection_reports_out_of_fold_metrics_and_beats_the_memorising_mlp(small_space):
    m, y = _noisy_table(small_space, 120, noise=0.5)
    cands = [("ridge", {"features": "compact"}), ("mlp", {"epochs": 150})]
    best, report = fit_best_accuracy(small_space, m, y, candidates=cands, folds=5)
    by_kind = {c["kind"]: c for c in report["candidates"]}
    assert report["chosen"]["kind"] == "ridge" and by_kind["ridge"]["mae"] < by_kind["mlp"]["mae"]
    assert report["oof"]["kendall_tau"] > 0.7 and report["oof"]["n"] == 120
    assert [r["rows"] for r in report["learning_curve"]] == [30, 60, 90, 120]
    assert 0.0 < report["oof"]["within_1_sigma"] <= 1.0
    assert report["clip"] == [float(y.min()), float(y.max())] and best.meta["metrics"] is report


def test_the_one_se_rule_takes_the_simplest_candidate_within_one_se(small_space):
    m, y = _noisy_table(small_space, 80, noise=0.5)
    cands = [("ridge", {"features": "compact"}), ("gp", {"features": "compact"})]
    lowest = fit_best_accuracy(small_space, m, y, candidates=cands, curve=())[1]
    one_se = fit_best_accuracy(small_space, m, y, candidates=cands, curve=(), criterion="one-se")[1]
    order = [c["kind"] for c in lowest["candidates"]]
    assert one_se["criterion"] == "one-se" and lowest["criterion"] == "lowest"
    assert lowest["chosen"]["kind"] == min(lowest["candidates"], key=lambda c: c["mae"])["kind"]
    assert order.index(one_se["chosen"]["kind"]) <= order.index(lowest["chosen"]["kind"])  # never more complex
    # a candidate far worse than the best is not within one SE of it, first in the list or not
    bad_first = [("mlp", {"epochs": 150}), ("ridge", {"features": "compact"})]
    assert fit_best_accuracy(small_space, m, y, candidates=bad_first, curve=(),
                             criterion="one-se")[1]["chosen"]["kind"] == "ridge"
    with pytest.raises(ValueError, match="criterion"):
        fit_best_accuracy(small_space, m, y, candidates=cands, criterion="best")


def test_predictor_files_fail_with_one_line_errors(small_space, tmp_path):
    m, y = _noisy_table(small_space, 40)
    path = make_accuracy_predictor("ridge", small_space).fit(m, y).save(tmp_path / "acc.json")
    path.with_suffix(".npz").unlink()
    with pytest.raises(CheckpointError, match="missing"):
        load_predictor_file(path)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_predictor_file(tmp_path / "bad.json")
    (tmp_path / "old.json").write_text(json.dumps({"format": "hwnas-accuracy-predictor", "version": 1}))
    with pytest.raises(CheckpointError, match="refit"):
        load_predictor_file(tmp_path / "old.json")
    with pytest.raises(InputError, match="does not exist"):
        load_predictor_file(tmp_path / "nope.json")
    with pytest.raises(InputError, match="unknown accuracy predictor"):
        make_accuracy_predictor("forest", small_space)
    with pytest.raises(InputError, match="percentages"):
        make_accuracy_predictor("ridge", small_space).fit(m[:5], [1, 2, np.nan, 4, 5])
    assert {"ridge", "mlp-ensemble", "mlp"} <= set(accuracy_predictor_kinds())


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
    assert list(df.columns) == [*FLAT_COLUMNS, "id", "top1", "loss", "n", "bn_images"]
    assert df["top1"].between(0, 100).all() and (df["n"] > 0).all()
    assert not list(run.run_dir.glob(f".{ACCURACY_TABLE}*"))  # no temp files left behind
    more = build_accuracy_table(run, 4, bn_images=16, max_batches=1, chunk=2)
    assert len(more) == 4 and len(evaluated) == 4  # only the new subnet was evaluated
    assert (read_accuracy_table(run.run_dir)["bn_images"] == 16).all()
    with pytest.raises(InputError, match="BN recalibrated on 16 training images; adding some on 32") as err:
        build_accuracy_table(run, 5, bn_images=32, max_batches=1)  # one table, one BN setting
    assert "--bn-images 16" in str(err.value) and len(evaluated) == 4 and len(read_accuracy_table(run.run_dir)) == 4
    with pytest.raises(InputError, match="hwnas accuracy build"):
        fit_accuracy_predictor(run)  # 4 rows are too few to fit on
    (run.run_dir / ACCURACY_TABLE).write_text("r,id,top1\n32,x,not-a-number\n")
    with pytest.raises(TableError):
        read_accuracy_table(run.run_dir)


def test_missing_predictor_is_built_from_a_new_table_and_refitted_when_it_grows(tiny_supernet, tmp_path):
    from hwnas.run import open_run

    run = open_run(tmp_path / "run", supernet=tiny_supernet)
    events = []
    pred = ensure_accuracy_predictor(run, 20, bn_images=16, max_batches=1,
                                     progress=lambda ev, **f: events.append(ev))
    assert (run.run_dir / ACCURACY_PREDICTOR).exists()
    assert len(read_accuracy_table(run.run_dir)) == 20 and "accuracy" in events and "fit-accuracy" in events
    assert pred.meta["metrics"]["oof"]["n"] == 20  # every row scored out of fold
    again = ensure_accuracy_predictor(run, 20)  # now it is loaded, nothing evaluated
    probe = run.space.sample_matrix(5, 0)
    assert np.array_equal(again.predict(probe), pred.predict(probe))
    assert ensure_accuracy_predictor(run).meta["n_train"] == 20  # the table as it is: reused, nothing built
    build_accuracy_table(run, 24, bn_images=16, max_batches=1)  # `hwnas accuracy build` grew the table
    assert ensure_accuracy_predictor(run, 20).meta["n_train"] == 24  # refitted on all of it
    # the table edited (or rebuilt) to the same size: the old fit no longer stands on it
    fitted = ensure_accuracy_predictor(run)
    table = read_accuracy_table(run.run_dir)
    table.assign(top1=table["top1"] / 2).to_csv(run.run_dir / "accuracy.csv", index=False)
    refit = ensure_accuracy_predictor(run)
    assert refit.meta["table_sha256"] != fitted.meta["table_sha256"]
    assert refit.predict(probe).mean() == pytest.approx(fitted.predict(probe).mean() / 2, rel=0.2)


def test_cli_build_fit_eval(tiny_supernet, tmp_path):
    run = tmp_path / "run"
    from hwnas.run import open_run

    open_run(run, supernet=tiny_supernet)
    env_cmd = [sys.executable, "-m", "hwnas", "accuracy"]
    out = subprocess.run([*env_cmd, "build", "--run", str(run), "--samples", "20", "--bn-images", "16"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "20 subnets" in " ".join(out.stderr.split())  # the console wraps long lines
    out = subprocess.run([*env_cmd, "eval", "--run", str(run), "--out", str(tmp_path / "r.json")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "out-of-fold" in out.stdout and "learning curve" in " ".join(out.stdout.split())
    assert json.loads((tmp_path / "r.json").read_text())["oof"]["n"] == 20
    bad = subprocess.run([*env_cmd, "fit", "--run", str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_torchrun_shards_the_table_over_ranks_and_one_writer_merges(tiny_supernet, tmp_path):
    """Two gloo ranks evaluate disjoint halves; rank 0 writes; the table equals a one-process build."""
    import os

    from hwnas.run import open_run

    run = tmp_path / "run"
    open_run(run, supernet=tiny_supernet)
    env = {**os.environ, "HWNAS_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "hwnas", "accuracy", "build", "--run-dir", str(run), "--samples", "6", "--bn-images", "16"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    table = read_accuracy_table(run)
    assert len(table) == 6 and table["id"].is_unique
    ids = {a.id for a in open_run(run).space.from_matrix(accuracy_sample(open_run(run).space, 6))}
    assert set(table["id"]) == ids
    assert " ".join(out.stderr.split()).count("6 subnets; val top-1 of the 6 asked for") == 1  # only rank 0 reports


@pytest.mark.parametrize("signal,noise", [(2.2, 0.04), (100.0, 1e-4)])
def test_gp_variance_matches_the_float64_posterior(small_space, signal, noise):
    """The search-time variance (a precomputed inverse Cholesky factor, float32 where the kernel is
    well conditioned) agrees with a float64 triangular solve, also where signal >> noise."""
    from scipy.linalg import solve_triangular

    from hwnas.accuracy.predictors import _gp_kernel, _sq_dist

    m, y = _noisy_table(small_space, 120)
    pred = make_accuracy_predictor("gp", small_space, 10).fit(m, y)
    x = pred._standardise(pred.features(small_space.sample_matrix(50, 2)))
    pred.signal, pred.noise = signal, noise
    k_train = _gp_kernel(_sq_dist(pred.x_train, pred.x_train), pred.length, signal)
    pred._set_chol(np.linalg.cholesky(k_train + noise * np.eye(len(k_train))))
    k = _gp_kernel(_sq_dist(x, pred.x_train), pred.length, signal)
    v = solve_triangular(pred.chol, k.T, lower=True)
    want = np.sqrt(np.maximum(signal + noise - np.sum(v * v, axis=0), 0.0)) * pred.y_std
    np.testing.assert_allclose(pred._predict(x)[1], want, rtol=1e-2, atol=1e-3 * pred.y_std)
