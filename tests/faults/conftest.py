"""Shared helpers of the fault tests: a tiny ONNX model the agent and the bundle loader accept."""

from __future__ import annotations

import pytest
from agent_helpers import tiny_onnx


@pytest.fixture(scope="session", name="tiny_onnx")
def tiny_onnx_fixture():
    """`tiny_onnx(path, metadata=None) -> path`: writes a Conv+ReLU ONNX model, input [1,3,8,8]."""
    return tiny_onnx
