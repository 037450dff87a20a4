"""Device registry: built-ins, user devices from YAML, and one-line errors for every mistake."""

from __future__ import annotations

import pytest

from hwnas.devices import Device, backend_names, get_backend, get_device, list_devices, load_devices
from hwnas.errors import DeviceError

BUILTINS = ["cpu-torch", "cpu-ort", "cpu-openvino", "mobile-xnnpack", "edge-portable", "mobile-litert",
            "cuda-torch", "cuda-ort", "trt"]
INT8 = ["cpu-ort-int8", "cpu-openvino-int8", "mobile-xnnpack-int8", "trt-int8"]  # test_devices_int8
BF16 = ["cpu-openvino-bf16"]  # test_devices_bf16


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text, f"error spans lines: {text!r}"
    return text


def test_builtin_devices_and_defaults():
    for name in BUILTINS:
        device = get_device(name)
        assert device.name == name and device.threads == 1 and device.batch == 1
        assert device.precision == "fp32"
    assert get_device("cpu-ort").provider == "CPUExecutionProvider"
    assert get_device("cuda-torch").provider == "cuda"


def test_unknown_device_names_the_known_ones_and_the_fix():
    with pytest.raises(DeviceError) as err:
        get_device("tpu-v9")
    text = _one_line(err)
    assert text.startswith("unknown device 'tpu-v9'; known: cpu-torch, cpu-ort")
    assert "devices YAML" in text


def test_user_devices_from_yaml(tmp_path):
    path = tmp_path / "devices.yaml"
    path.write_text("devices:\n"
                    "  - name: cpu-ort-2t\n    backend: onnxruntime\n    threads: 2\n"
                    "  - name: ov-bf16\n    backend: openvino\n    precision: bf16\n"
                    "    options: {config: {PERFORMANCE_HINT: LATENCY}}\n")
    devices = load_devices(path)
    assert list(devices) == ["cpu-ort-2t", "ov-bf16"]
    assert devices["cpu-ort-2t"].threads == 2
    assert devices["cpu-ort-2t"].provider == "CPUExecutionProvider"  # backend default filled in
    assert get_device("ov-bf16", devices_file=path).precision == "bf16"
    names = [row["name"] for row in list_devices(path)]
    assert names == BUILTINS + INT8 + BF16 + ["cpu-ort-2t", "ov-bf16"]


def test_mapping_form(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("devices:\n  box:\n    backend: torch\n    threads: 3\n")
    assert load_devices(path)["box"].threads == 3


@pytest.mark.parametrize("text, expected", [
    ("devices: [\n", "is not valid YAML"),
    ("devices:\n  - name: x\n    backend: tflite\n",
     "device 'x': backend: unknown backend 'tflite'; known: torch, onnxruntime, openvino, "
     "executorch, litert, tensorrt"),
    ("devices:\n  - name: x\n    backend: torch\n    thread: 2\n",
     "device 'x': thread: unknown field; allowed: name, backend, threads"),
    ("devices:\n  - name: x\n    backend: torch\n    threads: 0\n",
     "device 'x': threads: Input should be greater than or equal to 1"),
    ("devices:\n  - name: x\n    backend: onnxruntime\n    precision: fp16\n",
     "backend onnxruntime with provider CPUExecutionProvider supports precision fp32, int8; got fp16"),
    ("devices:\n  - name: x\n    backend: torch\n    precision: fp8\n", "device 'x': precision:"),
    ("devices:\n  - name: cpu-ort\n    backend: onnxruntime\n", "'cpu-ort' is a built-in device"),
    ("devices:\n  - {name: a, backend: torch}\n  - {name: a, backend: torch}\n",
     "device 'a' is defined twice"),
    ("devices:\n  - backend: torch\n", "device '?': name: Field required"),
    ("- name: a\n  backend: torch\n", "must hold one key 'devices'"),
    ("devices: 3\n", "'devices' must be a list"),
    ("devices:\n  - just-a-name\n", "each device must be a mapping"),
])
def test_bad_devices_file_is_one_clear_line(tmp_path, text, expected):
    path = tmp_path / "devices.yaml"
    path.write_text(text)
    with pytest.raises(DeviceError) as err:
        load_devices(path)
    line = _one_line(err)
    assert expected in line
    assert str(path) in line


def test_missing_devices_file(tmp_path):
    with pytest.raises(DeviceError, match="does not exist"):
        get_device("x", devices_file=tmp_path / "nope.yaml")


def test_list_devices_rows_say_why_a_device_is_unusable():
    rows = {row["name"]: row for row in list_devices()}
    assert set(rows) == set(BUILTINS + INT8 + BF16)
    for row in rows.values():
        assert set(row) == {"name", "backend", "options", "description", "source", "available"}
        assert row["available"] is None or isinstance(row["available"], str)
    assert rows["cpu-ort"]["available"] is None and rows["cpu-torch"]["available"] is None
    assert "threads=1" in rows["cpu-ort"]["options"]
    import torch

    if not torch.cuda.is_available():
        assert "no CUDA device" in rows["cuda-torch"]["available"]
    if rows["trt"]["available"] and "tensorrt not installed" in rows["trt"]["available"]:
        assert "pip install 'hwnas[tensorrt]'" in rows["trt"]["available"]


def test_remote_device_without_token_is_unavailable_not_faked(tiny_net, example_input, tmp_path):
    device = Device(name="jetson", backend="tensorrt", host="10.0.0.7", port=8765)
    assert device.is_remote
    assert "needs a token_file" in device.available()
    with pytest.raises(DeviceError, match="device 'jetson' is not usable here: remote device"):
        get_backend(device).compile(tiny_net, example_input, tmp_path)


def test_backend_names():
    assert backend_names() == ["torch", "onnxruntime", "openvino", "executorch", "litert",
                               "tensorrt"]


def test_example_devices_file_loads():
    from pathlib import Path

    path = Path(__file__).parents[2] / "experiments" / "devices.example.yaml"
    devices = load_devices(path)
    assert "cpu-ort-2t" in devices and devices["trt-fp16"].precision == "fp16"
