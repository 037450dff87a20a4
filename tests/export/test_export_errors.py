"""Bad input to export and load: one clear line each, nothing half-written left behind."""

from __future__ import annotations

import shutil

import pytest
import torch

from hwnas.errors import DeviceError, HwnasError, InputError
from hwnas.export import BundleError, export_subnet, load, resolve_subnet


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert isinstance(err.value, HwnasError) and "\n" not in text
    return text


def test_unknown_subnet_id_says_where_it_looked(export_run):
    run, _ = export_run
    with pytest.raises(InputError) as err:
        export_subnet(run.run_dir, "ffffffffffff", "cpu-ort")
    text = _one_line(err)
    assert "'ffffffffffff' is not in run" in text and "pareto.csv (2 subnets)" in text
    assert "accuracy.csv (absent)" in text and "id column" in text
    assert not (run.run_dir / "exports" / "ffffffffffff-cpu-ort").exists()


def test_subnets_resolve_by_id_prefix_and_ofa_json(export_run):
    run, archs = export_run
    assert resolve_subnet(run, archs[1].id[:6]).arch == archs[1]
    by_json = resolve_subnet(run, archs[0].to_json())
    assert by_json.arch == archs[0] and by_json.predicted_latency_ms("cpu-ort") == 0.5
    assert by_json.predicted_latency_ms("trt") == 0.1 and by_json.predicted_top1 == 40.0
    with pytest.raises(InputError, match="outside the search space"):
        resolve_subnet(run, run.space.min_arch(r=224).to_json())


def test_an_int8_point_of_a_precision_search_has_its_prediction(export_run):
    """`--precision auto` writes an INT8 point's latency under its fp32 sibling's column, with
    ``ms_device:<sibling>`` naming the INT8 device: exporting on that device finds it."""
    from hwnas.export.resolve import PARETO, Candidate

    run, archs = export_run
    row = {"ms_pred:cpu-ort": 0.4, "ms_device:cpu-ort": "cpu-ort-int8", "ms_pred:trt": 0.1,
           "ms_device:trt": "trt"}
    cand = Candidate(archs[0], PARETO, row)
    assert cand.predicted_latency_ms("cpu-ort-int8") == 0.4 and cand.predicted_latency_ms("trt") == 0.1
    assert cand.predicted_latency_ms("cpu-openvino-int8") is None
    assert cand.predicted_latency_ms("cpu-ort") is None  # that column holds INT8's latency, not fp32's
    assert Candidate(archs[0], PARETO, dict(row, **{"ms_pred:cpu-ort-int8": 0.3})
                     ).predicted_latency_ms("cpu-ort-int8") == 0.3


def test_an_auto_front_with_a_row_per_precision_resolves_to_the_devices_row(tmp_path, tiny_supernet):
    """`--precision auto` may keep one subnet in several precisions: exporting it for the bf16
    device takes the bf16 row's prediction, for the fp32 device the fp32 row's."""
    from hwnas.export import pareto_members
    from hwnas.run import open_run
    from hwnas.space import write_arch_table

    run = open_run(tmp_path / "run", tiny_supernet)
    arch = run.space.min_arch(r=32)
    write_arch_table(run.run_dir / "pareto.csv", [arch, arch],
                     extra={"id": [arch.id] * 2, "precision": ["bf16", "fp32"], "top1_pred": [40.0, 40.0],
                            "ms_pred:cpu-openvino": [0.7, 1.0],
                            "ms_device:cpu-openvino": ["cpu-openvino-bf16", "cpu-openvino"]})
    for device, ms in (("cpu-openvino-bf16", 0.7), ("cpu-openvino", 1.0)):
        assert resolve_subnet(run, arch.id, device).predicted_latency_ms(device) == ms
        assert resolve_subnet(run, arch, device).predicted_latency_ms(device) == ms
        [member] = pareto_members(run, device)
        assert member.predicted_latency_ms(device) == ms


def test_a_device_unusable_here_is_one_clear_error(export_run):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: cuda-torch is usable here")
    run, archs = export_run
    with pytest.raises(DeviceError) as err:
        export_subnet(run.run_dir, archs[0].id, "cuda-torch")
    text = _one_line(err)
    assert "device 'cuda-torch' is not usable here: no CUDA device" in text
    assert not (run.run_dir / "exports" / f"{archs[0].id}-cuda-torch").exists()


def test_unknown_device_lists_the_known_ones(export_run):
    run, archs = export_run
    with pytest.raises(DeviceError, match="unknown device 'tpu'; known: cpu-torch"):
        export_subnet(run.run_dir, archs[0].id, "tpu")


def test_not_a_run_directory(tmp_path):
    with pytest.raises(HwnasError, match="is not an hwnas run"):
        export_subnet(tmp_path, "abcdef", "cpu-ort")


@pytest.mark.parametrize("victim", ["model.onnx", "weights.safetensors", "model.json"])
def test_a_tampered_bundle_is_refused_naming_the_file(ort_bundle, tmp_path, victim):
    copy = tmp_path / "bundle"
    shutil.copytree(ort_bundle, copy)
    data = bytearray((copy / victim).read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one byte
    (copy / victim).write_bytes(bytes(data))
    with pytest.raises(BundleError) as err:
        load(copy)
    text = _one_line(err)
    assert victim in text and ("modified" in text or "not valid JSON" in text)


def test_a_missing_file_or_folder_is_refused(ort_bundle, tmp_path):
    copy = tmp_path / "bundle"
    shutil.copytree(ort_bundle, copy)
    (copy / "weights.safetensors").unlink()
    with pytest.raises(BundleError, match="weights.safetensors is missing"):
        load(copy)
    with pytest.raises(BundleError, match="does not exist"):
        load(tmp_path / "nowhere")


def test_export_will_not_overwrite_a_folder_that_is_not_a_bundle(export_run, tmp_path, quick):
    run, archs = export_run
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="is not an hwnas bundle"):
        export_subnet(run.run_dir, archs[0].id, "cpu-ort", out_dir=tmp_path, **quick)
    assert (tmp_path / "notes.txt").read_text() == "mine"
