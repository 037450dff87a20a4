"""A bundle's memory, predicted and measured on what ships: `model.json`'s ``memory``.

- predicted: the subnet's activation arena and weight bytes at the device's precision
  (`hwnas.families.memory`; kB = 1024 bytes);
- an ExecuTorch artifact: the planned arena and constant bytes its program records;
- an ONNX model run by ONNX Runtime: the process's resident high-water mark over loading the
  model and its first inference (weights, arena and ONNX Runtime's own buffers; Linux, where the
  mark can be reset), with the shipped model's file size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["bundle_memory", "onnxruntime_peak_bytes"]


def bundle_memory(family: Any, arch: Any, n_classes: int, precision: str, artifact: Any) -> dict[str, Any]:
    from hwnas.families.memory import KB, MEMORY_PRECISIONS, family_memory

    out: dict[str, Any] = {"units": "kB = 1024 bytes"}
    if family.has_memory_model:
        p = precision if precision in MEMORY_PRECISIONS else "fp32"
        ram, flash = family_memory(family, [list(arch.to_row())], arch.w, n_classes, p)
        out["predicted"] = {"precision": p, "ram_kb": ram[0] / KB, "flash_kb": flash[0] / KB,
                            "what": "the arena ExecuTorch's memory planner reserves at batch 1; weight bytes"}
    planned = (getattr(artifact, "metadata", None) or {}).get("memory")
    if planned:
        out["measured"] = {"ram_kb": planned["arena_bytes"] / KB, "flash_kb": planned["constant_bytes"] / KB,
                           "program_kb": planned["program_bytes"] / KB,
                           "what": "the ExecuTorch program's memory plan and constants"}
    elif artifact is not None and getattr(artifact, "format", "") == "onnx" and artifact.path:
        peak = onnxruntime_peak_bytes(Path(artifact.path), tuple(artifact.input_shape))
        out["measured"] = {"model_file_kb": Path(artifact.path).stat().st_size / KB,
                           **({"onnxruntime_peak_kb": peak / KB} if peak is not None else
                              {"onnxruntime_peak_kb": None, "note": "the resident high-water mark cannot be reset here"}),
                           "what": "resident high-water increase over loading the ONNX model in ONNX Runtime "
                                   "(CPU, one thread) and its first inference"}
    return out


def _status(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def onnxruntime_peak_bytes(model: Path, shape: tuple[int, ...]) -> int | None:
    """Bytes the process's resident high-water mark rises by over an ONNX Runtime session's load
    and first run on zeros; None where the mark cannot be reset (not Linux)."""
    import numpy as np
    import onnxruntime as ort

    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    except OSError:
        return None
    before = _status("VmRSS")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    sess.run(None, {name: np.zeros(shape, dtype=np.float32)})
    peak = _status("VmHWM")
    del sess
    return None if before is None or peak is None else max(peak - before, 0)
