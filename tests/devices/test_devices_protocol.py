"""The measurement protocol: shuffled rounds, interleaved reference, drift correction, progress,
and failures that name the candidate."""

from __future__ import annotations

import math

import pytest

from hwnas.devices import Artifact, Device, Runner, get_backend, measure, measure_many
from hwnas.errors import DeviceError, InputError

FAKE = Device(name="fake", backend="torch")


class Machine:
    """A simulated shared machine: slow sinusoidal drift plus a 1.8x slow-down (a neighbour job)
    during the middle of the session. Time advances one tick per inference."""

    def __init__(self) -> None:
        self.tick = 0

    def factor(self) -> float:
        self.tick += 1
        step = 1.8 if 100 <= self.tick < 200 else 1.0
        return step * (1.0 + 0.4 * math.sin(2 * math.pi * self.tick / 300))


class FakeRunner(Runner):
    """Costs `cost_ms` times the machine's current slow-down; optionally fails on call `fail_at`."""

    def __init__(self, machine: Machine, cost_ms: float, fail_at: int | None = None,
                 device: Device = FAKE):
        super().__init__(Artifact("fake", None, (1, 3, 8, 8)), device, {"fake": "1"})
        self.machine, self.cost, self.fail_at, self.calls = machine, cost_ms, fail_at, 0

    def invoke(self, prepared):
        return prepared

    def time_once(self, prepared) -> float:
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise RuntimeError("kernel exploded")
        return self.cost * self.machine.factor()


def test_drift_correction_recovers_true_ratios():
    machine = Machine()
    costs = {"a": 1.5, "b": 2.0, "c": 3.0, "d": 4.0, "e": 6.0}
    runners = {k: FakeRunner(machine, v) for k, v in costs.items()}
    ref = FakeRunner(machine, 1.0)
    res = measure_many(runners, ref, rounds=3, runs=10, warmup_runs=2, warmup_s=0, ref_runs=5)
    assert machine.tick > 250  # the session spans the slow-down
    for k, cost in costs.items():
        s = res[k]
        assert s.ratio == pytest.approx(cost, rel=0.03), k
    plain_err = max(abs(res[k].median_ms / res["a"].median_ms / (c / 1.5) - 1) for k, c in costs.items())
    corrected_err = max(abs(res[k].ratio / res["a"].ratio / (c / 1.5) - 1) for k, c in costs.items())
    assert corrected_err < 0.03 < 0.10 < plain_err  # the correction is what makes it right


def test_stats_shape_and_progress():
    machine = Machine()
    runners = {k: FakeRunner(machine, v) for k, v in {"x": 2.0, "y": 3.0, "z": 1.0}.items()}
    calls = []
    res = measure_many(runners, FakeRunner(machine, 1.0), rounds=4, runs=6, warmup_runs=1,
                       warmup_s=0, ref_runs=3, progress=lambda d, t, i: calls.append((d, t, i)))
    assert list(res) == ["x", "y", "z"]
    assert [d for d, _, _ in calls] == list(range(1, 13)) and {t for _, t, _ in calls} == {12}
    assert sorted(i for _, _, i in calls) == ["x"] * 4 + ["y"] * 4 + ["z"] * 4
    first_round = [i for _, _, i in calls[:3]]
    assert sorted(first_round) == ["x", "y", "z"]
    orders = {tuple(i for _, _, i in calls[r * 3:(r + 1) * 3]) for r in range(4)}
    assert len(orders) > 1  # rounds are shuffled
    for s in res.values():
        assert s.n == 24 and s.rounds == 4 and len(s.ref_ms) == 4 * 2 * 3
        assert s.min_ms <= s.median_ms <= s.p90_ms <= s.p99_ms
        assert s.ref_median_ms > 0 and s.device == "fake"


def test_candidate_failure_names_the_candidate():
    machine = Machine()
    runners = {"good": FakeRunner(machine, 1.0), "bad": FakeRunner(machine, 1.0, fail_at=8)}
    with pytest.raises(DeviceError, match=r"measuring candidate 'bad' on device 'fake' failed "
                       r"\(round 1\): RuntimeError: kernel exploded"):
        measure_many(runners, FakeRunner(machine, 1.0), rounds=2, runs=10, warmup_s=0)


