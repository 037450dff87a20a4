#!/usr/bin/env python3
"""Build a TensorRT engine from an hwnas bundle's ONNX model, on the target GPU.

hwnas copies this file into every TensorRT bundle as ``build_engine.py``; it therefore imports
nothing from hwnas and needs only ``tensorrt`` and ``numpy`` (plus ``torch`` for the INT8
calibration buffers on TensorRT 10). Engines are tied to the GPU and TensorRT version that built
them, so they are built where they run::

    python3 build_engine.py                       # precision and batch profile from model.json
    python3 build_engine.py --precision int8      # INT8, calibrated on calib.npy (dataset images)

- **Precision.** fp32/fp16 follow the ONNX graph's types: the network is strongly typed where
  TensorRT has the flag (10.x; always on in 11.x), and hwnas exports fp16 devices as an fp16
  graph. An fp32 graph built as fp16 uses ``BuilderFlag.FP16`` on TensorRT 10; TensorRT 11 removed
  that flag, so there the graph must be converted first (ModelOpt AutoCast).
- **INT8.** TensorRT 10: implicit quantization with an ``IInt8EntropyCalibrator2`` over calib.npy,
  its cache kept in calib.cache. TensorRT 11 removed implicit quantization (``BuilderFlag.INT8``,
  ``int8_calibrator``): the ONNX must carry Q/DQ nodes, which this script inserts with NVIDIA
  ModelOpt (``modelopt.onnx.quantization.quantize``, entropy calibration on calib.npy) when it
  is installed.
- **Timing cache.** Read from and written back to ``--timing-cache``: rebuilds skip tactic timing.
- **Batch.** A dynamic batch axis gets an optimisation profile ``--batch MIN OPT MAX``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["build_engine", "trtexec_command", "build_sh", "write_build_kit", "main", "WORKSPACE_MB"]

SCRIPT = "build_engine.py"
SHELL = "build.sh"
CALIB = "calib.npy"
TIMING_CACHE = "timing.cache"
CALIB_CACHE = "calib.cache"
ENGINE = "model.engine"
WORKSPACE_MB = 1024  # the builder's workspace limit (the `trt` device's default too)


class BuildError(RuntimeError):
    """The engine cannot be built; the message says why and what to do."""


# -- the engine builder (TensorRT Python API) ------------------------------------------------
def build_engine(onnx_path: str | Path, engine_path: str | Path, *, precision: str = "fp32",
                 batch: Sequence[int] = (1, 1, 1), calib: np.ndarray | None = None,
                 calib_cache: str | Path | None = None, timing_cache: str | Path | None = None,
                 workspace_mb: int = WORKSPACE_MB, log: Callable[[str], Any] = print) -> Path:
    """Build and save a serialized engine; returns `engine_path`. Raises BuildError."""
    try:
        import tensorrt as trt
    except ImportError as err:
        raise BuildError(f"tensorrt cannot be imported here ({err}); install TensorRT for this "
                         "GPU (pip install tensorrt) or use trtexec via build.sh") from None
    onnx_path, engine_path = Path(onnx_path), Path(engine_path)
    if precision not in ("fp32", "fp16", "int8"):
        raise BuildError(f"precision must be fp32, fp16 or int8, got {precision!r}")
    implicit_int8 = precision == "int8" and hasattr(trt.BuilderFlag, "INT8")
    weak_fp16 = precision == "fp16" and not _graph_is_fp16(onnx_path)
    if precision == "int8" and not implicit_int8 and not _has_qdq(onnx_path):
        onnx_path = _insert_qdq(onnx_path, calib, log)  # TensorRT 11: explicit quantization
    if weak_fp16 and not hasattr(trt.BuilderFlag, "FP16"):
        raise BuildError(f"TensorRT {trt.__version__} removed BuilderFlag.FP16 and "
                         f"{onnx_path.name} is an fp32 graph: convert it first (python -m "
                         f"modelopt.onnx.autocast --onnx_path {onnx_path.name}) or build it as fp32")

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    strongly = hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED")
    if strongly and not (implicit_int8 or weak_fp16):  # precision flags need a weakly typed network
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BuildError(f"TensorRT cannot parse {onnx_path.name}: {errors or 'unknown error'}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)

    profile = _batch_profile(builder, network, batch)
    if profile is not None:
        config.add_optimization_profile(profile)
    cache_file = Path(timing_cache) if timing_cache else None
    cache = config.create_timing_cache(cache_file.read_bytes() if cache_file and cache_file.exists()
                                       else b"")
    config.set_timing_cache(cache, False)
    if weak_fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    calibrator = None
    if implicit_int8:
        if calib is None:
            raise BuildError(f"INT8 needs calibration images: put {CALIB} (N x C x H x W float) "
                             "next to the model or pass --calib")
        config.set_flag(trt.BuilderFlag.INT8)
        if hasattr(trt.BuilderFlag, "FP16"):
            config.set_flag(trt.BuilderFlag.FP16)  # layers INT8 cannot take fall back to fp16
        inp = network.get_input(0)
        calib_batch = int(batch[1]) if tuple(inp.shape)[0] == -1 else int(inp.shape[0])
        calibrator = _entropy_calibrator(trt, calib, calib_batch, calib_cache,
                                         np.dtype(trt.nptype(inp.dtype)))
        config.int8_calibrator = calibrator
        if profile is not None:
            config.set_calibration_profile(profile)

    log(f"building {engine_path.name} from {onnx_path.name}: TensorRT {trt.__version__}, "
        f"{precision}, batch profile {tuple(batch) if profile is not None else 'static'}")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildError("TensorRT failed to build the engine (see its log above)")
    if cache_file is not None:
        cache_file.write_bytes(bytes(config.get_timing_cache().serialize()))
    tmp = engine_path.with_name(f".{engine_path.name}.tmp")
    tmp.write_bytes(bytes(serialized))
    tmp.replace(engine_path)
    return engine_path


def _batch_profile(builder: Any, network: Any, batch: Sequence[int]) -> Any:
    """An optimisation profile over the batch axis when it is dynamic, else None."""
    inp = network.get_input(0)
    shape = tuple(inp.shape)
    if shape[0] != -1:
        return None
    lo, opt, hi = (int(b) for b in batch)
    if not 1 <= lo <= opt <= hi:
        raise BuildError(f"--batch needs 1 <= MIN <= OPT <= MAX, got {lo} {opt} {hi}")
    profile = builder.create_optimization_profile()
    rest = shape[1:]
    profile.set_shape(inp.name, (lo, *rest), (opt, *rest), (hi, *rest))
    return profile


def _entropy_calibrator(trt: Any, images: np.ndarray, batch: int, cache: str | Path | None,
                        dtype: np.dtype) -> Any:
    """TensorRT 10's INT8 entropy calibrator over `images`, batch by batch (torch CUDA buffers
    of the network input's dtype)."""
    import torch

    cache_path = Path(cache) if cache else None
    data = np.ascontiguousarray(images, dtype=dtype)
    if len(data) < batch:
        raise BuildError(f"{len(data)} calibration images are fewer than the batch size {batch}")

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.next = 0
            self.buffer = torch.from_numpy(data[:batch]).to("cuda")

        def get_batch_size(self) -> int:
            return batch

        def get_batch(self, names: list[str]) -> list[int] | None:
            if self.next + batch > len(data):
                return None
            self.buffer.copy_(torch.from_numpy(data[self.next:self.next + batch]))
            torch.cuda.synchronize()
            self.next += batch
            return [int(self.buffer.data_ptr())]

        def read_calibration_cache(self) -> bytes | None:
            return cache_path.read_bytes() if cache_path and cache_path.exists() else None

        def write_calibration_cache(self, blob: Any) -> None:
            if cache_path is not None:
                cache_path.write_bytes(bytes(blob))

    return EntropyCalibrator()


