"""INT8 bundles: the quantized artifact's own test top-1 beside the fp32 subnet's, the drop, the
agreement and the int8 layer share in verify.json and model.json; too large a drop fails."""

from __future__ import annotations

import json

import pytest

from hwnas.errors import InputError
from hwnas.export import VerificationError, export_subnet, load
from hwnas.supernet.data import CALIBRATION_IMAGES

# the tests on `trained_export_run` (300 training steps, ~90 s) share one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("trained-export")


def _usable(name: str) -> None:
    from hwnas.devices import get_device

    reason = get_device(name).available()
    if reason:
        pytest.skip(f"{name}: {reason}")


@pytest.fixture(scope="module")
def ort_int8_bundle(trained_export_run, tmp_path_factory, quick):
    _usable("cpu-ort-int8")
    run, arch = trained_export_run
    return export_subnet(run.run_dir, arch.id, "cpu-ort-int8", max_int8_drop=3.0,
                         out_dir=tmp_path_factory.mktemp("int8") / "ort", **quick)


def test_int8_bundle_reports_the_quantized_models_own_test_accuracy(ort_int8_bundle):
    verify = json.loads((ort_int8_bundle / "verify.json").read_text())
    meta = json.loads((ort_int8_bundle / "model.json").read_text())
    assert verify["passed"] and meta["status"] == "verified"
    int8 = verify["int8"]
    assert int8 == meta["accuracy"]["int8"]
    # the whole test split, and the fp32 top-1 is the one the bundle reports for the subnet
    assert int8["split"] == "test" and int8["n"] == meta["accuracy"]["n"] == 500
    assert int8["top1_fp32"] == pytest.approx(meta["accuracy"]["top1"], abs=0.21)
    assert int8["drop"] == pytest.approx(int8["top1_fp32"] - int8["top1_int8"])
    assert int8["top1_fp32"] > 50  # a trained subnet: the drop means something
    assert int8["drop"] <= 3.0 and int8["top1_agreement"] >= 0.9 and int8["max_drop"] == 3.0
    # what runs in int8, read from ONNX Runtime's optimized graph
    assert 0 < int8["int8_share"] <= 1 and int8["int8_layers"] <= int8["layers"]
    assert int8["qdq_pairs"] >= 1 and isinstance(int8["fp32_ops"], dict)
    assert int8["calibration"] == "images" and 0 < int8["calibration_images"] <= CALIBRATION_IMAGES
    assert int8["calibration_method"] == "percentile 99.99"
    # the fp32 ONNX the quantizer started from ships beside the int8 one, named relative to the bundle
    fp32 = meta["artifact"]["metadata"]["fp32_onnx"]
    assert fp32 == "model_fp32.onnx" and (ort_int8_bundle / fp32).exists()
    assert int8["latency_ms"] == meta["latency"]["measured"]["corrected_ms"] > 0
    check = {c["name"]: c for c in verify["checks"]}["int8 accuracy"]
    assert check["passed"] and "int8 top-1" in check["detail"]
    with load(ort_int8_bundle) as bundle:
        assert bundle.runtime.startswith("cpu-ort-int8")


def test_openvino_int8_bundle_reports_the_share_from_its_execution_graph(trained_export_run,
                                                                        tmp_path, quick):
    _usable("cpu-openvino-int8")
    run, arch = trained_export_run
    path = export_subnet(run.run_dir, arch.id, "cpu-openvino-int8", out_dir=tmp_path / "ov",
                         measure=False, max_int8_drop=3.0, **quick)
    int8 = json.loads((path / "verify.json").read_text())["int8"]
    assert int8["n"] == 500 and int8["drop"] <= 3.0 and int8["top1_agreement"] >= 0.9
    assert int8["int8_share_source"] == "openvino execution graph" and int8["int8_share"] > 0.5
    assert int8["latency_ms"] is None  # measure=False


def test_an_int8_drop_over_the_limit_fails_the_bundle_with_one_reason(trained_export_run, tmp_path,
                                                                       monkeypatch, quick):
    from hwnas.export import api

    _usable("cpu-ort-int8")
    real = api.precision_accuracy

    def worse(*args, **kwargs):  # the quantized model loses 3 points of the fp32 top-1
        out = real(*args, **kwargs)
        return dict(out, top1_int8=out["top1_fp32"] - 3.0, drop=3.0)

    monkeypatch.setattr(api, "precision_accuracy", worse)
    run, arch = trained_export_run
    out = tmp_path / "int8-bad"
    with pytest.raises(VerificationError) as err:
        export_subnet(run.run_dir, arch.id, "cpu-ort-int8", out_dir=out, measure=False,
                      max_int8_drop=2.5, **quick)
    text = str(err.value)
    assert "\n" not in text and "int8 top-1 drop 3.00 points > 2.5 allowed" in text
    verify = json.loads((out / "verify.json").read_text())
    meta = json.loads((out / "model.json").read_text())
    assert not verify["passed"] and verify["failures"] == [
        c["detail"] for c in verify["checks"] if c["name"] == "int8 accuracy"]
    assert verify["int8"]["drop"] == 3.0 and verify["int8"]["passed"] is False
    assert meta["status"].startswith("failed: int8 top-1 drop 3.00 points")


