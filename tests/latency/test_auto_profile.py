"""`hwnas profile --samples auto`: the loop (on a replayed measured table), the pick, the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hwnas.families import NetworkSpec
from hwnas.errors import InputError
from hwnas.latency.analytic import AnalyticPredictor
from hwnas.latency.api import read_latency_table
from hwnas.latency.auto_profile import AutoSettings, auto_profile, pick_uncertain
from hwnas.space import SearchSpace

SUBNETS = Path(__file__).parents[1] / "latency" / "data" / "ofa_cpu_subnets.csv"


def test_pick_uncertain_takes_the_most_uncertain_of_each_latency_bin():
    center = np.arange(10.0)
    spread = np.array([0, 5, 0, 0, 0, 0, 0, 9, 1, 0], dtype=float)
    assert sorted(pick_uncertain(spread, center, 2).tolist()) == [1, 7]
    assert len(pick_uncertain(spread, center, 20)) == 10


def test_auto_stops_when_the_cv_error_stops_improving():
    """Replays the measured CPU table: measuring = looking a subnet up (prior: the first 150 rows,
    so the loop never sees a row its prior was fitted on)."""
    m, y, df = read_latency_table(SUBNETS, "ort_ms", "ofa-mbv3")
    y = 0.5 * (y + df["ort_ms_repeat"].to_numpy())
    prior = AnalyticPredictor("compact", "log", 1e-3, net=NetworkSpec("ofa-mbv3", 1.0, 10)).fit(m[:150], y[:150])
    prior.meta.notes.prior = "first-150"
    space = SearchSpace(r_choices=tuple(range(32, 65, 4)))
    truth = {a.id: v for a, v in zip(space.from_matrix(m[150:]), y[150:])}
    asked: list[int] = []

    def measure(archs):
        asked.append(len(archs))
        return np.array([truth[a.id] for a in archs])

    first = space.from_matrix(m[150:160])
    result = auto_profile(space, measure, AutoSettings(start=10, batch=5, max_samples=40), n_classes=10,
                          first=first, candidates=m[150:], priors=[prior])
    assert asked[0] == 10 and all(k == 5 for k in asked[1:])
    assert result.samples == sum(asked) <= 40 and len(set(result.measured_ids)) == result.samples
    assert result.stopped in ("converged", "max_samples")
    assert [h["n"] for h in result.history] == list(np.cumsum(asked))
    assert "prior first-150" in result.chosen


def test_settings_are_checked():
    with pytest.raises(InputError, match="start"):
        AutoSettings(start=2).check()
    with pytest.raises(InputError, match="budget"):
        AutoSettings(budget_s=0).check()


def test_cli_refuses_bad_samples(tmp_path):
    from hwnas.cli import main

    for argv, msg in ((["--samples", "many"], "--samples"), (["--samples", "20", "--time-budget", "5"],
                                                              "--time-budget")):
        with pytest.raises(SystemExit) as err:
            main(["profile", "--device", "cpu-ort", "--run", str(tmp_path / "r"), *argv])
        assert err.value.code == 2


def test_profile_samples_auto_measures_a_real_device_until_its_budget(capsys, tmp_path, tiny_supernet):
    """The whole path on cpu-ort: the loop measures through the profile stage into the store."""
    from cli_calls import cli

    from hwnas.profiling.store import MeasurementStore

    run = tmp_path / "run"
    code, out = cli(capsys, "profile", "--run", str(run), "--supernet", str(tiny_supernet), "--device",
                    "cpu-ort", "--samples", "auto", "--time-budget", "0.05", "--rounds", "3", "--runs", "2")
    assert code == 0, out
    taken = int(out.split("took ")[1].split(" subnets")[0])
    assert "(budget)" in out and taken >= 10
    assert len(MeasurementStore(run).keys("cpu-ort", "subnet")) == taken
