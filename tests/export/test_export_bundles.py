"""Export bundles on the CPU devices: what ships matches the PyTorch subnet, and runs on images."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest
import torch

from hwnas.export import export_pareto, export_subnet, load
from hwnas.export.manifest import sha256_file


def _subnet_from_bundle(path):
    """The PyTorch subnet rebuilt from the bundle's arch and safetensors weights."""
    from safetensors.torch import load_file

    from hwnas.space import Arch
    from hwnas.supernet.ofa_mbv3 import MobileNetV3Subnet

    meta = json.loads((path / "model.json").read_text())
    net = MobileNetV3Subnet(Arch.from_ofa_dict(meta["arch"]), n_classes=10)
    net.load_state_dict(load_file(str(path / "weights.safetensors")))
    return net.eval(), meta


def test_ort_bundle_onnx_matches_the_pytorch_subnet_on_real_digits(ort_bundle, export_run,
                                                                    tiny_supernet, test_digits):
    import onnxruntime as ort

    from hwnas.supernet.data import resize_batch
    from hwnas.supernet.pretrained import load_supernet

    run, archs = export_run
    assert ort_bundle == run.run_dir / "exports" / f"{archs[0].id}-cpu-ort"
    net, meta = _subnet_from_bundle(ort_bundle)
    # the shipped weights are the supernet's (only BN statistics were recalibrated)
    supernet, _ = load_supernet(tiny_supernet)
    trained = supernet.get_subnet(archs[0]).state_dict()
    for key, value in net.state_dict().items():
        if "running_" not in key and "num_batches" not in key:
            assert torch.equal(value, trained[key]), key
    _, images, _ = test_digits
    x = resize_batch(images, archs[0].r)
    with torch.inference_mode():
        expected = net(x).numpy()
    assert expected.std(axis=0).max() > 1e-3  # outputs depend on the digit: the check means something
    session = ort.InferenceSession(str(ort_bundle / "model.onnx"), providers=["CPUExecutionProvider"])
    got = np.concatenate([session.run(None, {"input": x[i:i + 1].numpy()})[0] for i in range(len(x))])
    assert np.abs(got - expected).max() < 1e-4
    assert (got.argmax(1) == expected.argmax(1)).all()

    assert meta["status"] == "verified" and meta["verification"]["passed"]
    assert meta["arch"] == archs[0].to_ofa_dict() and meta["id"] == archs[0].id
    assert meta["input"]["shape"] == [1, 3, 32, 32] and meta["classes"] == [str(i) for i in range(10)]
    assert meta["preprocess"]["size"] == 32 and len(meta["preprocess"]["mean"]) == 3
    assert 0 <= meta["accuracy"]["top1"] <= 100 and meta["accuracy"]["n"] == 500
    assert meta["predicted"]["latency_ms"] == 0.5 and meta["predicted"]["top1"] == 40.0
    measured = meta["latency"]["measured"]
    assert measured["corrected_ms"] > 0 and measured["device"] == "cpu-ort"
    assert meta["device"]["name"] == "cpu-ort" and meta["runtime_versions"]["onnxruntime"]
    from hwnas.families.memory import KB, family_memory

    memory = meta["memory"]  # predicted beside what ONNX Runtime took to load and run the shipped model
    ram, flash = family_memory(archs[0].family, [list(archs[0].to_row())], archs[0].w, 10)
    assert memory["predicted"] == {**memory["predicted"], "precision": "fp32", "ram_kb": ram[0] / KB,
                                   "flash_kb": flash[0] / KB}
    assert memory["measured"]["model_file_kb"] == (ort_bundle / "model.onnx").stat().st_size / KB
    assert memory["measured"]["onnxruntime_peak_kb"] is None or memory["measured"]["onnxruntime_peak_kb"] > 0
    files = meta["files"]
    assert {"model.onnx", "weights.safetensors", "verify.json"} <= set(files)
    assert all(files[n]["sha256"] == sha256_file(ort_bundle / n) for n in files)
    report = json.loads((ort_bundle / "verify.json").read_text())
    assert report["passed"] and {c["name"] for c in report["checks"]} >= {"onnx", "latency"}


def test_loaded_bundle_classifies_raw_digits_like_the_pytorch_subnet(ort_bundle, test_digits):
    from PIL import Image

    from hwnas.supernet.data import resize_batch

    raw, images, _ = test_digits
    net, _ = _subnet_from_bundle(ort_bundle)
    with torch.inference_mode():
        expected = torch.softmax(net(resize_batch(images, 32)), 1).numpy()
    with load(ort_bundle) as bundle:
        assert bundle.runtime.startswith("cpu-ort") and bundle.arch.id == bundle.id
        classes, probs = bundle.predict(raw)  # N x 28 x 28 uint8, as the embedded digits are
        assert probs.shape == (len(raw), 10) and np.allclose(probs.sum(1), 1, atol=1e-5)
        assert np.abs(probs - expected).max() < 1e-4
        assert (classes == expected.argmax(1)).all()
        one, _ = bundle.predict(Image.fromarray(raw[3]))  # a PIL image
        rgb, _ = bundle.predict(np.repeat(raw[3][:, :, None], 3, axis=2) / 255.0)  # float RGB
        assert one[0] == rgb[0] == classes[3]


@pytest.mark.parametrize("bad", [np.full((28, 28), 2.0), np.zeros((2, 2, 2, 2, 2))])
def test_predict_refuses_inputs_it_would_misread(ort_bundle, bad):
    from hwnas.errors import InputError

    with load(ort_bundle) as bundle, pytest.raises(InputError):
        bundle.predict(bad)


