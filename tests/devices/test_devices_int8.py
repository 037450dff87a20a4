"""INT8 device variants: real quantized artifacts that run, stay close to fp32, say how much of the
model runs in int8 and which calibration images they used; unusable ones say why in one line."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from hwnas.devices import Device, get_backend, get_device, list_devices
from hwnas.errors import DeviceError

CPU_INT8 = ["cpu-ort-int8", "cpu-openvino-int8", "mobile-xnnpack-int8"]
PARAMS = [*CPU_INT8, pytest.param("trt-int8", marks=pytest.mark.gpu)]


def _usable(name: str) -> Device:
    device = get_device(name)
    reason = device.available()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return device


@pytest.fixture(scope="module", params=PARAMS)
def int8(request, tiny_net, example_input, digits, tmp_path_factory):
    """(device, artifact, runner), calibrated on training digits (never the held-out ones)."""
    device = _usable(request.param)
    backend = get_backend(device)
    artifact = backend.compile(tiny_net, example_input, tmp_path_factory.mktemp(device.name),
                               calibration=digits[:64])
    runner = backend.load(artifact)
    yield device, artifact, runner
    runner.close()


def test_int8_outputs_stay_close_to_fp32(int8, tiny_net, test_inputs):
    _, artifact, runner = int8
    assert artifact.precision == "int8"
    with torch.no_grad():
        expected = np.concatenate([tiny_net(torch.from_numpy(x)).numpy() for x in test_inputs])
    got = np.concatenate([runner.run(x) for x in test_inputs])
    scale = np.abs(expected).max()
    err = np.abs(got - expected).max()
    assert err < 0.1 * scale, f"int8 error {err:.3g} vs logits up to {scale:.3g}"
    # the input-dependent part (what tells digits apart) survives quantization
    moves, moves_int8 = expected - expected.mean(0), got - got.mean(0)
    assert np.corrcoef(moves.ravel(), moves_int8.ravel())[0, 1] > 0.9
    assert np.mean(got.argmax(1) == expected.argmax(1)) >= 0.75
    assert not np.allclose(got, expected, atol=1e-6), "identical to fp32: nothing was quantized"


def test_int8_share_and_calibration_are_recorded(int8):
    _, artifact, _ = int8
    meta = artifact.metadata
    assert 0 < meta["int8_share"] <= 1 and meta["int8_layers"] <= meta["layers"]
    assert meta["calibration"] == "images" and meta["calibration_images"] == 64
    assert meta["int8_share_source"]


def test_without_images_calibration_is_synthetic_and_said(tiny_net, example_input, tmp_path):
    backend = get_backend(_usable("cpu-ort-int8"))
    meta = backend.compile(tiny_net, example_input, tmp_path).metadata
    assert meta["calibration"] == "synthetic" and meta["int8_share"] > 0


def test_calibration_images_are_resized_and_wrong_channels_refused(tiny_net, digits, tmp_path):
    backend = get_backend(_usable("cpu-ort-int8"))
    x = torch.zeros(1, 3, 24, 24)
    art = backend.compile(tiny_net, x, tmp_path / "a", calibration=digits[:8])  # 32x32 -> 24x24
    assert art.metadata["calibration"] == "images" and art.input_shape == (1, 3, 24, 24)
    with pytest.raises(DeviceError) as err:
        backend.compile(tiny_net, x, tmp_path / "b", calibration=digits[:8, :1])
    assert "\n" not in str(err.value) and "calibration images must be (N, 3, H, W)" in str(err.value)


def test_fp32_devices_ignore_calibration(tiny_net, example_input, digits, tmp_path):
    art = get_backend("cpu-ort").compile(tiny_net, example_input, tmp_path, calibration=digits[:8])
    assert art.precision == "fp32" and "calibration" not in art.metadata


@pytest.mark.parametrize("name, blocked, says", [
    ("mobile-xnnpack-int8", "torchao", "torchao not installed"),
    ("cpu-ort-int8", "onnxruntime", "onnxruntime not installed"),
])
def test_missing_quantization_library_is_one_line(monkeypatch, tmp_path, tiny_net, example_input,
                                                  name, blocked, says):
    monkeypatch.setitem(sys.modules, blocked, None)  # find_spec/import now fail as if absent
    device = get_device(name)
    reason = device.available()
    assert reason and reason.startswith(says) and "\n" not in reason
    with pytest.raises(DeviceError) as err:
        get_backend(device).compile(tiny_net, example_input, tmp_path)
    assert "\n" not in str(err.value) and says in str(err.value)


def test_openvino_nncf_quantizer_needs_nncf_or_is_usable():
    device = Device(name="ov-int8-nncf", backend="openvino", precision="int8",
                    options={"quantizer": "nncf"})
    reason = device.available()
    if "nncf" in sys.modules or reason is None:
        return
    assert reason == "nncf not installed: pip install 'hwnas[nncf]'"
    bad = Device(name="ov-int8-x", backend="openvino", precision="int8", options={"quantizer": "x"})
    assert bad.available().startswith("unknown quantizer 'x'")


def test_devices_list_shows_int8_variants_with_availability():
    rows = {row["name"]: row for row in list_devices()}
    for name in [*CPU_INT8, "trt-int8"]:
        assert " int8" in rows[name]["options"]
        assert rows[name]["available"] is None or "\n" not in rows[name]["available"]
    if not torch.cuda.is_available():
        assert rows["trt-int8"]["available"]
