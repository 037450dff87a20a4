"""INT8 post-training quantization for the INT8 device variants, and what really runs in INT8.

A backend compiling an INT8 artifact calibrates on the images given to `Backend.compile(...,
calibration=images)` (training images, never test images), else on a fixed-seed synthetic batch;
the artifact's metadata says which. Activation ranges end at the 99.99th percentile of each
tensor's calibration values, not at their min/max: one extreme value no longer stretches a whole
layer's scale. The QDQ recipe follows what each runtime really runs in int8 (ReLU/Clip folded, SE's
ReduceMean as GlobalAveragePool, per-channel weights, the stem convolution in float). What gets
quantized depends on the weights, so INT8 profiling times trained weights.

Each choice and its measurements: docs/devices.md, 'INT8 quantization', and docs/int8.md.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hwnas.errors import DeviceError

__all__ = ["SYNTHETIC_IMAGES", "QDQ_RECIPE", "recipe_versions", "calibration_batch", "batches",
           "quantize_onnx", "stem_convolutions", "ort_int8_share", "openvino_int8_share", "pt2e_int8_share",
           "qdq_graph_int8_share", "ORT_OP_TYPES"]

SYNTHETIC_IMAGES = 16
#: what `quantize_onnx` makes of a model (op types, folding, weight granularity): recorded in the
#: versions of an artifact it quantized (`recipe_versions`), so timings and the host's INT8 anchors
#: (keyed by versions) are never mixed across recipes. Change it when the recipe changes.
QDQ_RECIPE = "4 (ReLU/Clip folded, percentile 99.99 ranges, stem convolution in float)"
#: the percentile of each activation's calibration values its range ends at (see the module doc)
CALIB_PERCENTILE = 99.99
#: op types ONNX Runtime runs in int8 here (QLinearConv, QGemm, QLinearAdd/Mul/GlobalAveragePool),
#: plus the activations the quantizer folds into the range of the op before them (uint8 only)
ORT_OP_TYPES = ("Conv", "Gemm", "MatMul", "Add", "Mul", "GlobalAveragePool", "Relu", "Clip")
#: TensorRT fuses Q/DQ into convolutions, GEMMs and residual adds
TRT_OP_TYPES = ("Conv", "Gemm", "MatMul", "Add", "GlobalAveragePool")
_INT8_ORT = {"QLinearConv", "ConvInteger", "QGemm", "QLinearMatMul", "MatMulInteger",
             "NhwcQLinearConv", "DynamicQuantizeMatMul"}
_FP_ORT = {"Conv", "FusedConv", "NchwcConv", "Gemm", "MatMul", "FusedMatMul", "FusedGemm"}


def calibration_batch(calibration: np.ndarray | None, shape: Sequence[int], device: str
                      ) -> tuple[np.ndarray, str]:
    """(N, C, H, W) float32 calibration images for a model of input `shape`, and their source.

    Images of another size are resized (bilinear) to the model's; None gives a fixed-seed
    standard-normal batch of `SYNTHETIC_IMAGES` images (source "synthetic").
    """
    if calibration is None:
        rng = np.random.default_rng(0)
        return rng.standard_normal((SYNTHETIC_IMAGES, *shape[1:]), dtype=np.float32), "synthetic"
    x = np.asarray(calibration, dtype=np.float32)
    if x.ndim != len(shape) or x.shape[1] != shape[1] or len(x) == 0:
        raise DeviceError(f"device '{device}': calibration images must be (N, {shape[1]}, H, W) "
                          f"like the model's input {tuple(shape)}, got {tuple(x.shape)}")
    if x.shape[2:] != tuple(shape[2:]):
        import torch
        import torch.nn.functional as F

        x = F.interpolate(torch.from_numpy(x), size=tuple(shape[2:]), mode="bilinear",
                          align_corners=False).numpy()
    return np.ascontiguousarray(x), "images"


def batches(images: np.ndarray, batch: int) -> list[np.ndarray]:
    """Model-sized batches of the calibration images (tiled when fewer than one batch)."""
    if len(images) < batch:
        images = np.concatenate([images] * -(-batch // len(images)))
    return [images[i:i + batch] for i in range(0, len(images) - batch + 1, batch)]


def recipe_versions(versions: dict[str, str]) -> dict[str, str]:
    """A backend's versions plus the QDQ recipe, for artifacts `quantize_onnx` quantized."""
    return {**versions, "hwnas_qdq_recipe": QDQ_RECIPE}


def _gap_for_reducemean(model: Any) -> int:
    """ReduceMean over H, W (keepdims) -> GlobalAveragePool, in place; returns how many.
    Quantized, the former falls back to a slow fp32 reduce; the latter has an int8 kernel."""
    from onnx import helper

    nodes = model.graph.node
    done = 0
    for i, node in enumerate(list(nodes)):
        if node.op_type != "ReduceMean" or len(node.input) != 1:
            continue
        attrs = {a.name: a for a in node.attribute}
        axes = sorted(attrs["axes"].ints) if "axes" in attrs else None
        keep = attrs["keepdims"].i if "keepdims" in attrs else 1
        if axes in ([2, 3], [-2, -1]) and keep == 1:
            gap = helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output),
                                   name=node.name)
            nodes.remove(node)
            nodes.insert(i, gap)
            done += 1
    return done


def stem_convolutions(model: Any) -> list[str]:
    """Names of the convolutions that read the graph's input (the image): the layers kept float."""
    inputs = {i.name for i in model.graph.input}
    return [n.name for n in model.graph.node if n.op_type == "Conv" and n.name and n.input and n.input[0] in inputs]


