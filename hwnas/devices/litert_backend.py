"""LiteRT (TFLite) backend (`mobile-litert`): litert-torch converts, ai-edge-litert runs.

Optional and heavy: the converter adds about 1.1 GB and pins torch<2.15; install with
`pip install 'hwnas[litert]'`. The interpreter uses its XNNPACK delegate with `num_threads` =
the device's threads. The interpreter offers no way to read the thread count back, so the
requested count is recorded as given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices.base import Artifact, Backend, Runner

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["LiteRtBackend", "LiteRtRunner"]


class LiteRtBackend(Backend):
    name = "litert"
    artifact_format = "tflite"
    requires = ("litert_torch", "ai_edge_litert")
    extra = "litert"
    dists = ("litert-torch", "ai-edge-litert")

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        litert_torch = self._require("litert_torch")
        path = workdir / "model.tflite"
        litert_torch.convert(module, (x,)).export(str(path))
        return self._artifact(path, x)

    def _load(self, artifact: Artifact) -> Runner:
        interpreter = self._require("ai_edge_litert.interpreter")
        return LiteRtRunner(artifact, self.device, self.versions(), interpreter)


class LiteRtRunner(Runner):
    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str],
                 interpreter: Any) -> None:
        super().__init__(artifact, device, versions)
        self.interp = interpreter.Interpreter(model_path=str(artifact.path),
                                              num_threads=device.threads)
        self.interp.allocate_tensors()
        self.input_index = self.interp.get_input_details()[0]["index"]
        self.output_index = self.interp.get_output_details()[0]["index"]
        self.threads = device.threads  # not readable from the interpreter

    def prepare(self, x: np.ndarray) -> None:
        self.interp.set_tensor(self.input_index, x)

    def invoke(self, prepared: Any) -> Any:
        self.interp.invoke()
        return self.interp

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.array(out.get_tensor(self.output_index), dtype=np.float32, copy=True)
