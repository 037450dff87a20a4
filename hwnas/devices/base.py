"""The three small abstractions every backend implements: `Artifact`, `Runner`, `Backend`.

A `Backend` turns an `nn.Module` into a deployable `Artifact` (ONNX, OpenVINO IR, .pte, .tflite,
TensorRT engine) and loads an artifact into a `Runner` that executes one inference at a time.
Timing is *not* a backend's business: `hwnas.devices.protocol` times every runner the same way.
A runner only contributes what differs between runtimes: how an input is staged (`prepare`),
the call to time (`invoke`), process-global settings to re-apply before a timed block
(`activate`, e.g. torch's thread count) and, for GPUs, its own clock (`time_once`).

The checks that are the same for all backends live here, once: availability (a missing runtime
becomes `DeviceError` with the install hint, never `ImportError`), supported precisions, the
batch size, and turning a runtime's failure into one readable line that names the device.
"""

from __future__ import annotations

import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

import numpy as np

from hwnas.devices._imports import dist_version, missing_module, require
from hwnas.errors import DeviceError, HwnasError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device

__all__ = ["Artifact", "Runner", "Backend", "OnnxBuiltBackend", "one_line", "run_batched"]


def one_line(err: BaseException) -> str:
    """`Type: first line of the message`, for errors raised by runtimes with long C++ dumps."""
    text = str(err).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


@dataclass
class Artifact:
    """A compiled model on disk (or, for eager PyTorch, in memory) plus what made it.

    `path` is the file a runtime loads; `files` lists everything that belongs to it (an OpenVINO
    IR is an .xml and a .bin). `payload` holds an in-memory object (the eager module) and is
    never serialised; artifacts are persisted as JSON via `to_dict`.
    """

    format: str  # "torch-module" | "onnx" | "openvino-ir" | "pte" | "tflite" | "tensorrt-engine"
    path: Path | None
    input_shape: tuple[int, ...]
    input_dtype: str = "float32"
    device: str = ""
    backend: str = ""
    precision: str = "fp32"
    files: list[Path] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    payload: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "path": None if self.path is None else str(self.path),
                "input_shape": list(self.input_shape), "input_dtype": self.input_dtype,
                "device": self.device, "backend": self.backend, "precision": self.precision,
                "files": [str(p) for p in self.files], "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Artifact:
        return cls(format=obj["format"], path=None if obj.get("path") is None else Path(obj["path"]),
                   input_shape=tuple(int(v) for v in obj["input_shape"]),
                   input_dtype=obj.get("input_dtype", "float32"), device=obj.get("device", ""),
                   backend=obj.get("backend", ""), precision=obj.get("precision", "fp32"),
                   files=[Path(p) for p in obj.get("files", [])],
                   metadata=dict(obj.get("metadata", {})))


class Runner(ABC):
    """One loaded model, ready to run single inferences.

    Subclasses set `self.threads` to the intra-op thread count they *verified* the runtime uses
    (read back from the runtime after setting it), so measurements record a fact, not a wish.
    """

    #: what `time_once` measures with; GPU runners change it
    timer: ClassVar[str] = "perf_counter_ns"

    def __init__(self, artifact: Artifact, device: Device, versions: Mapping[str, str]):
        self.artifact = artifact
        self.device = device
        self.versions = dict(versions)
        self.threads: int = device.threads

    # -- what a backend implements -------------------------------------------------------
    def prepare(self, x: np.ndarray) -> Any:
        """Stage an input for `invoke` (convert, copy to device). Not timed."""
        return x

    @abstractmethod
    def invoke(self, prepared: Any) -> Any:
        """One inference on a prepared input; returns the runtime's native output. Timed."""

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.asarray(out)

    def activate(self) -> None:
        """Re-apply process-global settings (thread pools) before a timed block; verify them."""

    def time_once(self, prepared: Any) -> float:
        """Milliseconds of one `invoke`, on the host clock. GPU runners override this."""
        t0 = time.perf_counter_ns()
        self.invoke(prepared)
        return (time.perf_counter_ns() - t0) / 1e6

    def close(self) -> None:
        """Free runtime resources early (optional; garbage collection does it too)."""

    def _verified_threads(self, actual: int) -> None:
        """Record the thread count read back from the runtime; refuse a silent mismatch."""
        if int(actual) != self.device.threads:
            raise DeviceError(f"device '{self.device.name}' asks for {self.device.threads} "
                              f"intra-op threads but {self.device.backend} uses {actual}")
        self.threads = int(actual)

    # -- shared --------------------------------------------------------------------------
    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.artifact.input_shape)

    @property
    def input_dtype(self) -> np.dtype:
        return np.dtype(self.artifact.input_dtype)

    def run(self, x: np.ndarray) -> np.ndarray:
        """One inference on a numpy input; returns the (first) output as numpy."""
        x = np.ascontiguousarray(x, dtype=self.input_dtype)
        if tuple(x.shape) != self.input_shape:
            raise DeviceError(f"device '{self.device.name}': input shape {tuple(x.shape)} differs "
                              f"from the compiled shape {self.input_shape}")
        self.activate()
        return self.to_numpy(self.invoke(self.prepare(x)))

    def make_input(self, seed: int = 0) -> np.ndarray:
        """A standard-normal input of the compiled shape and dtype (for timing)."""
        rng = np.random.default_rng(seed)
        return rng.standard_normal(self.input_shape, dtype=np.float32).astype(self.input_dtype)

    def how(self) -> dict[str, Any]:
        """The `LatencyStats` fields that say how this runner's numbers were taken."""
        shape = self.input_shape
        return {"device": self.device.name, "backend": self.device.backend,
                "threads": int(self.threads), "batch": int(shape[0]) if shape else 1,
                "precision": self.artifact.precision,
                "resolution": int(shape[-1]) if len(shape) == 4 else self.device.resolution,
                "host": self.device.host or socket.gethostname(), "timer": self.timer,
                "versions": dict(self.versions)}

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_batched(runner: Runner, images: np.ndarray) -> np.ndarray:
    """Outputs of `images` [N, C, H, W] through a runner compiled for a fixed batch size
    (the last chunk is padded by repeating its last image; padded outputs are dropped)."""
    b = int(runner.input_shape[0])
    outs = []
    for i in range(0, len(images), b):
        chunk = images[i:i + b]
        k = len(chunk)
        if k < b:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], b - k, axis=0)])
        outs.append(np.asarray(runner.run(chunk), dtype=np.float32).reshape(b, -1)[:k])
    return np.concatenate(outs)


