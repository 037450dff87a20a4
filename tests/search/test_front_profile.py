"""Profiling the predicted front: subnets spread along it are measured and the latency predictor is
refitted on them, once (a rerun of the quickstart finds them recorded)."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import InputError
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.search.front_profile import front_profiled, front_subnets, profile_front

DEV = "cpu-ort"
FAST = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)


@pytest.fixture
def run(tiny_supernet, tmp_path):
    from search_stubs import fit_stub_predictors

    from hwnas.devices import get_device
    from hwnas.profiling.stage import measure_subnets
    from hwnas.run import open_run

    reason = get_device(DEV).available()
    if reason:
        pytest.skip(reason)
    cfg = open_run(tmp_path / "run", supernet=tiny_supernet)
    fit_stub_predictors(cfg, DEV)
    measure_subnets(cfg, DEV, [cfg.space.sample(rng=i) for i in range(6)], protocol=FAST)
    return cfg


def test_the_front_is_profiled_and_the_predictor_refitted_on_it(run):
    from hwnas.latency import load_predictor
    from hwnas.profiling.store import read_measurements

    archs = front_subnets(run, DEV, 4)
    predicted = load_predictor(run.files.latency_predictor(DEV)).predict(archs)
    assert len({a.id for a in archs}) == 4 and np.all(np.diff(predicted) > 0)  # spread, fastest first
    assert front_profiled(run, DEV) is None  # the stub predictor was fitted without them
    report = profile_front(run, DEV, 4, protocol=FAST)
    measured = set(read_measurements(run.run_dir, device=DEV, kind="subnet")["key"])
    assert set(report["front"]) <= measured and len(measured) >= 6 + 1
    pred = load_predictor(run.files.latency_predictor(DEV))
    assert set(report["front"]) <= set(pred.meta.notes.fitted_on)  # trained where the search looks
    assert front_profiled(run, DEV) == report["front"]


def test_without_an_accuracy_predictor_there_is_no_front(run):
    run.files.accuracy_predictor.unlink()
    with pytest.raises(InputError, match="no accuracy predictor"):
        front_subnets(run, DEV, 4)
    with pytest.raises(InputError, match="at least 1"):
        front_subnets(run, DEV, 0)
