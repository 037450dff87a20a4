"""OpenVINO backend (`cpu-openvino`): ONNX -> OpenVINO IR (.xml + .bin), compiled per device.

Precision is forced (the CPU plugin runs bf16 by default on CPUs with AMX/AVX512-BF16, so fp32
devices pass `INFERENCE_PRECISION_HINT: f32`), and the thread count and precision are read back
from the compiled model. bf16/fp16 devices are usable only where the plugin lists the capability;
INT8 devices quantize at compile time (option `quantizer`: "onnx-qdq", the default, or "nncf").

OpenVINO sends usage telemetry unless its user has opted out: on `import openvino` and on every
`openvino.convert_model`. hwnas reaches for nothing: it imports openvino with OpenVINO's own no-op
telemetry stub (`import_openvino`) and reads ONNX with the runtime's ONNX frontend
(`onnx_to_ov_model`), not the converter. Options, precisions and INT8: docs/devices.md, 'Backends'.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices._imports import missing_module, require
from hwnas.devices.base import Artifact, OnnxBuiltBackend, Runner, one_line
from hwnas.devices.onnx_export import export_onnx
from hwnas.errors import DeviceError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["OpenVinoBackend", "OpenVinoRunner", "plugin_capabilities", "onnx_to_ov_model", "import_openvino"]

#: run before ``import openvino``: its converter then falls back to the no-op stub it ships for
#: when the telemetry package is absent (telemetry_stub), instead of sending usage events
_NO_TELEMETRY = "import sys; sys.modules.setdefault('openvino_telemetry', None)"

# int8: quantized layers run u8/i8; the rest must stay f32 (the plugin's default here is bf16)
_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8": "f32"}
_QUANTIZERS = ("onnx-qdq", "nncf")
#: the plugin capability a reduced float precision needs (without it the hint falls back to f32),
#: and the hardware that gives it
_CAPABILITY = {"bf16": ("BF16", "a CPU with AVX512-BF16 or AMX"),
               "fp16": ("FP16", "a GPU, or a CPU with AVX512-FP16 or AMX-FP16")}


def import_openvino(device: str) -> Any:
    """``openvino``, imported without its usage telemetry (the module docstring); a DeviceError
    naming `device` where it cannot be imported. Other code may import openvino_telemetry later."""
    if sys.modules.get("openvino") is not None:
        return sys.modules["openvino"]
    blocked = "openvino_telemetry" not in sys.modules
    sys.modules.setdefault("openvino_telemetry", None)  # what _NO_TELEMETRY runs in a child
    try:
        return require("openvino", device, "openvino")
    finally:
        if blocked and sys.modules.get("openvino_telemetry", False) is None:
            del sys.modules["openvino_telemetry"]


def onnx_to_ov_model(ov: Any, onnx_path: Path) -> Any:
    """The `ov.Model` of an ONNX file, as `openvino.convert_model` makes it, without its telemetry.

    `Core.read_model` parses the file; the model-optimizer transformations convert_model applies
    next (fusions, QDQ weights compressed) make the same graph, op for op (330 ops for the largest
    r32 subnet, against 1,399 as parsed) in 0.3 s instead of 1.2 s. Those transformations live in
    OpenVINO's `_offline_transformations` (what its converter, NNCF and optimum-intel call); where
    a release lacks them the parsed graph is kept: the CPU plugin compiles it to the same execution
    graph, only the saved IR is larger."""
    model = ov.Core().read_model(str(onnx_path))
    try:
        from openvino._offline_transformations import (apply_fused_names_cleanup, apply_moc_transformations,
                                                       compress_quantize_weights_transformation)
    except ImportError:
        return model
    apply_moc_transformations(model, cf=False, smart_reshape=True)
    compress_quantize_weights_transformation(model)
    apply_fused_names_cleanup(model)
    return model


class OpenVinoBackend(OnnxBuiltBackend):
    name = "openvino"
    artifact_format = "openvino-ir"
    requires = ("openvino",)
    extra = "openvino"
    dists = ("openvino", "onnx")

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        return ("fp32", "bf16", "fp16", "int8")

    @classmethod
    def default_provider(cls) -> str | None:
        return "CPU"

    @property
    def quantizer(self) -> str:
        return str(self.device.options.get("quantizer", "onnx-qdq"))

    def versions(self) -> dict[str, str]:
        if self.device.precision != "int8" or self.quantizer != "onnx-qdq":
            return super().versions()
        from hwnas.devices.quantize import recipe_versions

        return recipe_versions(super().versions())

    def _available(self) -> str | None:
        precision, target = self.device.precision, self.device.provider or "CPU"
        if precision in _CAPABILITY:
            caps = plugin_capabilities(target)
            if isinstance(caps, str):
                return f"OpenVINO cannot tell what its {target} plugin supports here: {caps}"
            capability, needs = _CAPABILITY[precision]
            if capability not in caps:
                return (f"OpenVINO's {target} plugin cannot run {precision} on this machine (its "
                        f"OPTIMIZATION_CAPABILITIES: {', '.join(caps) or 'none'}; {precision} needs {needs})")
            return None
        if precision != "int8":
            return None
        if self.quantizer not in _QUANTIZERS:
            return f"unknown quantizer '{self.quantizer}'; use one of {', '.join(_QUANTIZERS)}"
        if self.quantizer == "nncf":
            return missing_module("nncf", "nncf")
        return missing_module("onnxruntime", "ort")  # onnx-qdq: ONNX Runtime's quantizer

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        return self._from_onnx(export_onnx(module, x, workdir / "model.onnx"), tuple(x.shape), workdir)

    def _from_onnx(self, onnx_path: Path, shape: tuple[int, ...], workdir: Path) -> Artifact:
        ov = import_openvino(self.device.name)
        xml = workdir / "model.xml"
        meta: dict[str, Any] = {}
        if self.device.precision == "int8":
            model, meta = self._quantized(ov, onnx_path, shape, workdir)
        else:
            model = onnx_to_ov_model(ov, onnx_path)
        # keep fp32 weights in the IR; the runtime precision is chosen at load time
        ov.save_model(model, str(xml), compress_to_fp16=False)
        if self.device.precision == "int8":
            from hwnas.devices.quantize import openvino_int8_share

            meta.update(openvino_int8_share(ov.Core().compile_model(
                str(xml), self.device.provider or "CPU", _config(self.device, "int8"))))
        return self._artifact(xml, shape, files=[xml, xml.with_suffix(".bin")], onnx=str(onnx_path),
                              **meta)

    def _quantized(self, ov: Any, onnx_path: Path, shape: tuple[int, ...], workdir: Path
                   ) -> tuple[Any, dict[str, Any]]:
        """The quantized model (ov.Model) and its metadata, with the device's quantizer."""
        from hwnas.devices.quantize import ORT_OP_TYPES, batches, quantize_onnx

        images, meta = self._calibration_for(shape)
        meta["quantizer"] = self.quantizer
        if self.quantizer == "nncf":
            nncf = require("nncf", self.device.name, "nncf")
            items = batches(images, shape[0])
            model = nncf.quantize(onnx_to_ov_model(ov, onnx_path), nncf.Dataset(items),
                                  preset=nncf.QuantizationPreset.PERFORMANCE, subset_size=len(items))
            return model, meta
        qdq = workdir / "model_int8_qdq.onnx"
        op_types = self.device.options.get("op_types", ORT_OP_TYPES)
        meta.update(quantize_onnx(onnx_path, qdq, images, batch=shape[0], op_types=op_types))
        return onnx_to_ov_model(ov, qdq), meta

    def _load(self, artifact: Artifact) -> Runner:
        return OpenVinoRunner(artifact, self.device, self.versions(), import_openvino(self.device.name))


