"""A bundle's memory, predicted and measured on what ships: `model.json`'s ``memory``.

- predicted: the subnet's activation arena and weight bytes at the device's precision
  (`hwnas.families.memory`; kB = 1024 bytes);
- an ExecuTorch artifact: the planned arena and constant bytes its program records;
- an ONNX model run by ONNX Runtime: how far a fresh process's resident high-water mark rises over
  loading the model and its first inference (weights, arena and ONNX Runtime's own buffers;
  Linux), with the shipped model's file size.
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
                              {"onnxruntime_peak_kb": None, "note": "no /proc here, or the probe failed"}),
                           "what": "a fresh process's resident high-water increase over loading the ONNX model "
                                   "in ONNX Runtime (CPU, one thread) and its first inference"}
    return out


# run in a fresh interpreter: in the exporting process freed memory stays resident, so a session's
# allocations would not raise its high-water mark
_PROBE = """
import sys
from pathlib import Path
import numpy as np
import onnxruntime as ort

def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

before = status("VmRSS")
opts = ort.SessionOptions()
opts.intra_op_num_threads = opts.inter_op_num_threads = 1
sess = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
shape = [int(v) for v in sys.argv[2].split(",")]
sess.run(None, {sess.get_inputs()[0].name: np.zeros(shape, dtype=np.float32)})
print(status("VmHWM") - before)
"""


def onnxruntime_peak_bytes(model: Path, shape: tuple[int, ...]) -> int | None:
    """Bytes a fresh process's resident high-water mark rises by over loading `model` in ONNX
    Runtime (CPU, one thread) and one run on zeros, after its imports; None where /proc is not
    there (not Linux) or the probe fails."""
    import subprocess
    import sys

    if not Path("/proc/self/status").exists():
        return None
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, str(model), ",".join(map(str, shape))],
                              capture_output=True, text=True, timeout=120, check=True)
        return max(int(done.stdout.strip().splitlines()[-1]), 0)
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None
