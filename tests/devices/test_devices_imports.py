"""Optional runtimes stay optional: importing hwnas.devices (and listing devices) never imports
them, and a missing runtime is a DeviceError with the install hint, never an ImportError."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hwnas.devices import get_backend
from hwnas.errors import DeviceError

HEAVY = ["openvino", "executorch", "tensorrt", "ai_edge_litert", "litert_torch"]


def test_import_and_list_devices_import_no_optional_runtime():
    code = ("import sys, json; import hwnas.devices as d; first = [m for m in %r if m in sys.modules];"
            " d.list_devices(); print(json.dumps([first, [m for m in %r if m in sys.modules]]))"
            % (HEAVY, HEAVY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    after_import, after_list = json.loads(out.stdout.strip().splitlines()[-1])
    assert after_import == [] and after_list == []


@pytest.mark.parametrize("device, module, extra", [
    ("cpu-openvino", "openvino", "openvino"),
    ("mobile-xnnpack", "executorch", "executorch"),
    ("trt", "tensorrt", "tensorrt"),
    ("mobile-litert", "litert_torch", "litert"),
])
def test_missing_runtime_is_a_reason_and_a_device_error(monkeypatch, tiny_net, example_input,
                                                        tmp_path, device, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    backend = get_backend(device)
    reason = backend.available()
    assert reason == f"{module} not installed: pip install 'hwnas[{extra}]'"
    with pytest.raises(DeviceError) as err:
        backend.compile(tiny_net, example_input, tmp_path)
    assert str(err.value) == f"device '{device}' is not usable here: {reason}"


@pytest.mark.parametrize("count, reason", [
    (1, None), (0, "no CUDA device (the CUDA driver finds none)"),
    (None, "no CUDA device (no CUDA driver: libcuda.so.1 cannot be loaded)")])
def test_without_torch_the_cuda_driver_says_whether_a_gpu_is_there(monkeypatch, count, reason):
    """A slim agent serving onnxruntime-gpu has no torch to ask."""
    import ctypes

    from hwnas.devices._cuda import cuda_reason

    class Driver:
        def cuInit(self, flags):  # noqa: N802 - the driver's names
            return 0

        def cuDeviceGetCount(self, out):  # noqa: N802
            out._obj.value = count
            return 0

    def load(name):
        if count is None:
            raise OSError(f"{name}: cannot open shared object file")
        return Driver()

    monkeypatch.setitem(sys.modules, "torch", None)  # as if not installed
    monkeypatch.setattr(ctypes, "CDLL", load)
    assert cuda_reason() == reason


def test_a_cuda_ort_device_without_onnxruntime_names_the_gpu_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert get_backend("cuda-ort").available() == \
        "onnxruntime not installed: pip install 'hwnas[ort-gpu]'"
    assert get_backend("cpu-ort").available() == "onnxruntime not installed: pip install 'hwnas[ort]'"
