"""OpenVINO builds its IR without the converter's telemetry: the same graph as
`openvino.convert_model`, no usage event sent, no process forked to send one."""

from __future__ import annotations

import multiprocessing
from collections import Counter

import pytest

from hwnas.devices import get_backend, get_device
from hwnas.devices.onnx_export import export_onnx
from hwnas.devices._imports import missing_module
from hwnas.devices.openvino_backend import import_openvino, onnx_to_ov_model

if missing_module("openvino", "openvino"):
    pytest.skip(missing_module("openvino", "openvino"), allow_module_level=True)
ov = import_openvino("tests")  # as hwnas imports it, without usage telemetry


def _op_types(model) -> Counter:
    return Counter(op.get_type_name() for op in model.get_ops())


def test_the_graph_is_the_converters(tiny_net, example_input, tmp_path, monkeypatch):
    onnx_path = export_onnx(tiny_net, example_input, tmp_path / "model.onnx")
    ours = onnx_to_ov_model(ov, onnx_path)
    parsed = ov.Core().read_model(str(onnx_path))
    monkeypatch.setenv("CI", "true")  # the converter's own switch: no telemetry on CI machines
    assert _op_types(ours) == _op_types(ov.convert_model(str(onnx_path)))
    assert len(ours.get_ops()) < len(parsed.get_ops())  # the converter's fusions were applied


@pytest.mark.parametrize("name", ["cpu-openvino", "cpu-openvino-int8"])
def test_compiling_sends_no_telemetry(name, tiny_net, example_input, tmp_path, monkeypatch):
    device = get_device(name)
    backend = get_backend(device)
    if backend.available() is not None:
        pytest.skip(f"{name}: {backend.available()}")
    events, forks = [], []
    telemetry = pytest.importorskip("openvino_telemetry", reason="no telemetry package to catch")
    monkeypatch.setattr(telemetry.Telemetry, "send_event", lambda *a, **k: events.append(a))
    monkeypatch.setattr(multiprocessing.Process, "start", lambda self: forks.append(self))
    artifact = backend.compile(tiny_net, example_input, tmp_path)
    with backend.load(artifact) as runner:
        assert runner.run(example_input.numpy()).shape == (1, 10)
    assert events == [] and forks == []
