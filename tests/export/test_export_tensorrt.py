"""TensorRT build kit: the engine builder's decisions, checked against a recording stand-in for
the TensorRT 10 and 11 Python APIs (no GPU needed for those), and the real thing on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import numpy as np
import pytest

from hwnas.devices import tensorrt_build as tb


def _fake_tensorrt(version: str, *, precision_flags: bool) -> types.ModuleType:
    """The parts of `tensorrt` the builder calls, recording what it asked for."""
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    trt.calls = calls = {"flags": [], "profiles": []}
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, level: None})
    trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(STRONGLY_TYPED=3)
    trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="workspace")
    flags = {"FP16": "fp16", "INT8": "int8"} if precision_flags else {}  # removed in TensorRT 11
    trt.BuilderFlag = types.SimpleNamespace(**flags)
    trt.nptype = lambda dtype: np.float32

    class Input:
        name, shape, dtype = "input", (-1, 3, 32, 32), "float"

    class Network:
        def get_input(self, i):
            return Input()

    class Profile:
        def set_shape(self, name, lo, opt, hi):
            calls["profiles"].append((name, lo, opt, hi))

    class Cache:
        def serialize(self):
            return b"timing-cache"

    class Config:
        def set_memory_pool_limit(self, pool, size):
            calls["workspace"] = size

        def add_optimization_profile(self, profile):
            pass

        def create_timing_cache(self, blob):
            calls["cache_in"] = blob
            return Cache()

        def set_timing_cache(self, cache, ignore_mismatch):
            pass

        def get_timing_cache(self):
            return Cache()

        def set_flag(self, flag):
            calls["flags"].append(flag)

    class Builder:
        def __init__(self, logger):
            pass

        def create_network(self, flags):
            calls["network_flags"] = flags
            return Network()

        def create_builder_config(self):
            return Config()

        def create_optimization_profile(self):
            return Profile()

        def build_serialized_network(self, network, config):
            return b"engine"

    class OnnxParser:
        num_errors = 0

        def __init__(self, network, logger):
            pass

        def parse_from_file(self, path):
            calls["parsed"] = path
            return True

    trt.Builder, trt.OnnxParser = Builder, OnnxParser
    return trt


@pytest.fixture
def onnx_file(ort_bundle):
    return ort_bundle / "model.onnx"  # an fp32 graph


def test_fp32_build_is_strongly_typed_with_a_batch_profile_and_timing_cache(onnx_file, tmp_path,
                                                                             monkeypatch):
    trt = _fake_tensorrt("10.9.0", precision_flags=True)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    cache = tmp_path / "timing.cache"
    engine = tb.build_engine(onnx_file, tmp_path / "model.engine", batch=(1, 2, 8),
                             timing_cache=cache, workspace_mb=64, log=lambda m: None)
    assert engine.read_bytes() == b"engine" and cache.read_bytes() == b"timing-cache"
    assert trt.calls["network_flags"] == 1 << 3 and trt.calls["flags"] == []
    assert trt.calls["profiles"] == [("input", (1, 3, 32, 32), (2, 3, 32, 32), (8, 3, 32, 32))]
    assert trt.calls["workspace"] == 64 << 20 and trt.calls["cache_in"] == b""
    tb.build_engine(onnx_file, tmp_path / "model.engine", timing_cache=cache, log=lambda m: None)
    assert trt.calls["cache_in"] == b"timing-cache"  # the second build reuses the cache


def test_fp16_from_an_fp32_graph_uses_the_flag_on_trt10_and_explains_trt11(onnx_file, tmp_path,
                                                                             monkeypatch):
    trt10 = _fake_tensorrt("10.9.0", precision_flags=True)
    monkeypatch.setitem(sys.modules, "tensorrt", trt10)
    tb.build_engine(onnx_file, tmp_path / "e10", precision="fp16", log=lambda m: None)
    assert trt10.calls["network_flags"] == 0 and trt10.calls["flags"] == ["fp16"]
    monkeypatch.setitem(sys.modules, "tensorrt", _fake_tensorrt("11.4.0", precision_flags=False))
    with pytest.raises(tb.BuildError, match="removed BuilderFlag.FP16.*modelopt.onnx.autocast"):
        tb.build_engine(onnx_file, tmp_path / "e11", precision="fp16", log=lambda m: None)


def test_int8_on_trt11_needs_qdq_nodes(onnx_file, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", _fake_tensorrt("11.4.0", precision_flags=False))
    monkeypatch.setitem(sys.modules, "modelopt", None)  # not installed
    with pytest.raises(tb.BuildError, match="removed in 11.x.*nvidia-modelopt"):
        tb.build_engine(onnx_file, tmp_path / "e", precision="int8", calib=np.zeros((4, 3, 32, 32)),
                        log=lambda m: None)


def test_trtexec_command_has_the_profile_only_for_a_dynamic_batch():
    dynamic = tb.trtexec_command("model.onnx", [2, 3, 40, 40], dynamic=True, batch=(1, 2, 8))
    assert "--optShapes=input:2x3x40x40" in dynamic and "--saveEngine=model.engine" in dynamic
    static = tb.trtexec_command("model.onnx", [1, 3, 40, 40], dynamic=False, batch=(1, 1, 1))
    assert not any("Shapes" in a for a in static) and "--timingCacheFile=timing.cache" in static


@pytest.mark.gpu
def test_trt_bundle_holds_a_verified_engine_and_rebuilds_on_target(export_run, tmp_path, quick):
    pytest.importorskip("tensorrt")
    from hwnas.export import export_subnet, load

    run, archs = export_run
    path = export_subnet(run.run_dir, archs[0].id, "trt", out_dir=tmp_path / "trt", **quick)
    meta = json.loads((path / "model.json").read_text())
    assert meta["status"] == "verified" and "model.engine" in meta["files"]
    assert meta["latency"]["measured"]["timer"] == "cuda_events"
    with load(path) as bundle:
        assert bundle.runtime.startswith("trt")
    for precision in ("fp32", "int8"):
        done = subprocess.run([sys.executable, str(path / "build_engine.py"), "--precision",
                               precision, "--engine", str(tmp_path / f"{precision}.engine")],
                              capture_output=True, text=True, timeout=600)
        if precision == "int8" and "nvidia-modelopt" in done.stderr:
            pytest.skip("TensorRT 11 INT8 needs nvidia-modelopt, not installed")
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"{precision}.engine").stat().st_size > 0
