"""ONNX export shared by the ONNX Runtime, OpenVINO and TensorRT backends.

Uses the TorchScript exporter (`dynamo=False`): one self-contained file in about a second, where
the dynamo exporter writes external weights and takes 5-10 s per model. Opset 17 is read by every
runtime version we support. Reduced precision (fp16) is baked into the graph by exporting a half
copy of the module, because TensorRT 11 dropped the builder's FP16 flag (strongly typed networks
only) and ONNX Runtime's CUDA EP runs whatever types the graph has.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["export_onnx", "INPUT_NAME", "OUTPUT_NAME", "OPSET"]

INPUT_NAME = "input"
OUTPUT_NAME = "output"
OPSET = 17


def export_onnx(module: nn.Module, example_input: torch.Tensor, path: str | Path, *,
                precision: str = "fp32", opset: int = OPSET, dynamic_batch: bool = False) -> Path:
    """Export `module` (eval mode) to one ONNX file with input "input" and output "output".

    `precision="fp16"` exports a half-precision copy (inputs and outputs fp16 too). The batch
    dimension is fixed to the example's unless `dynamic_batch`.
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    x = example_input
    if precision == "fp16":
        module = copy.deepcopy(module).half()
        x = x.half()
    elif precision not in ("fp32", "bf16"):  # bf16 is applied by the runtime (OpenVINO hint)
        raise ValueError(f"ONNX export supports fp32 and fp16, got {precision}")
    dynamic_axes = {INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=opset,
                          input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                          dynamic_axes=dynamic_axes, do_constant_folding=True)
    return path