class Backend(ABC):
    """A runtime that compiles modules for a `Device` and loads the results.

    Subclasses declare the modules they need (`requires`, found without importing), the pip extra
    that installs them, and implement `_compile` and `_load`. The public `compile`/`load` add the
    checks every backend shares.
    """

    name: ClassVar[str]
    artifact_format: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()  # top-level modules, e.g. ("openvino",)
    extra: ClassVar[str | None] = None  # pip extra: pip install 'hwnas[<extra>]'
    dists: ClassVar[tuple[str, ...]] = ()  # distributions whose versions are recorded

    # -- capabilities: facts about the runtime that export and profiling read, instead of ------
    # -- testing a backend's name (a device's are `Device.capabilities`, also when remote) ------
    #: its artifacts are tied to the machine (GPU, runtime version) that builds them, as TensorRT
    #: engines are: an export ships the ONNX it builds from, with a batch axis and the device's
    #: precision, plus a build kit for the target (`write_build_kit`), and still exports where
    #: the runtime is absent (bundle status "onnx-only"); every other device must be usable to
    #: export, since export verifies on it
    builds_on_target: ClassVar[bool] = False
    #: the arithmetic of its fp32 convolutions: "fp32", or "tf32" (TensorRT's default: 10-bit
    #: mantissa inputs), which export verification allows for
    fp32_math: ClassVar[str] = "fp32"

    def __init__(self, device: Device):
        self.device = device

    @classmethod
    def write_build_kit(cls, folder: Path, *, onnx: str, shape: list[int], precision: str,
                        batch: tuple[int, int, int], calib: np.ndarray | None,
                        input_name: str) -> dict[str, Any]:
        """`builds_on_target` backends: write what builds the artifact on the target from the ONNX
        model `onnx` (input `shape` with a dynamic batch axis, optimisation profile `batch` as
        (min, opt, max), INT8 calibration images `calib`) into `folder`; returns the kit's
        description for the bundle's model.json."""
        raise NotImplementedError(f"backend {cls.name} builds its artifacts where it exports")

    @classmethod
    def precisions(cls, provider: str | None) -> tuple[str, ...]:
        """Precisions this backend can compile for with the given provider."""
        return ("fp32",)

    @classmethod
    def default_provider(cls) -> str | None:
        return None

    def available(self) -> str | None:
        """None when this device can be used here, else the reason (with how to fix it)."""
        if self.device.host:
            return (f"remote device (host {self.device.host}) needs the hwnas agent client, "
                    "which this version does not include; run hwnas on that machine instead")
        for module in self.requires:
            reason = missing_module(module, self.extra)
            if reason:
                return reason
        return self._available()

    def _available(self) -> str | None:
        """Backend-specific checks once its modules are found (e.g. a CUDA device)."""
        return None

    def versions(self) -> dict[str, str]:
        """Versions of the software that produced and runs the artifact (read from metadata)."""
        out = {"hwnas": dist_version("hwnas") or "dev", "numpy": np.__version__,
               "torch": dist_version("torch") or "?"}
        for dist in self.dists:
            version = dist_version(dist)
            if version:
                out[dist] = version
        return out

    # -- the public operations -----------------------------------------------------------
    def check(self) -> None:
        """Raise DeviceError with the reason when this device is not usable here."""
        reason = self.available()
        if reason:
            raise DeviceError(f"device '{self.device.name}' is not usable here: {reason}")

    def compile(self, module: nn.Module, example_input: torch.Tensor, workdir: str | Path, *,
                calibration: np.ndarray | None = None) -> Artifact:
        """Compile `module` for this device into files under `workdir` (one folder per model).

        The example input fixes the input shape; its batch dimension is replaced by the device's
        batch size. The module is not modified. `calibration`: (N, C, H, W) float32 training
        images for INT8 devices (resized to the input size; other precisions ignore them); without
        them INT8 devices calibrate on a fixed-seed synthetic batch, and the artifact's
        ``metadata["calibration"]`` says which ("images" or "synthetic").
        """
        import torch

        self.check()
        if not isinstance(example_input, torch.Tensor) or not example_input.is_floating_point():
            raise DeviceError(f"device '{self.device.name}': the example input must be a float "
                              f"torch.Tensor, got {type(example_input).__name__}")
        x = example_input.detach().float().cpu()
        if x.shape[0] != self.device.batch:
            x = x[:1].expand(self.device.batch, *x.shape[1:]).contiguous()
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        was_training = module.training
        module.eval()
        self._calibration = calibration
        try:
            artifact = self._compile(module, x, workdir)
        except HwnasError:
            raise
        except Exception as err:
            raise DeviceError(f"device '{self.device.name}': compiling for {self.name} failed: "
                              f"{one_line(err)}") from err
        finally:
            module.train(was_training)
            self._calibration = None
        artifact.metadata.setdefault("versions", self.versions())
        return artifact

    def load(self, artifact: Artifact) -> Runner:
        """Load a compiled artifact into a runner (threads and precision applied and verified)."""
        self.check()
        if artifact.format != self.artifact_format:
            raise DeviceError(f"device '{self.device.name}' runs {self.artifact_format} artifacts, "
                              f"got {artifact.format}; compile the model for this device")
        try:
            runner = self._load(artifact)
            runner.activate()
        except HwnasError:
            raise
        except Exception as err:
            raise DeviceError(f"device '{self.device.name}': loading the {artifact.format} "
                              f"artifact failed: {one_line(err)}") from err
        return runner

    def compile_and_load(self, module: nn.Module, example_input: torch.Tensor,
                         workdir: str | Path, *, calibration: np.ndarray | None = None) -> Runner:
        return self.load(self.compile(module, example_input, workdir, calibration=calibration))

    # -- for subclasses ------------------------------------------------------------------
    _calibration: np.ndarray | None = None  # set by compile for the duration of one compile

    def _calibration_for(self, shape: tuple[int, ...]) -> tuple[np.ndarray, dict[str, Any]]:
        """The images an INT8 compile calibrates on, and the artifact metadata that says so."""
        from hwnas.devices.quantize import calibration_batch

        images, source = calibration_batch(self._calibration, shape, self.device.name)
        return images, {"calibration": source, "calibration_images": int(len(images))}

    def _require(self, module: str) -> Any:
        return require(module, self.device.name, self.extra)

    def _artifact(self, path: Path | None, x: torch.Tensor | tuple[int, ...], *,
                  files: list[Path] | None = None, input_dtype: str = "float32", **metadata: Any
                  ) -> Artifact:
        """An artifact of this backend; `x` is the example input or just its shape."""
        shape = tuple(x.shape) if hasattr(x, "shape") else tuple(x)
        return Artifact(format=self.artifact_format, path=path, input_shape=shape,
                        input_dtype=input_dtype, device=self.device.name, backend=self.name,
                        precision=self.device.precision,
                        files=files if files is not None else ([path] if path else []),
                        metadata=metadata)

    @abstractmethod
    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        """Produce the artifact (the module is in eval mode; x has the device's batch)."""

    @abstractmethod
    def _load(self, artifact: Artifact) -> Runner:
        """Create the runner; it must apply and verify the device's threads."""


class OnnxBuiltBackend(Backend):
    """A backend whose artifact is built from an ONNX model (OpenVINO IR, TensorRT engine), so a
    device agent, which receives only ONNX, can serve it through `compile_onnx`."""

    def compile_onnx(self, artifact: Artifact, workdir: str | Path, *,
                     calibration: np.ndarray | None = None) -> Artifact:
        """This backend's artifact from an ONNX artifact (the agent's hook); `calibration` as
        for `compile`."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self._calibration = calibration
        try:
            return self._from_onnx(Path(artifact.path), artifact.input_shape, workdir)
        finally:
            self._calibration = None

    @abstractmethod
    def _from_onnx(self, onnx_path: Path, shape: tuple[int, ...], workdir: Path) -> Artifact:
        """Build the artifact from `onnx_path` (input `shape`) into `workdir`."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device.name!r})"
