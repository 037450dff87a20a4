"""bf16 bundles (`cpu-openvino-bf16`): model.json and verify.json say the precision; the bf16
artifact is judged like an INT8 one (relative RMS error and top-1 agreement on real test images,
then its own top-1 on the whole test split beside the fp32 subnet's); where the CPU has no bf16,
export refuses in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from runtime_helpers import openvino_or_skip

from hwnas.errors import DeviceError
from hwnas.export import VerificationError, export_subnet, load

# the tests on `trained_export_run` (300 training steps, ~90 s) share one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("trained-export")

BF16 = "cpu-openvino-bf16"


def _usable() -> None:
    from hwnas.devices import get_device

    reason = get_device(BF16).available()
    if reason:
        pytest.skip(f"{BF16}: {reason}")


@pytest.fixture(scope="module")
def bf16_bundle(trained_export_run, tmp_path_factory, quick):
    _usable()
    run, arch = trained_export_run
    return export_subnet(run.run_dir, arch.id, BF16, out_dir=tmp_path_factory.mktemp("bf16") / "ov", **quick)


def test_bf16_bundle_says_its_precision_and_its_own_test_accuracy(bf16_bundle):
    verify = json.loads((bf16_bundle / "verify.json").read_text())
    meta = json.loads((bf16_bundle / "model.json").read_text())
    assert verify["passed"] and meta["status"] == "verified"
    assert verify["precision"] == meta["precision"] == meta["device"]["precision"] == "bf16"
    assert meta["artifact"]["precision"] == "bf16" and meta["onnx"]["precision"] == "fp32"
    bf16 = verify["bf16"]
    assert bf16 == meta["accuracy"]["bf16"] and "int8" not in verify and "int8_share" not in bf16
    assert bf16["split"] == "test" and bf16["n"] == meta["accuracy"]["n"] == 500
    assert bf16["top1_fp32"] > 50 and bf16["drop"] == pytest.approx(bf16["top1_fp32"] - bf16["top1_bf16"])
    assert abs(bf16["drop"]) <= 1.0 and bf16["top1_agreement"] >= 0.98 and bf16["passed"]
    assert bf16["latency_ms"] == meta["latency"]["measured"]["corrected_ms"] > 0
    checks = {c["name"]: c for c in verify["checks"]}
    assert checks["bf16 accuracy"]["passed"] and "bf16 top-1" in checks["bf16 accuracy"]["detail"]
    ir = checks["openvino-ir"]
    # judged on relative RMS and agreement, like INT8; the RMS shows bf16 really ran (f32 would be ~1e-7)
    assert ir["tolerance"]["atol"] is None and ir["tolerance"]["max_rel_rms"] == 0.05
    assert 1e-5 < ir["rel_rms"] < 0.05 and ir["top1_agreement"] >= 0.95
    assert checks["onnx (onnxruntime cpu)"]["max_abs_diff"] < 1e-3  # model.onnx stays fp32


def test_bf16_bundle_loads_and_predicts_on_its_device(bf16_bundle, test_digits):
    raw, _, labels = test_digits
    with load(bf16_bundle) as bundle:
        assert bundle.runtime.startswith(BF16)
        classes, probs = bundle.predict(raw)
    assert probs.shape == (len(raw), 10) and np.mean(np.asarray(classes) == labels) > 0.5


def test_a_bf16_drop_over_the_limit_fails_the_bundle_with_one_reason(trained_export_run, tmp_path, monkeypatch,
                                                                     quick):
    from hwnas.export import api

    _usable()
    real = api.precision_accuracy

    def worse(*args, **kwargs):
        out = real(*args, **kwargs)
        return dict(out, top1_bf16=out["top1_fp32"] - 3.0, drop=3.0)

    monkeypatch.setattr(api, "precision_accuracy", worse)
    run, arch = trained_export_run
    with pytest.raises(VerificationError) as err:
        export_subnet(run.run_dir, arch.id, BF16, out_dir=tmp_path / "bad", measure=False, max_int8_drop=2.5,
                      **quick)
    assert "\n" not in str(err.value) and "bf16 top-1 drop 3.00 points > 2.5 allowed" in str(err.value)


def test_without_bf16_export_refuses_in_one_line(export_run, monkeypatch):
    from hwnas.devices import openvino_backend

    openvino_or_skip()
    monkeypatch.setattr(openvino_backend, "plugin_capabilities", lambda target: ("FP32", "INT8"))
    run, archs = export_run
    with pytest.raises(DeviceError) as err:
        export_subnet(run.run_dir, archs[0].id, BF16)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"device '{BF16}' is not usable here: OpenVINO's CPU plugin "
                                                "cannot run bf16")