def quantize_onnx(src: Path, dst: Path, images: np.ndarray, *, batch: int,
                  op_types: Sequence[str] = ORT_OP_TYPES, symmetric: bool = False,
                  per_channel: bool = True, percentile: float | None = CALIB_PERCENTILE,
                  keep_float: Sequence[str] | None = None) -> dict[str, Any]:
    """Static QDQ quantization of `src` into `dst`: int8 weights (per output channel, or one scale
    per tensor), activations uint8 (asymmetric: ONNX Runtime's u8s8 VNNI path; ReLU / Clip in
    `op_types` are then folded away) or int8 symmetric (TensorRT). Activation ranges at `percentile`
    of the calibration values (None: their min/max). `keep_float`: names of nodes left in float
    (None: the stem convolutions, `stem_convolutions`). Returns metadata for the artifact."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    model = onnx.load(str(src))
    rewritten = _gap_for_reducemean(model)
    float_nodes = stem_convolutions(model) if keep_float is None else list(keep_float)
    pre = dst.with_name(dst.stem + "_pre.onnx")
    onnx.save(model, str(pre))
    feeds = [{model.graph.input[0].name: b} for b in batches(images, batch)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    def quantize(method: Any, **options: Any) -> None:
        quantize_static(str(pre), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
                        weight_type=QuantType.QInt8, op_types_to_quantize=list(op_types), calibrate_method=method,
                        nodes_to_exclude=float_nodes,
                        extra_options={"ActivationSymmetric": symmetric, "WeightSymmetric": True, **options})

    calibration = "minmax" if percentile is None else f"percentile {percentile}"
    try:
        if percentile is None:
            quantize(CalibrationMethod.MinMax)
        else:
            quantize(CalibrationMethod.Percentile, CalibPercentile=percentile)
    except ValueError as err:
        # numpy cannot bin a tensor whose values span (almost) nothing (a constant one, e.g. in an
        # untrained network); min/max ranges still work there
        if "bins" not in str(err) or percentile is None:
            raise
        calibration = "minmax (a tensor's values spanned too little for percentile histograms)"
        quantize(CalibrationMethod.MinMax)
    pre.unlink(missing_ok=True)
    return {"quantized_op_types": list(op_types), "reducemean_to_gap": rewritten, "float_nodes": float_nodes,
            "calibration_method": calibration,
            "activations": "int8-symmetric" if symmetric else "uint8",
            "weights": "int8-per-channel" if per_channel else "int8-per-tensor"}


def _share(int8: int, total: int, source: str, **extra: Any) -> dict[str, Any]:
    return {"int8_share": round(int8 / total, 4) if total else 0.0, "int8_layers": int8,
            "layers": total, "int8_share_source": source, **extra}


def ort_int8_share(path: Path, provider: str = "CPUExecutionProvider") -> dict[str, Any]:
    """Share of conv/GEMM layers that run in int8 in ONNX Runtime's *optimized* graph (after its
    QDQ fusions), plus the fp32 elementwise ops left between Q/DQ pairs."""
    import onnx
    import onnxruntime as ort

    opt = path.with_name(path.stem + "_optimized.onnx")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(opt)
    ort.InferenceSession(str(path), sess_options=so, providers=[provider])
    ops = Counter(n.op_type for n in onnx.load(str(opt)).graph.node)
    opt.unlink(missing_ok=True)
    int8 = sum(v for k, v in ops.items() if k in _INT8_ORT)
    fp = sum(v for k, v in ops.items() if k in _FP_ORT)
    leftover = {k: v for k, v in ops.items() if k not in _INT8_ORT | _FP_ORT
                and not k.startswith("QLinear") and k not in ("QuantizeLinear", "DequantizeLinear")}
    return _share(int8, int8 + fp, "onnxruntime optimized graph",
                  qdq_pairs=int(ops.get("DequantizeLinear", 0)), fp32_ops=leftover)


def openvino_int8_share(compiled: Any) -> dict[str, Any]:
    """Share of Convolution/FullyConnected/MatMul layers whose runtime precision is u8/i8 in the
    compiled model's execution graph (what the CPU plugin really runs)."""
    kinds = ("Convolution", "FullyConnected", "MatMul", "GroupConvolution", "Deconvolution")
    int8 = total = 0
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        kind = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        if kind not in kinds:
            continue
        total += 1
        prec = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
        int8 += prec.lower() in ("u8", "i8")
    return _share(int8, total, "openvino execution graph")


def pt2e_int8_share(graph_module: Any) -> dict[str, Any]:
    """Share of conv/linear nodes of a PT2E-converted graph whose activation and weight come from
    dequantize nodes (the int8 patterns the XNNPACK partitioner lowers to QS8 kernels)."""
    int8 = total = 0
    for node in graph_module.graph.nodes:
        name = str(node.target)
        if node.op != "call_function" or not any(k in name for k in ("conv2d", "linear",
                                                                       "convolution")):
            continue
        total += 1
        args = [a for a in node.args[:2] if hasattr(a, "target")]
        int8 += len(args) == 2 and all("dequantize" in str(a.target) for a in args)
    return _share(int8, total, "pt2e graph (XNNPACK QS8 patterns)")


def qdq_graph_int8_share(path: Path) -> dict[str, Any]:
    """Share of Conv/Gemm/MatMul nodes fed by DequantizeLinear on every data input, read from a
    QDQ ONNX graph (what an explicit-quantization TensorRT build runs in int8)."""
    import onnx

    graph = onnx.load(str(path)).graph
    from_dq = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    int8 = total = 0
    for node in graph.node:
        if node.op_type in ("Conv", "Gemm", "MatMul"):
            total += 1
            int8 += all(i in from_dq for i in node.input[:2])
    return _share(int8, total, "qdq graph")
