"""PyTorch eager backend (`cpu-torch`, `cuda-torch`).

The artifact is the module itself (a deep copy in eval mode, moved to the device and dtype); it
lives in memory only, since saving an eager module means pickling it. Thread count is process
global in PyTorch, so the runner re-applies and re-reads it before every timed block. On CUDA the
runner times with CUDA events on the current stream. "fp32" on CUDA keeps PyTorch's TF32 setting
for convolutions as it is (on by default), like ONNX Runtime's CUDA EP and TensorRT do: what is
measured is what the runtime ships with.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices.base import Artifact, Backend, Runner
from hwnas.errors import DeviceError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["TorchBackend", "TorchRunner"]

_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class TorchBackend(Backend):
    name = "torch"
    artifact_format = "torch-module"
    requires = ("torch",)
    extra = "train"

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        return ("fp32", "bf16", "fp16") if provider == "cuda" else ("fp32", "bf16")

    @classmethod
    def default_provider(cls) -> str | None:
        return "cpu"

    def _available(self) -> str | None:
        if self.device.provider == "cuda":
            from hwnas.devices._cuda import cuda_reason

            return cuda_reason()
        if self.device.provider != "cpu":
            return f"torch provider must be cpu or cuda, got {self.device.provider}"
        return None

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        import torch

        dtype = getattr(torch, _DTYPES[self.device.precision])
        model = copy.deepcopy(module).eval().to(device=self.device.provider, dtype=dtype)
        for p in model.parameters():
            p.requires_grad_(False)
        artifact = self._artifact(None, x, torch_device=self.device.provider,
                                  torch_dtype=str(dtype))
        artifact.payload = model
        return artifact

    def _load(self, artifact: Artifact) -> Runner:
        if artifact.payload is None:
            raise DeviceError(f"device '{self.device.name}': eager PyTorch artifacts live in "
                              "memory only; compile the module again in this process")
        return TorchRunner(artifact, self.device, self.versions())


class TorchRunner(Runner):
    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str]) -> None:
        import torch

        super().__init__(artifact, device, versions)
        self.torch = torch
        self.module = artifact.payload
        self.tdevice = torch.device(device.provider)
        self.dtype = getattr(torch, _DTYPES[artifact.precision])
        if self.tdevice.type == "cuda":
            from hwnas.devices._cuda import CudaEventTimer

            self._timer = CudaEventTimer()
            self.timer = "cuda_events"  # type: ignore[misc]

    def activate(self) -> None:
        n = self.device.threads
        if self.torch.get_num_threads() != n:
            self.torch.set_num_threads(n)
        self._verified_threads(self.torch.get_num_threads())

    def prepare(self, x: np.ndarray) -> torch.Tensor:
        return self.torch.from_numpy(x).to(device=self.tdevice, dtype=self.dtype)

    def invoke(self, prepared: torch.Tensor) -> Any:
        with self.torch.inference_mode():
            return self.module(prepared)

    def to_numpy(self, out: Any) -> np.ndarray:
        if isinstance(out, (tuple, list)):
            out = out[0]
        return out.detach().float().cpu().numpy()

    def time_once(self, prepared: Any) -> float:
        if self.tdevice.type == "cuda":
            return self._timer(lambda: self.invoke(prepared))
        return super().time_once(prepared)