def test_reference_failure_is_reported():
    machine = Machine()
    with pytest.raises(DeviceError, match="the reference model failed"):
        measure_many({"a": FakeRunner(machine, 1.0)}, FakeRunner(machine, 1.0, fail_at=1))


def test_reference_on_another_device_is_refused():
    other = Device(name="other", backend="torch")
    with pytest.raises(DeviceError, match="both must share one"):
        measure_many({"a": FakeRunner(Machine(), 1.0, device=other)}, FakeRunner(Machine(), 1.0))


@pytest.mark.parametrize("kw", [{"runs": 0}, {"rounds": 0}, {"warmup_s": -1}, {"ref_runs": 0}])
def test_bad_settings(kw):
    with pytest.raises(InputError):
        measure_many({"a": FakeRunner(Machine(), 1.0)}, FakeRunner(Machine(), 1.0), **kw)


def test_measure_with_reference_is_one_round():
    machine = Machine()
    s = measure(FakeRunner(machine, 2.0), reference=FakeRunner(machine, 1.0), runs=7, warmup_s=0)
    assert s.n == 7 and s.rounds == 1 and len(s.ref_ms) == 10
    assert s.ratio == pytest.approx(2.0, rel=0.05)


def test_measure_many_on_onnxruntime(tiny_net, make_net, example_input, tmp_path):
    """Real runners: the reference measured as a candidate corrects to ~ its own median, and a
    much bigger net stays much slower after correction."""
    backend = get_backend("cpu-ort")
    ref = backend.load(backend.compile(tiny_net, example_input, tmp_path / "ref"))
    # 16x the width of the reference: its time is compute, not the runtime's per-call overhead
    big = backend.load(backend.compile(make_net(256), example_input, tmp_path / "big"))
    res = measure_many({"ref": ref, "big": big}, ref, rounds=3, runs=8, warmup_runs=2,
                       warmup_s=0.02, ref_runs=5)
    s = res["ref"]
    assert s.corrected_ms == pytest.approx(s.median_ms, rel=0.25)
    assert s.corrected_ms == pytest.approx(s.ref_median_ms, rel=0.25)
    assert res["big"].corrected_ms > 3 * s.corrected_ms
    assert res["big"].n == 24 and len(res["big"].ref_ms) == 30
    assert res["big"].threads == 1 and res["big"].backend == "onnxruntime"


def test_later_rounds_rewarm_briefly_and_anchor_sets_the_scale():
    machine = Machine()
    cand, ref = FakeRunner(machine, 3.0), FakeRunner(machine, 1.0)
    res = measure_many({"c": cand}, ref, rounds=4, runs=10, warmup_runs=5, warmup_s=0.0,
                       rewarm_runs=2, ref_runs=5, anchor_ms=2.0)["c"]
    assert cand.calls == (5 + 10) + 3 * (2 + 10)  # full warm-up once, then 2 runs per round
    assert res.warmup == 5 and res.n == 40
    assert res.ref_median_ms == 2.0 and res.corrected_ms == pytest.approx(2.0 * res.ratio)
    assert res.ratio == pytest.approx(3.0, rel=0.05)
    with pytest.raises(InputError, match="anchor_ms"):
        measure_many({"c": cand}, ref, anchor_ms=0.0)
    rescaled = res.rescaled(4.0)
    assert rescaled.ratio == pytest.approx(res.ratio) and rescaled.corrected_ms == pytest.approx(4 * res.ratio)


def test_garbage_collection_is_paused_only_while_timing():
    import gc

    class Recording(FakeRunner):
        def time_once(self, prepared) -> float:
            self.seen = getattr(self, "seen", []) + [gc.isenabled()]
            return super().time_once(prepared)

    runner = Recording(Machine(), 1.0)
    assert gc.isenabled()
    measure(runner, runs=5, warmup_runs=3, warmup_s=0.0)
    assert runner.seen == [True] * 3 + [False] * 5 and gc.isenabled()
