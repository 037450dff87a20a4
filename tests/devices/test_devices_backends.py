"""Every backend available here: compiled outputs match PyTorch on real inputs, the thread count
is applied (read back from the runtime), and one measurement's statistics are consistent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwnas.devices import get_backend, get_device, measure
from hwnas.errors import DeviceError

# (device, absolute tolerance vs PyTorch fp32, slow)
CASES = {
    "cpu-torch": 1e-5,
    "cpu-ort": 1e-5,
    "cpu-openvino": 1e-4,  # f32 forced; OpenVINO's default on AMX CPUs would be bf16 (~1e-2)
    "mobile-xnnpack": 1e-4,
    "mobile-litert": 1e-4,
}
PARAMS = [pytest.param(n, marks=pytest.mark.slow) if n == "mobile-litert" else n for n in CASES]


@pytest.fixture(scope="module", params=PARAMS)
def loaded(request, tiny_net, example_input, with_threads, tmp_path_factory):
    """(device with 2 threads, artifact, runner) per backend; skips devices unusable here."""
    device = with_threads(request.param, 2)
    backend = get_backend(device)
    artifact = backend.compile(tiny_net, example_input, tmp_path_factory.mktemp(device.name))
    runner = backend.load(artifact)
    yield device, artifact, runner
    runner.close()


def test_outputs_match_pytorch_and_depend_on_input(loaded, tiny_net, test_inputs):
    device, _, runner = loaded
    tol = CASES[device.name.rsplit("-", 1)[0]]
    with torch.no_grad():
        expected = [tiny_net(torch.from_numpy(x)).numpy() for x in test_inputs]
    got = [runner.run(x) for x in test_inputs]
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape == (1, 10)
        np.testing.assert_allclose(g, e, atol=tol, rtol=0)
    spread = np.stack(expected).std(axis=0).mean()
    assert spread > 100 * tol, "outputs barely depend on the input: the comparison proves nothing"


def test_threads_are_applied_and_verified(loaded):
    device, _, runner = loaded
    runner.activate()
    assert runner.threads == device.threads == 2
    if device.backend == "torch":
        assert torch.get_num_threads() == 2
    elif device.backend == "onnxruntime":
        opts = runner.session.get_session_options()
        assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (2, 1)
    elif device.backend == "openvino":
        assert runner.compiled.get_property("INFERENCE_NUM_THREADS") == 2
        assert runner.precision_hint == "f32"
    elif device.backend == "executorch":
        assert runner.portable._threadpool_get_thread_count() == 2


def test_measure_stats_are_consistent(loaded):
    device, artifact, runner = loaded
    s = measure(runner, runs=12, warmup_runs=3, warmup_s=0.02)
    assert s.n == 12 and s.warmup >= 3 and s.rounds == 1
    assert 0 < s.min_ms <= s.median_ms <= s.p90_ms <= s.p99_ms
    assert s.min_ms <= s.mean_ms
    assert s.cv == pytest.approx(s.std_ms / s.mean_ms)
    assert s.corrected_ms == s.median_ms and s.ref_median_ms is None and s.ref_ms == []
    assert (s.device, s.backend, s.threads, s.batch, s.resolution, s.precision) == (
        device.name, device.backend, 2, 1, 32, "fp32")
    assert s.host and "torch" in s.versions
    assert s.timer == "perf_counter_ns"
    assert artifact.metadata["versions"] == s.versions


@pytest.mark.parametrize("loaded", ["mobile-xnnpack"], indirect=True)
def test_executorch_thread_pool_cannot_change_under_a_loaded_model(loaded, with_threads):
    """Resizing XNNPACK's process-wide pool under a loaded method corrupts memory: refuse."""
    _, artifact, runner = loaded
    one = get_backend(with_threads("mobile-xnnpack", 1))
    with pytest.raises(DeviceError, match="process-wide"):
        one.load(artifact)
    runner.close()
    other = one.load(artifact)
    assert other.threads == 1
    other.close()


def test_batch_option_sets_the_compiled_batch(tiny_net, example_input, test_inputs, tmp_path):
    device = get_device("cpu-ort").model_copy(update={"name": "cpu-ort-b4", "batch": 4})
    backend = get_backend(device)
    runner = backend.load(backend.compile(tiny_net, example_input, tmp_path))
    x = np.concatenate(test_inputs[:4])
    assert runner.input_shape == (4, 3, 32, 32)
    with torch.no_grad():
        np.testing.assert_allclose(runner.run(x), tiny_net(torch.from_numpy(x)).numpy(), atol=1e-5)
    assert measure(runner, runs=3, warmup_runs=1, warmup_s=0).batch == 4


def test_wrong_input_shape_is_a_device_error(tiny_net, example_input, tmp_path):
    backend = get_backend("cpu-ort")
    runner = backend.load(backend.compile(tiny_net, example_input, tmp_path))
    with pytest.raises(DeviceError, match=r"input shape \(1, 3, 16, 16\)"):
        runner.run(np.zeros((1, 3, 16, 16), np.float32))


def test_artifact_of_another_format_is_refused(tiny_net, example_input, tmp_path):
    artifact = get_backend("cpu-ort").compile(tiny_net, example_input, tmp_path)
    with pytest.raises(DeviceError, match="runs torch-module artifacts, got onnx"):
        get_backend("cpu-torch").load(artifact)


def test_artifact_round_trips_through_json(tiny_net, example_input, tmp_path):
    import json

    from hwnas.devices import Artifact

    backend = get_backend("cpu-ort")
    artifact = backend.compile(tiny_net, example_input, tmp_path)
    again = Artifact.from_dict(json.loads(json.dumps(artifact.to_dict())))
    assert again == artifact
    assert backend.load(again).run(np.zeros((1, 3, 32, 32), np.float32)).shape == (1, 10)
