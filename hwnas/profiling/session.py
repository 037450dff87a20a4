"""A measuring session: one device of one run, every measurement beside the run's reference.

Profiling, search verification and export all measure through `DeviceSession.measure` (the one
call): the reference subnet (`hwnas.profiling.anchors.reference_arch`) is compiled once per
session and, on a local device, kept loaded; each candidate is timed with the drift-corrected
protocol (`hwnas.devices.protocol.measure_many`, `ProtocolSettings`) beside it and put in
milliseconds with the run's anchor for the device. `calibrate_anchor` makes that anchor when the
run has none (the host's from the `AnchorBook`, else a fresh calibration, written to the store).

Where the timing happens is the session class's business, not the caller's: `DeviceSession`
loads runners here; `RemoteSession` (a remote agent's device) sends the compiled artifacts with
the reference to the agent (`RemoteBackend.measure_many`) and keeps no host anchor.
`open_session` picks the class.

INT8 devices quantize when they compile (`Backend.compile(..., calibration=images)`): a session
of an INT8 device gives every compile, the reference's included, the same training images of the
run's dataset (`CalibrationImages`: loaded on first use, so fp32 sessions never load data).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from hwnas.errors import DeviceError
from hwnas.fileio import scratch_prefix
from hwnas.profiling.anchors import build_timing_subnet, reference_arch, reference_key, run_anchor
from hwnas.profiling.protocol import ProtocolSettings

if TYPE_CHECKING:
    from hwnas.devices.base import Artifact, Backend, Runner
    from hwnas.devices.device import Device
    from hwnas.devices.stats import LatencyStats
    from hwnas.profiling.store import MeasurementStore
    from hwnas.run import RunConfig

__all__ = ["DeviceSession", "RemoteSession", "open_session", "CalibrationImages"]

#: training images an INT8 compile calibrates on (export's bundles use as many)


class _RunAnchor:  # the default of `measure`'s anchor_ms: the session's (the run's) anchor
    def __repr__(self) -> str:
        return "<the run's anchor>"


RUN_ANCHOR: Any = _RunAnchor()


class CalibrationImages:
    """`n` training images of the run's dataset, spread evenly over the BatchNorm calibration
    subset (`calibration_loader(train, BN_IMAGES, seed 0)`, as export calibrates on), at the
    dataset's own resolution as (N, 3, H, W) float32; compiles resize them to each model's input.
    Loaded on the first call, then the same array for every model."""

    def __init__(self, run: RunConfig, n: int | None = None):
        from hwnas.supernet.data import CALIBRATION_IMAGES

        self.run, self.n = run, CALIBRATION_IMAGES if n is None else n
        self._images: np.ndarray | None = None

    @property
    def loaded(self) -> bool:
        return self._images is not None

    def __call__(self) -> np.ndarray:
        if self._images is None:
            from hwnas.supernet.checkpoint import load_checkpoint_meta
            from hwnas.supernet.data import BN_IMAGES, build_loaders, calibration_loader, spread_images
            from hwnas.supernet.pretrained import data_config_of, shipped_checkpoint

            meta = load_checkpoint_meta(self.run.supernet or shipped_checkpoint())
            loaders = build_loaders(data_config_of(meta, self.run.data))
            dataset = calibration_loader(loaders.train, n_images=BN_IMAGES, seed=0).dataset
            if len(dataset) == 0:
                raise DeviceError("the run's training split is empty: no images to calibrate "
                                  "an int8 model on")
            self._images = spread_images(dataset, self.n)[0]
        return self._images


class DeviceSession:
    """Measure on one local device of one run (see the module doc). Use as a context manager,
    or call `close`."""

    #: its backend quantizes INT8 models when it compiles them (so compiles take calibration images)
    quantizes_here = True

    def __init__(self, run: RunConfig, device: Device, *, backend: Backend | None = None,
                 protocol: ProtocolSettings | None = None, workdir: str | Path | None = None,
                 calibration: Callable[[], np.ndarray] | None = None):
        self.run, self.device = run, device
        self.backend = backend if backend is not None else device.backend_impl()
        self.protocol = protocol or ProtocolSettings()
        self._own_workdir = workdir is None
        self.workdir = (Path(tempfile.mkdtemp(prefix=scratch_prefix(device.name))) if workdir is None
                        else Path(workdir))
        #: INT8 devices' calibration images (other precisions take none, and load no data)
        self.calibration: Callable[[], np.ndarray] | None = None
        if self.quantizes:
            self.calibration = calibration if calibration is not None else CalibrationImages(run)
        self.reference = reference_arch(run.space)
        self._supernet: Any = None  # loaded for INT8 devices only (`timing_subnet`)
        self._ref_artifact: Artifact | None = None
        self._ref_runner: Runner | None = None
        self._anchor: Any = RUN_ANCHOR  # not read yet

    @property
    def quantizes(self) -> bool:
        """True when this session's compiles quantize to INT8 here (calibration images, trained
        weights and weight-keyed anchors then matter)."""
        return self.quantizes_here and self.device.precision == "int8"

    # -- the reference and the anchor ------------------------------------------------------
    @property
    def anchor_ms(self) -> float | None:
        """The run's anchor for the device (read from the store on first use; None when the
        device was never profiled in this run: then each call's own reference median)."""
        if self._anchor is RUN_ANCHOR:
            self._anchor = run_anchor(self.run.run_dir, self.device.name, self.run.space)
        return self._anchor

    def timing_subnet(self, arch: Any) -> Any:
        """What is compiled and timed for `arch`. Latency does not depend on the weights, so fp32
        devices time a subnet with fixed random weights; but what a quantizer makes of a layer does
        (with random weights ONNX Runtime kept 12-15 % of the layers in fp32 and ran 1.1-1.8x
        slower than the same subnet with trained weights), so INT8 devices time the subnet with
        the run's supernet weights, as the exported model will have."""
        if not self.quantizes:
            return build_timing_subnet(arch, self.run.n_classes)
        if self._supernet is None:
            from hwnas.supernet.pretrained import load_supernet

            self._supernet = load_supernet(self.run.supernet)[0].eval()
        return self._supernet.get_subnet(arch).eval()

    def reference_artifact(self) -> Artifact:
        """The reference compiled for the device (once per session)."""
        if self._ref_artifact is None:
            import torch

            r = self.reference.r
            self._ref_artifact = self.compile("reference", self.timing_subnet(self.reference),
                                              torch.zeros(1, 3, r, r))
        return self._ref_artifact

    def reference_runner(self) -> Runner:
        """The reference, loaded once per session and kept loaded."""
        if self._ref_runner is None:
            self._ref_runner = self.backend.load(self.reference_artifact())
        return self._ref_runner

    def _anchor_book(self) -> tuple[Any, str | None, dict[str, Any]]:
        """(book, key, what the key stands for): a local device's anchor is this host's."""
        from hwnas.profiling.anchors import AnchorBook, anchor_key

        key, what = anchor_key(self.reference_runner().how(), self.reference.id, self.run.n_classes,
                               self._weights_id())
        return AnchorBook(), key, what

    def _weights_id(self) -> str | None:
        """The sha256 of the supernet weights INT8 devices time (`timing_subnet`), else None."""
        if not self.quantizes:
            return None
        from hwnas.supernet.checkpoint import load_checkpoint_meta
        from hwnas.supernet.pretrained import shipped_checkpoint

        meta = load_checkpoint_meta(self.run.supernet or shipped_checkpoint())
        return str((meta.get("weights") or {}).get("sha256"))

    def calibrate_anchor(self, store: MeasurementStore, recalibrate: bool = False) -> float:
        """This run's anchor for the device: the run's own, else the host's (`AnchorBook`), else a
        fresh calibration (the reference measured as a candidate, with 3x the rounds: it scales
        every number of the run), which both then keep; `recalibrate` skips the host's."""
        from hwnas.profiling.store import stats_row

        known = self.anchor_ms
        if known is not None:
            return known
        ref = self.reference
        book, key, what = self._anchor_book()
        stats = None if book is None or recalibrate else book.get(key)
        if stats is None:
            stats = self.measure(reference_key(self.run.space), self.reference_artifact(),
                                 anchor_ms=None, rounds_x=3)
            stats = stats.rescaled(stats.median_ms)
            if book is not None:
                book.put(key, stats, what)
        params, macs = ref.family.arch_params_macs(ref, self.run.n_classes)
        store.append([stats_row(self.device.name, "reference", reference_key(self.run.space), stats,
                                arch=ref, params=params, macs=macs, meta={"anchor_key": key},
                                columns=self.run.space.flat_columns)])
        self._anchor = stats.median_ms
        return stats.median_ms

    # -- compile and measure ---------------------------------------------------------------
    def compile(self, key: str, module: Any, example_input: Any) -> Artifact:
        """Compile `module` for the device into the session's folder (INT8 devices: calibrated
        on the session's training images)."""
        images = self.calibration() if self.calibration is not None else None
        folder = self.workdir / key.replace(":", "_").replace("/", "_")
        return self.backend.compile(module, example_input, folder, calibration=images)

    def measure(self, key: str, what: Artifact | Runner, *, anchor_ms: Any = RUN_ANCHOR,
                rounds_x: int = 1) -> LatencyStats:
        """The one call: drift-corrected `LatencyStats` of a compiled artifact (loaded for the
        call) or a loaded runner, timed beside the session's reference with the session's
        protocol (`rounds_x` times its rounds) and scaled by `anchor_ms` (default: the run's
        anchor for the device; None: this call's own reference median)."""
        return self.measure_together({key: what}, anchor_ms=anchor_ms, rounds_x=rounds_x)[key]

    def measure_together(self, models: Mapping[str, Artifact | Runner], *, anchor_ms: Any = RUN_ANCHOR,
                         rounds_x: int = 1) -> dict[str, LatencyStats]:
        """`measure` of several models in one call: shuffled through the same rounds beside the
        same reference, so their ratios are paired (no second session's level enters)."""
        from hwnas.devices.base import Runner

        anchor, kw = self._call(anchor_ms, rounds_x)
        loaded = {key: what if isinstance(what, Runner) else self.backend.load(what) for key, what in models.items()}
        try:
            return self._time(loaded, anchor, kw)
        finally:
            for key, runner in loaded.items():
                if runner is not models[key]:
                    runner.close()

    def _call(self, anchor_ms: Any, rounds_x: int) -> tuple[float | None, dict[str, Any]]:
        """(the anchor a call scales by, the protocol's keywords with `rounds_x` times its rounds)."""
        anchor = self.anchor_ms if anchor_ms is RUN_ANCHOR else anchor_ms
        return anchor, {**self.protocol.kwargs(), "rounds": self.protocol.rounds * rounds_x}

    def _time(self, runners: Mapping[str, Runner], anchor_ms: float | None, kw: dict[str, Any]
              ) -> dict[str, LatencyStats]:
        from hwnas.devices.protocol import measure_many

        return measure_many(runners, self.reference_runner(), anchor_ms=anchor_ms, **kw)

    def measure_module(self, key: str, module: Any, example_input: Any) -> tuple[LatencyStats, Artifact]:
        """Compile `module` and `measure` it (the run's anchor); returns (stats, artifact)."""
        artifact = self.compile(key, module, example_input)
        return self.measure(key, artifact), artifact

    def row_meta(self, artifact: Artifact | None = None) -> dict[str, Any]:
        """The store row's `meta` of a measurement in this session: the reference; what the artifact
        reserves (an ExecuTorch program's memory plan, `memory`) and weighs on disk (`artifact_bytes`);
        for INT8 devices what it calibrated on."""
        meta: dict[str, Any] = {"reference": self.reference.to_ofa_dict()}
        if artifact is None:
            return meta
        if "memory" in artifact.metadata:
            meta["memory"] = dict(artifact.metadata["memory"])
        files = [Path(f) for f in artifact.files if Path(f).is_file()]
        if files:
            meta["artifact_bytes"] = sum(f.stat().st_size for f in files)
        if self.device.precision == "int8":
            meta.update({k: artifact.metadata[k] for k in ("calibration", "calibration_images")
                         if k in artifact.metadata})
        return meta

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        if self._ref_runner is not None:
            self._ref_runner.close()
            self._ref_runner = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> DeviceSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RemoteSession(DeviceSession):
    """A remote agent's device: artifacts are compiled here and timed on the agent beside the
    reference artifact (`RemoteBackend.measure_many`); nothing is loaded here, and the anchor is
    calibrated per run (the anchor book is for this host's devices). The agent client compiles
    plain ONNX here, so no calibration images are loaded."""

    quantizes_here = False

    def reference_runner(self) -> Runner:
        raise DeviceError(f"device '{self.device.name}' is remote: its models run on its agent, "
                          "not here")

    def _anchor_book(self) -> tuple[Any, str | None, dict[str, Any]]:
        return None, None, {}

    def measure_together(self, models: Mapping[str, Artifact | Runner], *, anchor_ms: Any = RUN_ANCHOR,
                         rounds_x: int = 1) -> dict[str, LatencyStats]:
        from hwnas.devices.base import Runner

        if any(isinstance(what, Runner) for what in models.values()):
            raise DeviceError(f"device '{self.device.name}' is remote: give the compiled "
                              "artifact, the agent loads it")
        anchor, kw = self._call(anchor_ms, rounds_x)
        stats = self.backend.measure_many(dict(models), self.reference_artifact(), **kw)
        return {key: s if anchor is None else s.rescaled(anchor) for key, s in stats.items()}


def open_session(run: RunConfig, device: str | Device, *, devices_file: str | Path | None = None,
                 backend: Backend | None = None, protocol: ProtocolSettings | None = None,
                 workdir: str | Path | None = None,
                 calibration: Callable[[], np.ndarray] | None = None) -> DeviceSession:
    """A measuring session for `device` (a name or a `Device`) in `run`: a `RemoteSession` for a
    remote agent's device, else a `DeviceSession`."""
    from hwnas.devices import get_device

    dev = get_device(device, devices_file) if isinstance(device, str) else device
    cls = RemoteSession if dev.is_remote else DeviceSession
    return cls(run, dev, backend=backend, protocol=protocol, workdir=workdir, calibration=calibration)
