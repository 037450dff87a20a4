"""GPU backends (cuda-torch, cuda-ort, trt): outputs match PyTorch and timing uses the GPU clock.

Skipped without a CUDA device (tests/conftest.py), and per device when its runtime is missing
(onnxruntime-gpu, tensorrt). On GPUs "fp32" lets runtimes use TF32 as they do by default, so the
tolerance is looser than on CPUs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwnas.devices import Device, get_backend, get_device, measure, measure_many

pytestmark = pytest.mark.gpu

CASES = [("cuda-torch", "fp32", 5e-3), ("cuda-torch", "fp16", 5e-2), ("cuda-ort", "fp32", 5e-3),
         ("cuda-ort", "fp16", 5e-2), ("trt", "fp32", 5e-3), ("trt", "fp16", 5e-2)]


def _device(name: str, precision: str) -> Device:
    base = get_device(name)
    device = Device(**{**base.model_dump(), "name": f"{name}-{precision}", "precision": precision})
    reason = device.available()
    if reason:
        pytest.skip(f"{device.name}: {reason}")
    return device


@pytest.mark.parametrize("name, precision, tol", CASES)
def test_gpu_outputs_and_timing(name, precision, tol, tiny_net, example_input, test_inputs,
                                tmp_path):
    device = _device(name, precision)
    backend = get_backend(device)
    runner = backend.load(backend.compile(tiny_net, example_input, tmp_path))
    with torch.no_grad():
        for x in test_inputs:
            np.testing.assert_allclose(runner.run(x), tiny_net(torch.from_numpy(x)).numpy(),
                                       atol=tol, rtol=tol)
    s = measure(runner, runs=20, warmup_runs=5, warmup_s=0.05)
    assert 0 < s.min_ms <= s.median_ms <= s.p90_ms <= s.p99_ms and s.n == 20
    assert s.precision == precision
    assert s.timer == ("perf_counter_ns" if device.backend == "onnxruntime" else "cuda_events")


def test_gpu_measure_many(tiny_net, make_net, example_input, tmp_path):
    device = _device("cuda-torch", "fp32")
    backend = get_backend(device)
    ref = backend.load(backend.compile(tiny_net, example_input, tmp_path / "a"))
    big = backend.load(backend.compile(make_net(96), example_input, tmp_path / "b"))
    res = measure_many({"ref": ref, "big": big}, ref, rounds=3, runs=10, warmup_s=0.05)
    assert res["ref"].corrected_ms == pytest.approx(res["ref"].median_ms, rel=0.3)
    assert res["big"].n == 30
