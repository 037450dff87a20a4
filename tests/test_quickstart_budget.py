"""The quickstart's default budget comes from its profile stage's own subnets, so a rerun (after
front profiling and verification measured more) searches under the same budget and measures nothing."""

from __future__ import annotations

import pytest

from hwnas.profiling.protocol import ProtocolSettings
from hwnas.quickstart import default_budget

DEV = "cpu-ort"
FAST = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)


def test_later_measurements_do_not_move_the_default_budget(tiny_supernet, tmp_path):
    from hwnas.devices import get_device
    from hwnas.profiling.stage import measure_subnets, select_subnets
    from hwnas.profiling.store import MeasurementStore, read_measurements
    from hwnas.run import open_run

    reason = get_device(DEV).available()
    if reason:
        pytest.skip(reason)
    run = open_run(tmp_path / "run", supernet=tiny_supernet)
    measure_subnets(run, DEV, select_subnets(run.space, 4, seed=0, n_classes=run.n_classes), protocol=FAST)
    before = default_budget(run, DEV, 4, 0)
    ms = read_measurements(run.run_dir, device=DEV, kind="subnet")["corrected_ms"]
    assert min(ms) < before < max(ms)

    row = read_measurements(run.run_dir, device=DEV, kind="subnet").iloc[0].to_dict()
    MeasurementStore(run.run_dir).append([{**row, "key": "000000000000", "corrected_ms": min(ms) / 10}])
    assert default_budget(run, DEV, 4, 0) == before  # a faster subnet measured later: same budget