def _onnx_model(path: Path) -> Any:
    import onnx

    return onnx.load(str(path), load_external_data=False)


def _graph_is_fp16(path: Path) -> bool:
    """True when the graph's input is float16 (hwnas exports fp16 devices that way)."""
    try:
        model = _onnx_model(path)
    except ImportError:  # no onnx package: trust the graph, build strongly typed
        return True
    return model.graph.input[0].type.tensor_type.elem_type == 10  # TensorProto.FLOAT16


def _has_qdq(path: Path) -> bool:
    try:
        model = _onnx_model(path)
    except ImportError:
        return False
    return any(node.op_type == "QuantizeLinear" for node in model.graph.node)


def _insert_qdq(onnx_path: Path, calib: np.ndarray | None, log: Callable[[str], Any]) -> Path:
    """Q/DQ nodes by ModelOpt's ONNX PTQ (entropy calibration): TensorRT 11's INT8 path."""
    try:
        from modelopt.onnx.quantization import quantize
    except ImportError:
        raise BuildError("this TensorRT has no implicit INT8 calibration (removed in 11.x): "
                         "pip install 'nvidia-modelopt[onnx]' so this script can insert Q/DQ "
                         "nodes, or pass an ONNX that already has them") from None
    if calib is None:
        raise BuildError(f"INT8 needs calibration images: put {CALIB} next to the model")
    out = onnx_path.with_name(onnx_path.stem + ".int8.onnx")
    log(f"inserting Q/DQ nodes with ModelOpt ({len(calib)} calibration images) -> {out.name}")
    quantize(str(onnx_path), quantize_mode="int8", calibration_method="entropy",
             calibration_data=np.ascontiguousarray(calib, dtype=np.float32), output_path=str(out))
    return out


