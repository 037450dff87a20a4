"""bf16 devices (`cpu-openvino-bf16`, or a user's `precision: bf16` OpenVINO device): usable exactly
where OpenVINO's plugin lists BF16 among its OPTIMIZATION_CAPABILITIES, else unavailable with the
reason; they run close to fp32 but not bit-equal, and a tiny run profiles on them."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from runtime_helpers import openvino_or_skip
import torch

from hwnas.devices import get_backend, get_device, list_devices, load_devices
from hwnas.devices.registry import precision_variant
from hwnas.errors import DeviceError

BF16 = "cpu-openvino-bf16"


def _openvino():
    return openvino_or_skip()


def _usable(name: str, devices_file=None):
    device = get_device(name, devices_file)
    reason = device.available()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return device


def test_availability_is_what_openvinos_cpu_plugin_says():
    ov = _openvino()
    caps = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    row = {r["name"]: r for r in list_devices()}[BF16]
    assert " bf16 " in f" {row['options']} " and row["backend"] == "openvino"
    if "BF16" in caps:
        assert row["available"] is None
    else:
        assert "cannot run bf16" in row["available"] and "\n" not in row["available"]


def test_without_bf16_the_device_says_why_in_one_line(monkeypatch, tiny_net, example_input, tmp_path):
    from hwnas.devices import openvino_backend

    _openvino()
    monkeypatch.setattr(openvino_backend, "plugin_capabilities", lambda target: ("WINOGRAD", "FP32", "INT8"))
    reason = get_device(BF16).available()
    assert reason == ("OpenVINO's CPU plugin cannot run bf16 on this machine (its OPTIMIZATION_CAPABILITIES: "
                      "WINOGRAD, FP32, INT8; bf16 needs a CPU with AVX512-BF16 or AMX)")
    assert get_device("cpu-openvino").available() is None  # f32 and INT8 need no capability
    with pytest.raises(DeviceError) as err:
        get_backend(BF16).compile(tiny_net, example_input, tmp_path)
    assert str(err.value) == f"device '{BF16}' is not usable here: {reason}"


def test_capabilities_are_asked_in_a_child_process_when_openvino_is_not_loaded(monkeypatch):
    from hwnas.devices.openvino_backend import plugin_capabilities

    ov = _openvino()
    expected = tuple(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    ask = plugin_capabilities.__wrapped__  # uncached
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if not imported: the child answers
    assert ask("CPU") == expected
    missing = ask("NO_SUCH_DEVICE")
    assert isinstance(missing, str) and missing and "\n" not in missing


def test_bf16_runs_close_to_fp32_but_not_in_fp32(tiny_net, example_input, digits, tmp_path):
    device = _usable(BF16)
    backend = get_backend(device)
    artifact = backend.compile(tiny_net, example_input, tmp_path)
    assert artifact.precision == "bf16" and "calibration" not in artifact.metadata
    images = digits[4000:4064]
    with torch.no_grad():
        expected = tiny_net(torch.from_numpy(images)).numpy()
    with backend.load(artifact) as runner:
        assert runner.precision_hint == "bf16" and runner.how()["precision"] == "bf16"
        got = np.concatenate([runner.run(images[i:i + 1]) for i in range(len(images))])
    rel_rms = np.sqrt(np.mean((got - expected) ** 2) / np.mean(expected ** 2))
    assert 1e-6 < rel_rms < 0.05, f"relative RMS {rel_rms:.3g}"  # bf16, not f32 and not broken
    assert np.mean(got.argmax(1) == expected.argmax(1)) >= 0.95


def test_a_user_bf16_device_is_its_fp32_devices_variant(tmp_path, tiny_net, example_input):
    path = tmp_path / "devices.yaml"
    path.write_text("devices:\n"
                    "  - name: xeon-openvino\n    backend: openvino\n    threads: 2\n"
                    "  - name: xeon-openvino-bf16\n    backend: openvino\n    precision: bf16\n    threads: 2\n")
    devices = load_devices(path)
    assert devices["xeon-openvino-bf16"].precision == "bf16"
    assert precision_variant("xeon-openvino", "bf16", path) == "xeon-openvino-bf16"
    assert precision_variant("cpu-openvino", "bf16", path) == BF16
    assert precision_variant(BF16, "bf16") == BF16  # a bf16 device is its own variant
    assert devices["xeon-openvino-bf16"].available() == get_device(BF16).available()
    device = _usable("xeon-openvino-bf16", path)
    with get_backend(device).compile_and_load(tiny_net, example_input, tmp_path / "m") as runner:
        assert runner.threads == 2 and runner.precision_hint == "bf16"


def test_a_device_without_a_bf16_variant_names_those_with_one():
    with pytest.raises(DeviceError) as err:
        precision_variant("cpu-ort", "bf16")
    assert str(err.value) == ("device 'cpu-ort' has no bf16 variant (no bf16 device named 'cpu-ort-bf16'); "
                              "devices with one: cpu-openvino (or add 'cpu-ort-bf16' with precision: bf16 "
                              "to a devices YAML)")


def test_a_tiny_run_profiles_on_the_bf16_device(tmp_path, tiny_supernet):
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import profile
    from hwnas.profiling.store import read_measurements
    from hwnas.run import open_run

    _usable(BF16)
    run = open_run(tmp_path / "run", tiny_supernet)
    res = profile(run, [BF16], 2, protocol=ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0))
    assert res[0]["measured"] == 2
    df = read_measurements(run.run_dir, device=BF16, kind="subnet")
    assert len(df) == 2 and (df["precision"] == "bf16").all() and (df["corrected_ms"] > 0).all()
