"""OpenVINO backend (`cpu-openvino`): ONNX -> OpenVINO IR (.xml + .bin), compiled per device.

Precision is forced: OpenVINO's CPU plugin runs bf16 by default on CPUs with AMX/AVX512-BF16
(errors ~1e-2), so fp32 devices pass `INFERENCE_PRECISION_HINT: f32`; bf16/fp16 devices ask for
those. One stream, latency hint, and `INFERENCE_NUM_THREADS` = the device's threads; both the
thread count and the precision are read back from the compiled model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices.base import Artifact, OnnxBuiltBackend, Runner
from hwnas.devices.onnx_export import export_onnx
from hwnas.errors import DeviceError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["OpenVinoBackend", "OpenVinoRunner"]

_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}


class OpenVinoBackend(OnnxBuiltBackend):
    name = "openvino"
    artifact_format = "openvino-ir"
    requires = ("openvino",)
    extra = "openvino"
    dists = ("openvino", "onnx")

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        return ("fp32", "bf16", "fp16")

    @classmethod
    def default_provider(cls) -> str | None:
        return "CPU"

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        return self._from_onnx(export_onnx(module, x, workdir / "model.onnx"), tuple(x.shape), workdir)

    def _from_onnx(self, onnx_path: Path, shape: tuple[int, ...], workdir: Path) -> Artifact:
        ov = self._require("openvino")
        xml = workdir / "model.xml"
        # keep fp32 weights in the IR; the runtime precision is chosen at load time
        ov.save_model(ov.convert_model(str(onnx_path)), str(xml), compress_to_fp16=False)
        return self._artifact(xml, shape, files=[xml, xml.with_suffix(".bin")], onnx=str(onnx_path))

    def _load(self, artifact: Artifact) -> Runner:
        return OpenVinoRunner(artifact, self.device, self.versions(), self._require("openvino"))


class OpenVinoRunner(Runner):
    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str],
                 ov: Any) -> None:
        super().__init__(artifact, device, versions)
        self.ov = ov
        target = device.provider or "CPU"
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": _HINTS[artifact.precision],
                                  "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
        if target == "CPU":
            config["INFERENCE_NUM_THREADS"] = device.threads
        config.update(device.options.get("config", {}))
        self.compiled = ov.Core().compile_model(str(artifact.path), target, config)
        hint = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        got = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
        if got != _HINTS[artifact.precision]:
            raise DeviceError(f"device '{device.name}': OpenVINO {target} runs {got}, not "
                              f"{artifact.precision}")
        self.precision_hint = got
        if target == "CPU":
            self._verified_threads(int(self.compiled.get_property("INFERENCE_NUM_THREADS")))
        self.request = self.compiled.create_infer_request()

    def prepare(self, x: np.ndarray) -> Any:
        tensor = self.ov.Tensor(np.ascontiguousarray(x))
        self.request.set_input_tensor(tensor)
        return tensor

    def invoke(self, prepared: Any) -> Any:
        self.request.infer()
        return self.request

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.array(out.get_output_tensor(0).data, dtype=np.float32, copy=True)