def test_openvino_bundle_holds_ir_and_onnx_both_verified(export_run, tmp_path, quick):
    run, archs = export_run
    path = export_subnet(run.run_dir, archs[0].id, "cpu-openvino", out_dir=tmp_path / "ov",
                         measure=False, **quick)
    meta = json.loads((path / "model.json").read_text())
    assert meta["status"] == "verified" and meta["artifact"]["format"] == "openvino-ir"
    assert {"model.xml", "model.bin", "model.onnx"} <= set(meta["files"])
    assert meta["latency"]["measured"] is None and "measure=False" in meta["latency"]["note"]
    checks = {c["name"]: c for c in json.loads((path / "verify.json").read_text())["checks"]}
    assert checks["openvino-ir"]["max_abs_diff"] < 1e-3  # f32 forced, not the bf16 default
    assert checks["onnx (onnxruntime cpu)"]["passed"]
    with load(path) as bundle:
        assert bundle.runtime.startswith("cpu-openvino")


def test_xnnpack_bundle_predicts_like_the_onnx_one(export_run, ort_bundle, test_digits, tmp_path,
                                                    quick):
    run, archs = export_run
    path = export_subnet(run.run_dir, archs[0].id, "mobile-xnnpack", out_dir=tmp_path / "pte",
                         measure=False, **quick)
    meta = json.loads((path / "model.json").read_text())
    assert meta["status"] == "verified" and {"model.pte", "model.onnx"} <= set(meta["files"])
    raw = test_digits[0]
    with load(path) as pte, load(ort_bundle) as onnx:
        assert pte.runtime.startswith("mobile-xnnpack")
        (a, pa), (b, pb) = pte.predict(raw), onnx.predict(raw)
    assert (a == b).all() and np.abs(pa - pb).max() < 1e-4


def test_export_pareto_exports_every_member(export_run, tmp_path, quick):
    run, archs = export_run
    calls = []
    paths = export_pareto(run.run_dir, "cpu-ort", out_root=tmp_path, measure=False,
                          progress=lambda *a: calls.append(a), **quick)
    assert [p.name for p in paths] == [f"{a.id}-cpu-ort" for a in archs]
    assert all(json.loads((p / "model.json").read_text())["status"] == "verified" for p in paths)
    assert calls[-1][:2] == (12, 12)


def test_trt_without_tensorrt_ships_onnx_and_a_build_kit(export_run, tmp_path, quick):
    from hwnas.devices import get_device

    reason = get_device("trt").available()
    if reason is None:
        pytest.skip("TensorRT is usable here: the engine is built instead (see the gpu test)")
    run, archs = export_run
    path = export_subnet(run.run_dir, archs[0].id, "trt", out_dir=tmp_path / "trt", **quick)
    meta = json.loads((path / "model.json").read_text())
    assert meta["status"] == f"onnx-only: {reason}" and meta["artifact"] is None
    assert meta["predicted"]["latency_ms"] == 0.1  # its own device's column, ms:trt
    assert not (path / "model.engine").exists()
    assert {"model.onnx", "build.sh", "build_engine.py", "calib.npy"} <= set(meta["files"])
    kit = meta["tensorrt"]
    assert kit["batch_profile"] == [1, 1, 8] and kit["dynamic_batch"]
    sh = (path / "build.sh").read_text()
    assert "--onnx=model.onnx" in sh and "--minShapes=input:1x3x32x32" in sh
    assert "--maxShapes=input:8x3x32x32" in sh
    calib = np.load(path / "calib.npy", allow_pickle=False)
    assert calib.shape == (128, 3, 32, 32) and calib.astype(np.float32).std() > 0.1  # real digits
    script = (path / "build_engine.py").read_text()
    assert not re.search(r"^\s*(import|from)\s+hwnas", script, re.M)  # runs on a bare target
    done = subprocess.run(["python3", str(path / "build_engine.py"), "--precision", "int8"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "tensorrt" in done.stderr and "Traceback" not in done.stderr
    assert json.loads((path / "verify.json").read_text())["passed"]  # the ONNX, on ONNX Runtime
    with load(path) as bundle:  # no engine here: ONNX Runtime on the ONNX model
        assert bundle.runtime.startswith("onnxruntime cpu")
        assert bundle.predict(np.zeros((28, 28), np.uint8))[1].shape == (1, 10)


def test_a_failed_verification_is_loud_and_the_bundle_marked(export_run, tmp_path, monkeypatch,
                                                             quick):
    from hwnas.export import BundleError, Tolerance, VerificationError
    from hwnas.export import verify

    monkeypatch.setattr(verify, "_BY_PRECISION", {"fp32": Tolerance(0.0, 0.0, 1.01)})
    run, archs = export_run
    out = tmp_path / "bad"
    with pytest.raises(VerificationError) as err:
        export_subnet(run.run_dir, archs[0].id, "cpu-ort", out_dir=out, measure=False, **quick)
    text = str(err.value)
    assert str(out) in text and "top-1 agrees" in text and "\n" not in text
    meta = json.loads((out / "model.json").read_text())
    assert meta["status"].startswith("failed: ") and not meta["verification"]["passed"]
    assert not json.loads((out / "verify.json").read_text())["passed"]
    with pytest.raises(BundleError, match="failed its verification"):
        load(out)
    load(out, allow_failed=True).close()


def test_latency_protocol_settings_reach_the_measurement(ort_bundle, quick):
    measured = json.loads((ort_bundle / "model.json").read_text())["latency"]["measured"]
    protocol = quick["protocol"]
    assert measured["n"] == protocol.rounds * protocol.runs and measured["ref_median_ms"] > 0