def test_fp32_bundles_have_no_int8_record(ort_bundle):
    verify = json.loads((ort_bundle / "verify.json").read_text())
    meta = json.loads((ort_bundle / "model.json").read_text())
    assert "int8" not in verify and "int8" not in meta["accuracy"]
    assert verify["precision"] == meta["precision"] == "fp32"


@pytest.mark.parametrize("bad", [-0.5, float("nan")])
def test_a_negative_int8_drop_limit_is_refused(export_run, bad):
    run, archs = export_run
    with pytest.raises(InputError) as err:
        export_subnet(run.run_dir, archs[0].id, "cpu-ort-int8", max_int8_drop=bad)
    assert str(err.value).startswith("max_int8_drop must be at least 0") and "\n" not in str(err.value)


def test_the_cli_refuses_a_negative_int8_drop_limit_in_one_line(export_run):
    import subprocess
    import sys

    run, archs = export_run
    done = subprocess.run([sys.executable, "-m", "hwnas", "export", "--run", str(run.run_dir),
                           "--device", "cpu-ort-int8", "--subnet", archs[0].id,
                           "--max-int8-drop", "-1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--max-int8-drop" in lines[0]


def _optimized_ops(path, tmp_path):
    """(node op types, DequantizeLinear -> QuantizeLinear edges) of ONNX Runtime's optimized graph."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    graph = onnx.load(str(tmp_path / "optimized.onnx")).graph
    dq_out = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    pairs = sum(n.op_type == "QuantizeLinear" and n.input[0] in dq_out for n in graph.node)
    return [n.op_type for n in graph.node], pairs


def test_ort_int8_folds_relus_into_int8_kernels(ort_int8_bundle, tmp_path):
    """What ONNX Runtime can fuse is fused: no ReLU is left between a DequantizeLinear and a
    QuantizeLinear (the quantizer folds it into the convolution's output range) and every
    convolution but the stem (kept float: it reads the image) runs as QLinearConv; weights are
    per-channel unless the device says otherwise."""
    import onnx

    meta = json.loads((ort_int8_bundle / "model.json").read_text())["artifact"]["metadata"]
    assert meta["weights"] == "int8-per-channel" and "Relu" in meta["quantized_op_types"]
    assert "Relu" not in {n.op_type for n in onnx.load(str(ort_int8_bundle / "model.onnx")).graph.node}
    ops, dq_to_q = _optimized_ops(ort_int8_bundle / "model.onnx", tmp_path)
    float_convs = [op for op in ops if op in ("Conv", "FusedConv", "NchwcConv")]
    assert len(float_convs) <= len(meta["float_nodes"]) == 1
    assert "QLinearConv" in ops and "Relu" not in ops
    assert dq_to_q == 0, "a DequantizeLinear feeds a QuantizeLinear: an fp32 no-op left in the int8 graph"


def test_ort_int8_export_is_deterministic(trained_export_run, ort_int8_bundle, tmp_path, quick):
    """The same subnet exported again quantizes to the same bytes and the same test accuracy."""
    from hwnas.export.manifest import sha256_file

    run, arch = trained_export_run
    again = export_subnet(run.run_dir, arch.id, "cpu-ort-int8", max_int8_drop=3.0, measure=False,
                          out_dir=tmp_path / "again", **quick)
    assert sha256_file(again / "model.onnx") == sha256_file(ort_int8_bundle / "model.onnx")
    first, second = (json.loads((b / "verify.json").read_text())["int8"] for b in (ort_int8_bundle, again))
    keys = ("top1_int8", "top1_fp32", "drop", "top1_agreement", "int8_share")
    assert {k: first[k] for k in keys} == {k: second[k] for k in keys}


def test_per_tensor_weights_are_a_device_option(trained_export_run, tmp_path, quick):
    _usable("cpu-ort-int8")
    devices = tmp_path / "devices.yaml"
    devices.write_text("devices:\n  - name: ort-int8-per-tensor\n    backend: onnxruntime\n"
                       "    provider: CPUExecutionProvider\n    precision: int8\n"
                       "    options: {per_channel: false}\n")
    run, arch = trained_export_run
    path = export_subnet(run.run_dir, arch.id, "ort-int8-per-tensor", devices_file=devices,
                         out_dir=tmp_path / "pt", measure=False, max_int8_drop=3.0, **quick)
    meta = json.loads((path / "model.json").read_text())
    assert meta["artifact"]["metadata"]["weights"] == "int8-per-tensor"
    int8 = meta["accuracy"]["int8"]
    assert int8["drop"] <= 3.0 and int8["top1_agreement"] >= 0.9
