"""Measuring in one place (issue 16 part 5): the measuring session's one call, used by profiling,
search verification and export; a remote device as a session subclass; INT8 calibration images."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hwnas.devices import get_device
from hwnas.profiling.anchors import reference_arch, run_anchor
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.session import CalibrationImages, DeviceSession, RemoteSession, open_session
from hwnas.profiling.stage import measure_subnets, profile
from hwnas.profiling.store import MeasurementStore, read_measurements
from hwnas.run import open_run
from hwnas.supernet.data import CALIBRATION_IMAGES

FAST = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("HWNAS_STATE_DIR", str(tmp_path / "state"))  # a fresh anchor book


@pytest.fixture
def calls(monkeypatch):
    """Every key `DeviceSession.measure` (the one call) is asked to time."""
    seen: list[str] = []
    real = DeviceSession.measure

    def spy(self, key, what, **kw):
        seen.append(key)
        return real(self, key, what, **kw)

    monkeypatch.setattr(DeviceSession, "measure", spy)
    return seen


def test_one_call_times_artifacts_and_runners_beside_one_reference_on_the_run_anchor(
        tmp_path, tiny_supernet, state):
    import torch

    from hwnas.profiling.anchors import build_timing_subnet

    run = open_run(tmp_path / "run", tiny_supernet)
    store = MeasurementStore(run.run_dir)
    arch = run.space.sample(rng=3)
    with open_session(run, "cpu-ort", protocol=FAST) as session:
        assert type(session) is DeviceSession and session.anchor_ms is None
        compiled: list[str] = []
        real_compile = session.backend.compile

        def compile(module, x, workdir, **kw):
            compiled.append(Path(workdir).name)
            return real_compile(module, x, workdir, **kw)

        session.backend.compile = compile
        anchor = session.calibrate_anchor(store)
        assert anchor > 0 and run_anchor(run.run_dir, "cpu-ort", run.space) == anchor
        artifact = session.compile(arch.id, build_timing_subnet(arch, run.n_classes),
                                   torch.zeros(1, 3, arch.r, arch.r))
        a = session.measure(arch.id, artifact)
        runner = session.backend.load(artifact)
        try:
            b = session.measure(arch.id, runner)  # a loaded runner (what export holds)
        finally:
            runner.close()
        assert compiled == ["reference", arch.id]  # the reference is compiled once per session
        for stats in (a, b):
            assert stats.ref_median_ms == anchor and stats.corrected_ms > 0
        workdir = session.workdir
    assert not workdir.exists()  # the session's scratch folder goes with it
    # a second session of the run reads the same anchor, without calibrating again
    with open_session(run, "cpu-ort", protocol=FAST) as again:
        assert again.calibrate_anchor(store) == anchor
    assert len(read_measurements(run.run_dir, kind="reference")) == 1


def test_verification_and_export_measure_through_the_one_call(tmp_path, tiny_supernet, state, calls):
    from hwnas.export.api import _Compiled, _Exporter
    from hwnas.export.verify import Report

    run = open_run(tmp_path / "run", tiny_supernet)
    archs = [run.space.sample(rng=1), run.space.sample(rng=2)]
    df = measure_subnets(run, "cpu-ort", archs, protocol=FAST)  # what search verification calls
    anchor = run_anchor(run.run_dir, "cpu-ort", run.space)
    assert list(df.index) == [a.id for a in archs] and (df["ref_median_ms"] == anchor).all()
    assert calls[0].startswith("reference:") and calls[1:] == [a.id for a in archs]
    again = measure_subnets(run, "cpu-ort", archs, protocol=FAST)  # reruns skip what exists
    assert len(calls) == 3 and (again["corrected_ms"] == df["corrected_ms"]).all()

    class Cand:
        def predicted_latency_ms(self, device):
            return 1.0

    with _Exporter(run.run_dir, "cpu-ort", None, None, 8, True, FAST, None) as ex:
        session = ex._measuring()
        import torch

        from hwnas.profiling.anchors import build_timing_subnet

        arch = archs[0]
        artifact = session.compile("x", build_timing_subnet(arch, run.n_classes),
                                   torch.zeros(1, 3, arch.r, arch.r))
        compiled = _Compiled(artifact, {}, runners=[("onnx", session.backend.load(artifact), None)])
        try:
            latency = ex._latency(compiled, arch, Cand(), Report())
            # a check over budget is timed again paired: the bundle and its twin as verification
            # compiles it, in one call beside one reference; the bundle's runner stays loaded
            bundle, twin = ex._paired(arch, compiled.runners[0][1])
            assert bundle.ref_median_ms == twin.ref_median_ms == anchor and bundle.rounds == twin.rounds
            assert ex._paired(arch, compiled.runners[0][1])[0].corrected_ms > 0
        finally:
            compiled.runners[0][1].close()
        assert ex._measuring() is session
    assert calls[-1] == arch.id and latency["measured"]["ref_median_ms"] == anchor
    assert latency["profiled"]["corrected_ms"] == float(df.loc[arch.id, "corrected_ms"])


class _FakeAgent:
    """A remote backend: compiles here, `measure_many` on the agent (recorded), loads nothing."""

    def __init__(self, device):
        self.device, self.sent = device, []

    def compile(self, module, x, workdir, calibration=None):
        from hwnas.devices.base import Artifact

        Path(workdir).mkdir(parents=True, exist_ok=True)
        return Artifact(format="onnx", path=None, input_shape=tuple(x.shape), input_dtype="float32",
                        device=self.device.name, backend="remote", precision="fp32",
                        metadata={"name": Path(workdir).name})

    def load(self, artifact):
        raise AssertionError("a remote session never loads a model here")

    def measure_many(self, artifacts, reference, **protocol):
        from hwnas.devices.stats import summarize

        self.sent.append((list(artifacts), reference.metadata["name"], protocol["rounds"]))
        # the agent's own reference median is 1 ms, the candidate 2x it
        return {k: summarize([2.0, 2.0, 2.0], warmup=0, corrected_ms=2.0, ref_median_ms=1.0,
                             ref_ms=[1.0, 1.0]) for k in artifacts}


def test_a_subnet_and_a_hand_designed_network_are_timed_together(tmp_path, tiny_supernet, state):
    """`measure_paired`: one call times both, so the ratio is the subnet's own against the model's;
    a larger subnet against the same model gives a larger ratio."""
    from hwnas.profiling.stage import measure_paired

    run = open_run(tmp_path / "run", tiny_supernet)
    small, large = run.space.min_arch(), run.space.max_arch()
    ratio, se = measure_paired(run, "cpu-ort", small, "timm:lcnet_050@r32", protocol=FAST)
    assert 0 < ratio < 100 and 0 <= se < 1
    assert measure_paired(run, "cpu-ort", large, "timm:lcnet_050@r32", protocol=FAST)[0] > ratio
    assert read_measurements(run.run_dir).empty  # nothing is stored: the ratio is the answer


def test_a_remote_device_is_a_session_subclass(tmp_path, tiny_supernet):
    import torch

    from hwnas.devices.device import Device

    run = open_run(tmp_path / "run", tiny_supernet)
    pi = Device(name="pi", backend="onnxruntime", host="127.0.0.1", port=1, token_file=str(tmp_path / "t"))
    agent = _FakeAgent(pi)
    store = MeasurementStore(run.run_dir)
    with open_session(run, pi, backend=agent, protocol=FAST) as session:
        assert type(session) is RemoteSession and session.calibration is None
        anchor = session.calibrate_anchor(store)  # per run: no host anchor book
        art = session.compile("a", torch.nn.Conv2d(3, 4, 3), torch.zeros(1, 3, 8, 8))
        stats = session.measure("a", art)
        paired = session.measure_together({"a": art, "b": art})
    assert agent.sent[0][1:] == ("reference", 3 * FAST.rounds)  # the anchor: 3x the rounds
    assert agent.sent[1] == (["a"], "reference", FAST.rounds)
    assert agent.sent[2] == (["a", "b"], "reference", FAST.rounds)  # one call on the agent
    assert {k: v.ref_median_ms for k, v in paired.items()} == {"a": anchor, "b": anchor}
    assert stats.ref_median_ms == anchor
    ref_row = read_measurements(run.run_dir, kind="reference").iloc[0]
    assert json.loads(ref_row["meta"]) == {"anchor_key": None}


def test_int8_profiling_calibrates_on_the_runs_training_images(tmp_path, tiny_supernet, state,
                                                               monkeypatch):
    if get_device("cpu-ort-int8").available():
        pytest.skip(get_device("cpu-ort-int8").available())
    loads: list[int] = []
    real = CalibrationImages.__call__

    def counted(self):
        if not self.loaded:
            loads.append(1)
        return real(self)

    monkeypatch.setattr(CalibrationImages, "__call__", counted)
    seen: list[str | None] = []
    from hwnas.devices.base import Backend

    real_compile = Backend.compile

    def compile(self, module, x, workdir, *, calibration=None):
        seen.append(None if calibration is None else f"{calibration.shape}:{float(calibration.sum()):.4f}")
        return real_compile(self, module, x, workdir, calibration=calibration)

    monkeypatch.setattr(Backend, "compile", compile)

    run = open_run(tmp_path / "run", tiny_supernet)
    profile(run, ["cpu-ort"], 1, protocol=FAST)  # fp32: no data loaded, no images given
    assert loads == [] and seen == [None, None]

    seen.clear()
    profile(run, ["cpu-ort-int8"], 2, protocol=FAST)
    assert loads == [1]  # loaded once, for the reference and every subnet
    assert len(seen) == 3 and seen[0] is not None and len(set(seen)) == 1
    assert seen[0].startswith(f"({CALIBRATION_IMAGES}, 3,")
    rows = read_measurements(run.run_dir, device="cpu-ort-int8", kind="subnet")
    metas = [json.loads(m) for m in rows["meta"]]
    assert len(rows) == 2 and all(m["calibration"] == "images" for m in metas)
    assert all(m["calibration_images"] == CALIBRATION_IMAGES for m in metas) and (rows["corrected_ms"] > 0).all()
    assert all(m["reference"] == reference_arch(run.space).to_ofa_dict() for m in metas)
    fp32 = read_measurements(run.run_dir, device="cpu-ort", kind="subnet")
    assert "calibration" not in json.loads(fp32["meta"].iloc[0])  # fp32 rows as before
    assert np.isfinite(rows["rel_se"]).all()