@functools.lru_cache(maxsize=None)
def plugin_capabilities(target: str) -> tuple[str, ...] | str:
    """OpenVINO's ``OPTIMIZATION_CAPABILITIES`` of `target` ("CPU", "GPU", ...), or why they cannot be
    read. Asked in a child process unless openvino is imported here already: listing devices must
    not import a runtime (`hwnas.devices._imports`); the answer is kept for the process."""
    if sys.modules.get("openvino") is not None:
        try:
            return tuple(str(c) for c in sys.modules["openvino"].Core().get_property(
                target, "OPTIMIZATION_CAPABILITIES"))
        except Exception as err:  # an absent plugin: a long C++ message
            return one_line(err)
    code = (_NO_TELEMETRY + "; import json, openvino as ov; "
            "print(json.dumps(ov.Core().get_property(sys.argv[1], 'OPTIMIZATION_CAPABILITIES')))")
    try:
        done = subprocess.run([sys.executable, "-c", code, target], capture_output=True, text=True,
                              timeout=120)
        if done.returncode == 0:
            return tuple(str(c) for c in json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as err:
        return one_line(err)
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"the query exited with code {done.returncode}"


def _config(device: Device, precision: str) -> dict[str, Any]:
    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": _HINTS[precision],
                              "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    if (device.provider or "CPU") == "CPU":
        config["INFERENCE_NUM_THREADS"] = device.threads
    config.update(device.options.get("config", {}))
    return config


class OpenVinoRunner(Runner):
    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str],
                 ov: Any) -> None:
        super().__init__(artifact, device, versions)
        self.ov = ov
        target = device.provider or "CPU"
        config = _config(device, artifact.precision)
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
