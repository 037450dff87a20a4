"""ONNX Runtime backend (`cpu-ort`, `cuda-ort`).

CPU: `intra_op_num_threads` = the device's threads, one inter-op thread, sequential execution,
all graph optimisations; the session's options are read back to verify the thread count.
INT8 (`cpu-ort-int8`): static QDQ quantization of the fp32 export (per-channel int8 weights unless
the device option ``per_channel`` is false, uint8 activations, calibration images from
`compile(..., calibration=)`), choosing what to quantize so that ONNX Runtime's fused int8 kernels
actually run (see `hwnas.devices.quantize`); the artifact records `int8_share`, read from the
session's optimized graph.
CUDA: inputs and outputs stay on the GPU through I/O binding so a sample times the model, not
host<->device copies; `run_with_iobinding` returns after the GPU work, and outputs are
synchronised inside the timed call, so the host clock is right here (the CUDA EP runs on its
own stream, which torch's CUDA events would not see).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices.base import Artifact, Backend, Runner
from hwnas.devices.onnx_export import INPUT_NAME, export_onnx
from hwnas.extras import install_hint

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["OnnxRuntimeBackend", "OnnxRuntimeRunner"]

_CPU = "CPUExecutionProvider"
_CUDA = "CUDAExecutionProvider"


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    artifact_format = "onnx"
    requires = ("onnxruntime",)
    dists = ("onnxruntime", "onnxruntime-gpu", "onnx")

    @property
    def extra(self) -> str:  # type: ignore[override]  # the two install the same module
        return "ort-gpu" if self.device.provider == _CUDA else "ort"

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        return ("fp32", "fp16") if provider == _CUDA else ("fp32", "int8")

    @classmethod
    def default_provider(cls) -> str | None:
        return _CPU

    def versions(self) -> dict[str, str]:
        if self.device.precision != "int8":
            return super().versions()
        from hwnas.devices.quantize import recipe_versions

        return recipe_versions(super().versions())

    def _available(self) -> str | None:
        import onnxruntime as ort

        providers = ort.get_available_providers()
        if self.device.provider not in providers:
            hint = (f"; {install_hint(self.extra)} in place of onnxruntime"
                    if self.device.provider == _CUDA else "")
            return (f"onnxruntime here has no {self.device.provider} "
                    f"(has {', '.join(providers)}){hint}")
        if self.device.provider == _CUDA:
            from hwnas.devices._cuda import cuda_reason

            return cuda_reason()
        return None

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        if self.device.precision == "int8":
            return self._compile_int8(module, x, workdir)
        path = export_onnx(module, x, workdir / "model.onnx", precision=self.device.precision)
        dtype = "float16" if self.device.precision == "fp16" else "float32"
        return self._artifact(path, x, input_dtype=dtype, opset=17)

    def _compile_int8(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        from hwnas.devices.quantize import ORT_OP_TYPES, ort_int8_share, quantize_onnx

        fp32 = export_onnx(module, x, workdir / "model_fp32.onnx")
        images, calib = self._calibration_for(tuple(x.shape))
        path = workdir / "model.onnx"
        op_types = self.device.options.get("op_types", ORT_OP_TYPES)
        meta = quantize_onnx(fp32, path, images, batch=int(x.shape[0]), op_types=op_types,
                             per_channel=bool(self.device.options.get("per_channel", True)))
        share = ort_int8_share(path, self.device.provider or _CPU)
        return self._artifact(path, x, opset=17, quantizer="onnxruntime-qdq", fp32_onnx=str(fp32),
                              **calib, **meta, **share)

    def _load(self, artifact: Artifact) -> Runner:
        return OnnxRuntimeRunner(artifact, self.device, self.versions())


class OnnxRuntimeRunner(Runner):
    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str]) -> None:
        import onnxruntime as ort

        super().__init__(artifact, device, versions)
        so = ort.SessionOptions()
        so.intra_op_num_threads = device.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        for key, value in device.options.get("session_config", {}).items():
            so.add_session_config_entry(str(key), str(value))
        provider_options = device.options.get("provider_options", {})
        self.session = ort.InferenceSession(str(artifact.path), sess_options=so,
                                            providers=[(device.provider, provider_options)])
        self._verified_threads(self.session.get_session_options().intra_op_num_threads)
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.cuda = device.provider == _CUDA
        if self.cuda:
            self.ort = ort
            self.binding = self.session.io_binding()

    def prepare(self, x: np.ndarray) -> Any:
        if not self.cuda:
            return {INPUT_NAME: x}
        value = self.ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
        self.binding.bind_ortvalue_input(INPUT_NAME, value)
        for name in self.output_names:
            self.binding.bind_output(name, "cuda")
        return value  # keep the device buffer alive while it is bound

    def invoke(self, prepared: Any) -> Any:
        if not self.cuda:
            return self.session.run(self.output_names[:1], prepared)[0]
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()
        return self.binding

    def to_numpy(self, out: Any) -> np.ndarray:
        if self.cuda:
            return np.asarray(out.copy_outputs_to_cpu()[0], dtype=np.float32)
        return np.asarray(out, dtype=np.float32)
