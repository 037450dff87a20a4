"""The accuracy stage on every family's runs (`family_runs.every_family`, issue 16): the table of
BN-recalibrated subnets of a tiny supernet in the family's own CSV layout, the predictor's
out-of-fold selection on it, and the saved predictor reloaded with its family."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hwnas.accuracy import (ACCURACY_PREDICTOR, ACCURACY_TABLE, accuracy_sample, build_accuracy_table,
                            fit_accuracy_predictor, load_accuracy_predictor, load_predictor_file,
                            make_accuracy_predictor, read_accuracy_table)
from hwnas.accuracy.features import arch_features
from hwnas.accuracy.table import frame_codes, values_frame
from hwnas.families import DEFAULT_FAMILY, family_names


def _synthetic_top1(space, m: np.ndarray) -> np.ndarray:
    """Grows with log MACs, plus a little noise: what a predictor should rank."""
    macs = space.family.count_params_macs(np.asarray(m, np.int64), space.width_mult, 10)[1]
    noise = np.random.default_rng(0).normal(0, 0.05, len(m))
    return np.clip(20 + 10 * np.log(macs / 1e6) + noise, 0, 100)


def test_table_of_a_tiny_supernet_fit_and_reload(family, family_supernet, tmp_path, monkeypatch):
    from hwnas.run import open_run
    import hwnas.supernet.evaluation as evaluation

    family = family.name
    run = open_run(tmp_path / "run", supernet=family_supernet(family))
    assert run.family.name == family
    evaluated = []
    real = evaluation.evaluate_subnets

    def counting(model, archs, *a, **kw):
        evaluated.extend(a.id for a in archs)
        return real(model, archs, *a, **kw)

    monkeypatch.setattr(evaluation, "evaluate_subnets", counting)
    table = build_accuracy_table(run, 3, bn_images=50, max_batches=1, chunk=2)
    assert len(table) == 3 and len(evaluated) == 3
    csv = pd.read_csv(run.run_dir / ACCURACY_TABLE)
    flat = list(run.space.flat_columns)
    assert list(csv.columns) == [*flat, "id", "top1", "loss", "n", "bn_images"]
    assert csv["top1"].between(0, 100).all() and (csv["n"] > 0).all()
    for g in run.family.gene_groups():  # values in the file, not the int matrix's choice indices
        assert set(np.unique(csv[list(g.columns)])) <= set(g.choices), g.name
    m = frame_codes(run.space, csv)
    assert run.space.check_matrix(m) is None
    assert [a.id for a in run.space.from_matrix(m)] == list(csv["id"])
    assert np.array_equal(m, accuracy_sample(run.space, 3, 0))  # min, max, then the seeded sample

    build_accuracy_table(run, 3, bn_images=50, max_batches=1)  # resumes: nothing left to evaluate
    assert len(evaluated) == 3

    # an untrained supernet's top-1 is noise: the fit is checked on a synthetic target, on the
    # table grown with rows written as the evaluation writes them (values)
    csv["top1"] = _synthetic_top1(run.space, m)
    more = accuracy_sample(run.space, 60, 1)
    extra = values_frame(run.space, more).assign(id=[a.id for a in run.space.from_matrix(more)],
                                                  top1=_synthetic_top1(run.space, more), loss=1.0, n=100)
    extra = extra[~extra["id"].isin(csv["id"])]
    pd.concat([csv, extra], ignore_index=True).to_csv(run.run_dir / ACCURACY_TABLE, index=False)
    df = read_accuracy_table(run.run_dir)
    assert len(df) == len(csv) + len(extra)

    pred, report = fit_accuracy_predictor(run, seed=0)
    assert report["table_rows"] == len(df) and {c["kind"] for c in report["candidates"]} == {"ridge", "gp"}
    assert report["oof"]["kendall_tau"] > 0.5  # ranks unseen subnets of the family
    doc = json.loads((run.run_dir / ACCURACY_PREDICTOR).read_text())
    assert doc["family"] == family and doc["space"] == run.space.to_dict()
    again = load_accuracy_predictor(run.run_dir)
    assert again.space == run.space and again.space.family.name == family
    probe = run.space.sample_matrix(50, 3)
    np.testing.assert_allclose(again.predict(probe), pred.predict(probe))


@pytest.mark.parametrize("features", ["full", "compact"])
def test_generic_features_see_only_the_network(family, features):
    """Features of any family: finite, one width, equal for rows that build the same network
    (inactive genes changed), different for different networks."""
    space = family.space_from_dict({"r": [32, 36, 40]})
    rng = np.random.default_rng(0)
    m = space.sample_matrix(200, rng)
    x = arch_features(space, m, features, 10)
    assert x.shape[0] == 200 and np.isfinite(x).all()
    assert x.shape[1] == arch_features(space, space.from_matrix(m[:3]), features, 10).shape[1]
    noisy = m.copy()
    inactive = ~space.active_mask(m)
    noisy[:, 1:] = np.where(inactive, np.asarray(space.sample_matrix(200, rng))[:, 1:], m[:, 1:])
    assert not np.array_equal(noisy, m)
    np.testing.assert_array_equal(arch_features(space, noisy, features, 10), x)
    if features == "full":
        assert len(np.unique(x, axis=0)) == len(np.unique(m, axis=0))


def test_old_predictor_files_without_a_family_are_mbv3(small_space, tmp_path):
    m = accuracy_sample(small_space, 40, 0)
    y = np.linspace(50, 70, len(m))
    path = make_accuracy_predictor("ridge", small_space, 10).fit(m, y).save(tmp_path / "acc.json")
    doc = json.loads(path.read_text())
    assert doc["family"] == DEFAULT_FAMILY
    del doc["family"]
    path.write_text(json.dumps(doc))
    pred = load_predictor_file(path)
    assert pred.space == small_space
    np.testing.assert_allclose(pred.predict(m), make_accuracy_predictor("ridge", small_space, 10).fit(m, y).predict(m))


# `python -m hwnas` knows hwnas's own families only (registration is per process)
@pytest.mark.parametrize("family_name", [f for f in family_names() if f != DEFAULT_FAMILY])
def test_cli_build_on_a_family_run(family_name, family_supernet, tmp_path):
    import subprocess
    import sys

    from hwnas.run import open_run

    run = open_run(tmp_path / "run", supernet=family_supernet(family_name))
    out = subprocess.run([sys.executable, "-m", "hwnas", "accuracy", "build", "--run", str(run.run_dir),
                          "--samples", "2", "--bn-images", "16"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "2 subnets" in " ".join(out.stderr.split())
    csv = pd.read_csv(run.run_dir / ACCURACY_TABLE)
    flat = list(run.space.flat_columns)
    assert list(csv.columns[:len(flat)]) == flat and len(csv) == 2
    bad = subprocess.run([sys.executable, "-m", "hwnas", "accuracy", "fit", "--run", str(run.run_dir)],
                         capture_output=True, text=True)  # 2 rows: too few, one line
    assert bad.returncode == 2 and "at least 10" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
