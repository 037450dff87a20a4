"""Shared helpers of the fault tests: a tiny ONNX model the agent and the bundle loader accept."""

from __future__ import annotations

from pathlib import Path

import pytest


def tiny_onnx(path: Path, *, metadata: dict[str, str] | None = None) -> Path:
    """Conv + ReLU with one static input named `input`: an ONNX model the agent accepts."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3))
                                .astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["output"])], "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture(scope="session", name="tiny_onnx")
def tiny_onnx_fixture():
    """`tiny_onnx(path, metadata=None) -> path`: writes a Conv+ReLU ONNX model, input [1,3,8,8]."""
    return tiny_onnx