# -- the build kit hwnas writes into a bundle ------------------------------------------------
def trtexec_command(onnx: str, shape: Sequence[int], *, dynamic: bool, batch: Sequence[int],
                    input_name: str = "input", engine: str = ENGINE,
                    timing_cache: str = TIMING_CACHE, workspace_mb: int = WORKSPACE_MB
                    ) -> list[str]:
    """trtexec arguments that build the same engine as `build_engine` (fp32/fp16 graphs)."""
    args = ["trtexec", f"--onnx={onnx}", f"--saveEngine={engine}",
            f"--timingCacheFile={timing_cache}", f"--memPoolSize=workspace:{workspace_mb}M"]
    if dynamic:
        dims = "x".join(str(d) for d in shape[1:])
        for flag, b in zip(("--minShapes", "--optShapes", "--maxShapes"), batch):
            args.append(f"{flag}={input_name}:{b}x{dims}")
    return args


def build_sh(command: Sequence[str], python_command: str) -> str:
    """A POSIX shell script running `command` (trtexec), strongly typed where trtexec has it."""
    args = " ".join(shlex.quote(a) for a in command[1:])
    return f"""#!/bin/sh
# Build {ENGINE} from the ONNX model on the target GPU (engines are tied to the GPU and the
# TensorRT version that built them). fp32/fp16 follow the ONNX graph's types.
# INT8 needs calibration, which trtexec cannot do from images: use
#   {python_command} --precision int8
# Extra trtexec flags can be appended: sh {SHELL} --verbose
set -e
cd "$(dirname "$0")"
TRTEXEC="${{TRTEXEC:-trtexec}}"
TYPED=""
if "$TRTEXEC" --help 2>&1 | grep -q -- "--stronglyTyped"; then TYPED="--stronglyTyped"; fi
exec "$TRTEXEC" {args} $TYPED "$@"
"""


def write_build_kit(folder: str | Path, *, onnx: str, shape: Sequence[int], dynamic: bool,
                    precision: str, batch: Sequence[int], calib: np.ndarray | None,
                    input_name: str = "input") -> dict[str, Any]:
    """Write build_engine.py (this file), build.sh and calib.npy into `folder`; returns the
    kit's description for the bundle's model.json."""
    folder = Path(folder)
    (folder / SCRIPT).write_text(Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
    python_command = f"python3 {SCRIPT}"
    command = trtexec_command(onnx, shape, dynamic=dynamic, batch=batch, input_name=input_name)
    (folder / SHELL).write_text(build_sh(command, python_command), encoding="utf-8")
    for name in (SCRIPT, SHELL):
        (folder / name).chmod(0o755)
    if calib is not None:
        np.save(folder / CALIB, np.ascontiguousarray(calib, dtype=np.float16), allow_pickle=False)
    return {"onnx": onnx, "engine": ENGINE, "precision": precision, "dynamic_batch": dynamic,
            "batch_profile": [int(b) for b in batch] if dynamic else None,
            "calibration": CALIB if calib is not None else None,
            "calibration_images": 0 if calib is None else int(len(calib)),
            "trtexec": " ".join(shlex.quote(a) for a in command),
            "python": python_command, "scripts": [SHELL, SCRIPT]}


# -- command line ----------------------------------------------------------------------------
def _defaults(folder: Path) -> dict[str, Any]:
    """Precision, ONNX name and batch profile recorded by hwnas in the bundle's model.json."""
    try:
        meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    kit = meta.get("tensorrt") or {}
    out: dict[str, Any] = {"precision": kit.get("precision"), "onnx": kit.get("onnx")}
    if kit.get("batch_profile"):
        out["batch"] = kit["batch_profile"]
    return {k: v for k, v in out.items() if v}


def main(argv: Sequence[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    found = _defaults(here)
    p = argparse.ArgumentParser(description="Build a TensorRT engine from this bundle's ONNX.")
    p.add_argument("--onnx", default=str(here / found.get("onnx", "model.onnx")))
    p.add_argument("--engine", default=str(here / ENGINE))
    p.add_argument("--precision", choices=("fp32", "fp16", "int8"),
                   default=found.get("precision", "fp32"))
    p.add_argument("--batch", nargs=3, type=int, metavar=("MIN", "OPT", "MAX"),
                   default=found.get("batch", [1, 1, 1]),
                   help="optimisation profile of a dynamic batch axis")
    p.add_argument("--calib", default=str(here / CALIB), help="calibration images (.npy, NCHW)")
    p.add_argument("--calib-cache", default=str(here / CALIB_CACHE))
    p.add_argument("--timing-cache", default=str(here / TIMING_CACHE))
    p.add_argument("--workspace-mb", type=int, default=WORKSPACE_MB)
    args = p.parse_args(argv)
    calib = None
    if args.precision == "int8" and Path(args.calib).exists():
        calib = np.load(args.calib, allow_pickle=False)
    try:
        path = build_engine(args.onnx, args.engine, precision=args.precision, batch=args.batch,
                            calib=calib, calib_cache=args.calib_cache,
                            timing_cache=args.timing_cache, workspace_mb=args.workspace_mb)
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
