"""TensorRT backend (`trt`): ONNX -> serialized engine (TensorRT's Python API) -> execution context.

Build: `hwnas.devices.tensorrt_build.build_engine`, the same builder every exported TensorRT bundle
carries: `trt.Builder` -> network (strongly typed where the flag exists: required on 10.x for
precision to follow the graph, the only mode on 11.x) -> `trt.OnnxParser` -> builder config with
a workspace limit -> `build_serialized_network`. fp16 engines are built from an fp16 ONNX graph
(see `onnx_export`): TensorRT 11 removed the builder's FP16 flag, and strong typing makes the
graph's types the engine's. A device agent builds the engine from the ONNX it receives
(`compile_onnx`).

Run: `trt.Runtime.deserialize_cuda_engine` -> `create_execution_context`; input and output live
in torch CUDA tensors bound with `set_tensor_address`; `execute_async_v3` on a dedicated torch
stream, timed with CUDA events on that stream. Engines are specific to the GPU and TensorRT
version that built them: the artifact records both.

INT8 (`trt-int8`): explicit quantization only (TensorRT's implicit INT8 calibrators are
deprecated): the fp32 ONNX is quantized to a Q/DQ graph (symmetric int8 activations, per-channel
int8 weights, calibration images from `compile(..., calibration=)`) and the strongly typed build
follows its Q/DQ. `int8_share` is read from that Q/DQ graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices.base import Artifact, OnnxBuiltBackend, Runner
from hwnas.devices.onnx_export import INPUT_NAME, export_onnx
from hwnas.errors import DeviceError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["TensorRtBackend", "TensorRtRunner"]


class TensorRtBackend(OnnxBuiltBackend):
    name = "tensorrt"
    artifact_format = "tensorrt-engine"
    requires = ("tensorrt",)
    extra = "tensorrt"
    dists = ("tensorrt", "tensorrt-cu12", "tensorrt-cu13")
    builds_on_target = True  # engines are tied to the GPU and TensorRT version that built them
    fp32_math = "tf32"  # TensorRT runs fp32 convolutions in TF32 by default

    @classmethod
    def write_build_kit(cls, folder: Path, *, onnx: str, shape: list[int], precision: str,
                        batch: tuple[int, int, int], calib: np.ndarray | None,
                        input_name: str) -> dict[str, Any]:
        """build_engine.py (the builder `_from_onnx` uses, as a script), build.sh (trtexec) and
        calib.npy: see `hwnas.devices.tensorrt_build`."""
        from hwnas.devices.tensorrt_build import write_build_kit

        return write_build_kit(folder, onnx=onnx, shape=shape, dynamic=True, precision=precision,
                               batch=batch, calib=calib, input_name=input_name)

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        return ("fp32", "fp16", "int8")

    def _available(self) -> str | None:
        from hwnas.devices._cuda import cuda_reason

        return cuda_reason()

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        precision = "fp32" if self.device.precision == "int8" else self.device.precision
        onnx_path = export_onnx(module, x, workdir / "model.onnx", precision=precision)
        return self._from_onnx(onnx_path, tuple(x.shape), workdir)

    def _from_onnx(self, onnx_path: Path, shape: tuple[int, ...], workdir: Path) -> Artifact:
        import torch

        # the bundles' builder (build_engine.py in every TensorRT bundle): one engine builder
        from hwnas.devices.tensorrt_build import WORKSPACE_MB, BuildError, build_engine

        trt = self._require("tensorrt")
        precision = self.device.precision
        workspace = int(self.device.options.get("workspace_bytes", WORKSPACE_MB << 20))
        meta: dict[str, Any] = {}
        if precision == "int8":
            from hwnas.devices.quantize import TRT_OP_TYPES, qdq_graph_int8_share, quantize_onnx

            images, meta = self._calibration_for(shape)
            qdq = workdir / "model_int8_qdq.onnx"
            meta.update(quantize_onnx(onnx_path, qdq, images, batch=shape[0],
                                      op_types=TRT_OP_TYPES, symmetric=True),
                        quantizer="onnxruntime-qdq", **qdq_graph_int8_share(qdq))
            onnx_path = qdq
        try:
            path = build_engine(onnx_path, workdir / "model.engine", precision=precision,
                                workspace_mb=max(1, workspace >> 20), log=lambda _msg: None)
        except BuildError as err:
            raise DeviceError(f"device '{self.device.name}': {err}") from None
        dtype = "float16" if precision == "fp16" else "float32"
        return self._artifact(path, shape, input_dtype=dtype, onnx=str(onnx_path),
                              gpu=torch.cuda.get_device_name(), tensorrt=trt.__version__, **meta)

    def _load(self, artifact: Artifact) -> Runner:
        return TensorRtRunner(artifact, self.device, self.versions(), self._require("tensorrt"))


class TensorRtRunner(Runner):
    timer = "cuda_events"

    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str],
                 trt: Any) -> None:
        import torch

        from hwnas.devices._cuda import CudaEventTimer

        super().__init__(artifact, device, versions)
        self.torch = torch
        self.runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))  # must outlive the engine
        self.engine = self.runtime.deserialize_cuda_engine(Path(artifact.path).read_bytes())
        if self.engine is None:
            raise DeviceError(f"device '{device.name}': TensorRT cannot load {artifact.path} "
                              "(engines are tied to the GPU and TensorRT version that built them)")
        self.context = self.engine.create_execution_context()
        self.stream = torch.cuda.Stream()
        self.buffers: dict[str, torch.Tensor] = {}
        self.output_name = None
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            shape = tuple(self.context.get_tensor_shape(name))
            np_dtype = np.dtype(trt.nptype(self.engine.get_tensor_dtype(name)))
            dtype = torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype
            self.buffers[name] = torch.empty(shape, dtype=dtype, device="cuda")
            self.context.set_tensor_address(name, self.buffers[name].data_ptr())
            is_output = self.engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT
            if is_output and self.output_name is None:
                self.output_name = name
        self._timer = CudaEventTimer(self.stream)

    def prepare(self, x: np.ndarray) -> None:
        self.buffers[INPUT_NAME].copy_(self.torch.from_numpy(x))
        self.torch.cuda.synchronize()

    def invoke(self, prepared: Any) -> Any:
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise DeviceError(f"device '{self.device.name}': TensorRT execution failed")
        return self.buffers[self.output_name]

    def time_once(self, prepared: Any) -> float:
        return self._timer(lambda: self.invoke(prepared))

    def to_numpy(self, out: Any) -> np.ndarray:
        self.stream.synchronize()
        return out.float().cpu().numpy()
