"""ExecuTorch backend: `mobile-xnnpack` (torch.export -> XNNPACK-lowered .pte -> executorch.runtime),
`mobile-xnnpack-int8` (PT2E quantization, then the same) and `edge-portable` (portable kernels, no
delegate: every activation in one planned arena, the microcontroller-class path).

Lowering takes seconds per model, so compile once and reuse the .pte. Artifacts record their memory
plan (`program_memory`) and undelegated operators (`undelegated_ops`: a subnet that is not fully
delegated measures a different runtime). The XNNPACK thread pool is process global and resetting it
while a model is loaded corrupts memory, so it is sized only while no ExecuTorch model is loaded:
devices with different thread counts cannot share a process while the other's models stay loaded.

Memory plan, thread pool and INT8 in detail: docs/devices.md, 'Backends'.
"""

from __future__ import annotations

import weakref
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hwnas.devices._imports import missing_module
from hwnas.devices.base import Artifact, Backend, Runner
from hwnas.errors import DeviceError
from hwnas.fileio import atomic_write_bytes

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["ExecuTorchBackend", "ExecuTorchRunner", "program_memory"]


class ExecuTorchBackend(Backend):
    name = "executorch"
    artifact_format = "pte"
    requires = ("executorch",)
    extra = "executorch"
    dists = ("executorch", "torchao")

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        return ("fp32",) if provider == "portable" else ("fp32", "int8")

    def _available(self) -> str | None:
        if self.device.precision == "int8":
            return missing_module("torchao", self.extra)  # PT2E quantization lives there
        return None

    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        import torch

        exir = self._require("executorch.exir")
        xnnpack = self._require("executorch.backends.xnnpack.partition.xnnpack_partitioner")
        meta: dict[str, Any] = {}
        if self.device.precision == "int8":
            module, meta = self._quantized(module, x)
        exported = torch.export.export(module, (x,))
        if self.device.provider == "portable":
            edge, leftover = exir.to_edge(exported), None
        else:
            edge = exir.to_edge_transform_and_lower(
                exported, partitioner=[xnnpack.XnnpackPartitioner()])
            leftover = dict(_undelegated_ops(edge.exported_program().graph_module))
        program = edge.to_executorch()
        path = workdir / "model.pte"
        atomic_write_bytes(path, program.buffer)
        extra = {} if leftover is None else {"undelegated_ops": leftover}
        return self._artifact(path, x, memory=program_memory(program), **extra, **meta)

    def _quantized(self, module: nn.Module, x: torch.Tensor) -> tuple[Any, dict[str, Any]]:
        """PT2E int8: the converted graph module and the artifact's metadata."""
        import torch

        from hwnas.devices.quantize import batches, pt2e_int8_share

        xq = self._require("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
        pt2e = self._require("torchao.quantization.pt2e.quantize_pt2e")
        quantizer = xq.XNNPACKQuantizer().set_global(
            xq.get_symmetric_quantization_config(is_per_channel=True))
        images, meta = self._calibration_for(tuple(x.shape))
        prepared = pt2e.prepare_pt2e(torch.export.export(module, (x,)).module(), quantizer)
        with torch.no_grad():
            for batch in batches(images, int(x.shape[0])):
                prepared(torch.from_numpy(batch))
        converted = pt2e.convert_pt2e(prepared)
        meta.update(quantizer="xnnpack-pt2e", activations="int8", weights="int8-per-channel",
                    **pt2e_int8_share(converted))
        return converted, meta

    def _load(self, artifact: Artifact) -> Runner:
        return ExecuTorchRunner(artifact, self.device, self.versions(),
                                self._require("executorch.runtime"),
                                self._require("executorch.extension.pybindings.portable_lib"))


def program_memory(program: Any) -> dict[str, Any]:
    """What an ExecuTorch program reserves: the planned activation arena of its forward method
    (every planned buffer; ExecuTorch's memory planner), its constant bytes (weights) and the size
    of the .pte file, in bytes."""
    p = program.executorch_program
    plan = p.execution_plan[0]
    constants = sum(len(b.storage) for b in p.constant_buffer)
    segment = getattr(p, "constant_segment", None)
    if segment is not None and len(getattr(segment, "offsets", []) or []) > 1:
        constants = max(constants, int(p.segments[segment.segment_index].size))
    return {"arena_bytes": int(sum(plan.non_const_buffer_sizes)), "constant_bytes": int(constants),
            "program_bytes": len(program.buffer), "planner": "exir greedy (ExecuTorch default)"}


def _undelegated_ops(graph_module: Any) -> Counter:
    """Operators left outside the XNNPACK delegate (portable kernels), by name."""
    out: Counter = Counter()
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if "call_delegate" in name or name == "getitem":
            continue
        out[name] += 1
    return out


# Runners holding a loaded method; the thread pool may only be resized when none are left.
_LOADED: weakref.WeakSet[ExecuTorchRunner] = weakref.WeakSet()


class ExecuTorchRunner(Runner):
    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str],
                 runtime: Any, portable: Any) -> None:
        import torch

        super().__init__(artifact, device, versions)
        self.torch = torch
        self.portable = portable
        self._size_pool(device.threads)
        self._program = runtime.Runtime.get().load_program(
            Path(artifact.path), verification=runtime.Verification.Minimal)
        self.method = self._program.load_method("forward")  # borrows from the program
        _LOADED.add(self)

    def _size_pool(self, n: int) -> None:
        current = self.portable._threadpool_get_thread_count()
        if current == n:
            return
        if any(r.method is not None for r in _LOADED):
            raise DeviceError(
                f"device '{self.device.name}' needs {n} XNNPACK threads, but ExecuTorch models "
                f"loaded in this process use {current}; the pool is process-wide and cannot be "
                "resized while they are loaded: close those runners or use another process")
        self.portable._unsafe_reset_threadpool(n)

    def activate(self) -> None:
        self._verified_threads(self.portable._threadpool_get_thread_count())

    def prepare(self, x: np.ndarray) -> list:
        return [self.torch.from_numpy(x)]

    def invoke(self, prepared: list) -> Any:
        return self.method.execute(prepared)

    def to_numpy(self, out: Any) -> np.ndarray:
        return out[0].detach().float().numpy().copy()

    def close(self) -> None:
        self.method = None
        self._program = None
