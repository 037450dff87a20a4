"""`hwnas export`: deployable bundles of a run's subnets, compiled by the device's own backend.

What was profiled is what ships: each subnet is extracted with its trained weights, BN-recalibrated
like the accuracy table (so it reproduces the accuracy the search saw), compiled with the device's
`Backend.compile`, verified against the PyTorch subnet through the device's `Runner`, timed beside
the profiler's reference subnet and published as ``<run>/exports/<id>-<device>/``.
Reduced-precision bundles are also scored on the whole test split and fail above `max_int8_drop`.
A device whose backend `builds_on_target` (TensorRT) and is not usable here gets an ONNX-only
bundle with a build kit; every other device must be usable here, since export verifies on it.

The bundle's files and checks: docs/pipeline.md, 'Export bundles'.
"""

from __future__ import annotations

import json

import platform
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from hwnas.accuracy.precision import precision_accuracy
from hwnas.errors import DeviceError, HwnasError
from hwnas.export.budget import judge_latency, search_verification
from hwnas.export.manifest import (VERIFY_JSON, check_destination, discard, publish, staging_dir,
                                   write_manifest)
from hwnas.export.memory import bundle_memory
from hwnas.export.record import checked_verify
from hwnas.export.resolve import Candidate, pareto_members, resolve_subnet
from hwnas.export.settings import MAX_INT8_DROP, ExportSettings
from hwnas.export.verify import (Report, Tolerance, VerificationError, compare, input_dependence,
                                 run_batched, tolerance_for)
from hwnas.fileio import atomic_write_json, scratch_prefix

if TYPE_CHECKING:
    from hwnas.devices.base import Artifact, Runner
    from hwnas.devices.stats import LatencyStats
    from hwnas.families.base import GeneArch
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.session import DeviceSession

__all__ = ["export_subnet", "export_pareto", "default_bundle_dir", "ProgressFn", "MAX_INT8_DROP",
           "ACCURACY_CHECKED", "check_max_int8_drop", "precision_accuracy"]

ProgressFn = Callable[[int, int, str], Any]  # progress(done, total, message)
WEIGHTS = "weights.safetensors"
ONNX = "model.onnx"
_STEPS = 6  # recalibrate, evaluate, compile, verify, measure, write
_KIT_MAX_BATCH = 8  # the largest batch of a build kit's optimisation profile
_ONNX_CHECK = "onnx (onnxruntime cpu)"  # the extra check of model.onnx beside the device artifact
#: precisions whose bundles are judged on the test split beside their fp32 subnet (fp16 is TensorRT's
#: and CUDA's, judged by the output comparison alone)
ACCURACY_CHECKED = ("bf16", "int8")
#: artifact metadata on what runs in int8, copied into the int8 report where the runtime gives it
_INT8_META = ("int8_share", "int8_layers", "layers", "int8_share_source", "qdq_pairs", "fp32_ops",
              "calibration", "calibration_images", "calibration_method", "quantizer")


def default_bundle_dir(run_dir: str | Path, arch_id: str, device: str) -> Path:
    from hwnas.run import RunFiles

    return RunFiles(Path(run_dir)).bundle(arch_id, device)


def export_subnet(run_dir: str | Path, arch_or_id: GeneArch | str, device: str,
                  out_dir: str | Path | None = None, devices_file: str | Path | None = None,
                  calib_batches: int | None = None, progress: ProgressFn | None = None, *,
                  verify_images: int = 64, measure: bool = True,
                  protocol: ProtocolSettings | None = None,
                  max_int8_drop: float = MAX_INT8_DROP) -> Path:
    """Export one subnet (an arch, OFA JSON, or an id from the run's tables) for `device`.

    Returns the bundle folder. Raises VerificationError after publishing a bundle that failed
    verification (marked failed), DeviceError for an unknown or unusable device, InputError for
    an unknown id. `calib_batches`: BN recalibration batches (default: the accuracy table's
    `BN_IMAGES`, 2,000 images). `max_int8_drop`: INT8 and bf16 devices only, the largest test top-1 drop
    (points) of the device's artifact below the fp32 subnet that still passes.
    """
    with _Exporter(run_dir, device, devices_file, calib_batches, verify_images, measure,
                   protocol, progress, max_int8_drop) as ex:
        cand = resolve_subnet(ex.run, arch_or_id, ex.device.name)
        ex.total = _STEPS
        result = ex.export(cand, Path(out_dir) if out_dir else
                           default_bundle_dir(ex.run.run_dir, cand.arch.id, ex.device.name))
    if not result.passed:
        raise VerificationError(f"bundle {result.path} failed verification on device "
                                f"'{device}': {'; '.join(result.failures)}", [result.path])
    return result.path


def export_pareto(run_dir: str | Path, device: str, out_root: str | Path | None = None,
                  devices_file: str | Path | None = None, calib_batches: int | None = None,
                  progress: ProgressFn | None = None, *, verify_images: int = 64,
                  measure: bool = True, protocol: ProtocolSettings | None = None,
                  max_int8_drop: float = MAX_INT8_DROP) -> list[Path]:
    """Export every member of the run's pareto.csv for `device` into `out_root` (default
    ``<run>/exports``). All members are exported even if some fail; then VerificationError
    lists the failed bundles."""
    with _Exporter(run_dir, device, devices_file, calib_batches, verify_images, measure,
                   protocol, progress, max_int8_drop) as ex:
        members = pareto_members(ex.run, ex.device.name)
        ex.total = _STEPS * len(members)
        root = Path(out_root) if out_root else ex.run.files.exports
        results = [ex.export(c, root / f"{c.arch.id}-{ex.device.name}") for c in members]
    failed = [r for r in results if not r.passed]
    if failed:
        raise VerificationError(f"{len(failed)} of {len(results)} bundles failed verification on "
                                f"device '{device}': " + "; ".join(f"{r.path.name}: {r.failures[0]}"
                                                                   for r in failed),
                                [r.path for r in failed])
    return [r.path for r in results]


@dataclass
class _Result:
    path: Path
    passed: bool
    failures: list[str]


@dataclass
class _Compiled:
    """What compiling produced: the device artifact (None for an onnx-only bundle), the ONNX
    record, the build kit, and the models to verify as (name, runner, tolerance)."""

    artifact: Artifact | None
    onnx: dict[str, Any]
    kit: dict[str, Any] | None = None
    runners: list[tuple[str, Runner, Tolerance]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def device_runner(self) -> Runner | None:
        return self.runners[0][1] if self.artifact is not None and self.runners else None


class _Exporter:
    """One export session: the run, device and supernet are loaded once for all subnets."""

    def __init__(self, run_dir: str | Path, device: str, devices_file: str | Path | None,
                 calib_batches: int | None, verify_images: int, measure: bool,
                 protocol: ProtocolSettings | None, progress: ProgressFn | None,
                 max_int8_drop: float = MAX_INT8_DROP):
        from hwnas.devices import get_device
        from hwnas.run import open_run

        checked = ExportSettings(calib_batches=calib_batches, verify_images=verify_images, measure=measure,
                                 max_int8_drop=max_int8_drop)
        self.max_int8_drop = checked.max_int8_drop
        self.run = open_run(run_dir, create=False)
        self.device = get_device(device, devices_file)
        self.backend = self.device.backend_impl()
        self.caps = self.device.capabilities  # what its runtime can do (class attributes)
        self.offline = self.backend.available()  # None when the device can be used here
        if self.offline and not self.caps.builds_on_target:
            raise DeviceError(f"device '{self.device.name}' is not usable here: {self.offline}; "
                              "export verifies on the device, so export where it is usable "
                              "(only TensorRT devices get an ONNX build kit instead)")
        self.calib_batches, self.verify_images, self.measure = calib_batches, verify_images, measure
        if protocol is None:
            from hwnas.profiling.protocol import ProtocolSettings

            protocol = ProtocolSettings()
        self.protocol = protocol
        self.progress, self.total, self.done = progress, _STEPS, 0
        self._tmp = Path(tempfile.mkdtemp(prefix=scratch_prefix("export")))
        self._session: DeviceSession | None = None  # measures beside the run's reference
        self._loaded: tuple[Any, dict[str, Any], Any, Any] | None = None

    def __enter__(self) -> _Exporter:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._session is not None:
            self._session.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _step(self, arch: GeneArch, message: str) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total, f"{arch.id}: {message}")

    def _supernet(self) -> tuple[Any, dict[str, Any], Any, Any]:
        """(supernet, its meta, loaders, BN calibration loader), loaded on first use."""
        if self._loaded is None:
            from hwnas.supernet.data import BN_IMAGES, build_loaders, calibration_loader
            from hwnas.supernet.pretrained import data_config_of, load_supernet

            model, meta = load_supernet(self.run.supernet)
            loaders = build_loaders(data_config_of(meta, self.run.data))
            n = (BN_IMAGES if self.calib_batches is None
                 else self.calib_batches * loaders.train.batch_size)
            calib = calibration_loader(loaders.train, n_images=n, seed=0)
            self._loaded = (model, meta, loaders, calib)
        return self._loaded

    # -- one subnet --------------------------------------------------------------------------
    def export(self, cand: Candidate, out: Path) -> _Result:
        import torch

        from hwnas.supernet.bn import evaluate, folded_for_eval, recalibrate_bn
        from hwnas.supernet.data import spread_images
        from hwnas.supernet.finetune import load_finetuned

        arch = cand.arch
        check_destination(out)  # before the slow steps
        model, meta, loaders, calib = self._supernet()
        self._step(arch, "recalibrate BatchNorm")
        subnet = model.get_subnet(arch).eval()
        recalibrate_bn(subnet, calib, len(calib), resolution=arch.r)
        finetuned = load_finetuned(self.run, arch, subnet)  # its own weights, when fine-tuned
        self._step(arch, "evaluate on the test split")
        # evaluated as search verification evaluates (BN folded), so both report the same top-1
        accuracy = evaluate(folded_for_eval(subnet), loaders.test, resolution=arch.r)
        images, labels = spread_images(loaders.test.dataset, self.verify_images, arch.r)
        with torch.inference_mode():
            reference = np.concatenate([subnet(torch.from_numpy(images[i:i + 64])).numpy()
                                        for i in range(0, len(images), 64)])
        stage = staging_dir(out)
        compiled: _Compiled | None = None
        try:
            report = Report()
            report.add(input_dependence(reference))
            _save_weights(subnet, stage / WEIGHTS)
            self._step(arch, f"compile for {self.device.name}")
            compiled = self._compile(subnet, arch, stage, calib)
            self._step(arch, "verify against PyTorch")
            for name, runner, tol in compiled.runners:
                report.add(_compare(name, runner, tol, images, reference, labels))
            for check in compiled.skipped:
                report.add(check)
            precision = self.device.precision
            reduced = self._reduced(compiled, subnet, loaders.test, arch, report)
            self._step(arch, "measure latency")
            latency = self._latency(compiled, arch, cand, report)
            if reduced is not None:
                measured = latency.get("measured") or {}
                reduced["latency_ms"] = measured.get("corrected_ms")
                reduced["latency_median_ms"] = measured.get("median_ms")
            self._step(arch, "write bundle")
            status = ("failed: " + "; ".join(report.failures()) if not report.passed
                      else f"onnx-only: {self.offline}" if compiled.artifact is None
                      else "verified")
            memory = bundle_memory(self.run.family, arch, int(meta["n_classes"]), self.device.precision,
                                   compiled.artifact)
            atomic_write_json(stage / VERIFY_JSON, checked_verify({
                "status": status, **report.to_dict(), "device": self.device.name, "precision": precision,
                "images": {"split": "test", "n": int(len(images)), "resolution": arch.r},
                "weights": _weights_source(finetuned),
                **({precision: reduced} if reduced is not None else {}),
                "latency": latency, "memory": memory}))
            if reduced is not None:
                accuracy = {**accuracy, precision: reduced}
            manifest = self._meta(cand, meta, loaders, accuracy, compiled, latency, report, status, memory)
            write_manifest(stage, {**manifest, "finetuned": _weights_source(finetuned)["finetuned"]})
        except BaseException:
            discard(stage)
            raise
        finally:
            for _, runner, _ in compiled.runners if compiled else []:
                runner.close()
        publish(stage, out)
        return _Result(out, report.passed, report.failures())

    def _compile(self, subnet: Any, arch: GeneArch, stage: Path, calib: Any) -> _Compiled:
        """Compile with the device's backend; make sure the bundle holds an ONNX model."""
        import torch

        from hwnas.devices.onnx_export import INPUT_NAME, OPSET, OUTPUT_NAME, export_onnx
        from hwnas.export.bundle import onnx_runner
        from hwnas.supernet.data import CALIBRATION_IMAGES, KIT_CALIBRATION_IMAGES, spread_images

        precision, batch = self.device.precision, self.device.batch
        x = torch.zeros(1, 3, arch.r, arch.r)
        xb = x.expand(batch, -1, -1, -1).contiguous()
        shape = [batch, 3, arch.r, arch.r]
        onnx_precision, dynamic, artifact, kit = "fp32", False, None, None
        if self.caps.builds_on_target:
            # the ONNX to build on the target: the graph the backend builds from, with a batch axis
            onnx_precision, dynamic = precision, True
            export_onnx(subnet, xb, stage / ONNX, precision=precision, dynamic_batch=True)
            kit = self.caps.write_build_kit(
                stage, onnx=ONNX, shape=shape, precision=precision,
                batch=(1, batch, max(batch, _KIT_MAX_BATCH)),
                calib=spread_images(calib.dataset, KIT_CALIBRATION_IMAGES, arch.r)[0], input_name=INPUT_NAME)
            if self.offline is None:  # the artifact profiling timed: static batch, built here
                artifact = self.backend.compile(subnet, x, self._tmp / arch.id)
                built = stage / Path(artifact.path).name
                shutil.copyfile(artifact.path, built)
                artifact.path, artifact.files = built, [built]
                artifact.metadata["onnx"] = "built from a static-batch export of model.onnx"
        else:  # INT8 devices calibrate on training images (never test images)
            images = spread_images(calib.dataset, CALIBRATION_IMAGES, arch.r)[0] if precision == "int8" else None
            artifact = self.backend.compile(subnet, x, stage, calibration=images)
            if not (stage / ONNX).exists():  # .pte / .tflite / eager devices: ONNX as well
                export_onnx(subnet, xb, stage / ONNX)
            elif artifact.format == "onnx":
                onnx_precision = artifact.precision
        dtype = "float16" if onnx_precision == "fp16" else "float32"
        onnx = {"file": ONNX, "opset": OPSET, "input": INPUT_NAME, "output": OUTPUT_NAME,
                "input_shape": shape, "input_dtype": dtype, "precision": onnx_precision,
                "dynamic_batch": dynamic}
        out = _Compiled(artifact, onnx, kit)
        if artifact is not None:
            out.runners.append((artifact.format, self.backend.load(artifact),
                                tolerance_for(precision, self.caps.fp32_math)))
        if artifact is None or artifact.format != "onnx":
            try:
                runner = onnx_runner(stage / ONNX, shape, dtype)
                out.runners.append((_ONNX_CHECK, runner,
                                    tolerance_for(onnx_precision, runner.device.capabilities.fp32_math)))
            except HwnasError as err:  # e.g. an fp16 graph the CPU provider has no kernels for
                out.skipped.append({"name": _ONNX_CHECK, "passed": True, "skipped": True,
                                    "detail": f"model.onnx not checked here: {err}"})
        return out

    def _reduced(self, compiled: _Compiled, subnet: Any, test: Any, arch: GeneArch,
                 report: Report) -> dict[str, Any] | None:
        """INT8 and bf16 devices: the artifact's test top-1 beside the fp32 subnet's, as a check
        (failed when the drop exceeds `max_int8_drop`) and as the bundle's ``int8`` / ``bf16``
        record."""
        p = self.device.precision
        if p not in ACCURACY_CHECKED:
            return None
        artifact, check = compiled.artifact, f"{p} accuracy"
        record: dict[str, Any] = {"split": "test", "max_drop": self.max_int8_drop}
        if artifact is not None:
            record.update({k: artifact.metadata[k] for k in _INT8_META if k in artifact.metadata})
        runner = compiled.device_runner
        if runner is None:
            record["note"] = f"not evaluated: {self.offline}"
            return record
        try:
            record.update(precision_accuracy(subnet, runner, test, arch.r, p))
        except HwnasError as err:
            record["note"] = f"running the {p} artifact on the test split failed: {err}"
            report.add({"name": check, "passed": False, "detail": record["note"]})
            return record
        drop, n = record["drop"], record["n"]
        summary = (f"{p} top-1 {record[f'top1_{p}']:.2f}% vs fp32 {record['top1_fp32']:.2f}% on "
                   f"{n} test images, agreement {record['top1_agreement']:.1%}")
        passed = drop <= self.max_int8_drop
        record["passed"] = passed
        report.add({"name": check, "passed": passed, **{k: record[k] for k in (
                        f"top1_{p}", "top1_fp32", "drop", "top1_agreement", "n", "max_drop")},
                    "detail": (f"{p} top-1 drop {drop:.2f} points <= {self.max_int8_drop:g} "
                               f"({summary})" if passed else
                               f"{p} top-1 drop {drop:.2f} points > {self.max_int8_drop:g} "
                               f"allowed ({summary}; --max-int8-drop sets the limit)")})
        return record

    def _latency(self, compiled: _Compiled, arch: GeneArch, cand: Candidate, report: Report
                 ) -> dict[str, Any]:
        """Measured (drift-corrected, beside the run's reference, on the run's anchor: the
        measuring session's one call, as profiling and search verification measure), profiled
        and predicted."""
        out: dict[str, Any] = {"measured": None,
                               "predicted_ms": cand.predicted_latency_ms(self.device.name),
                               "profiled": _profiled(self.run.run_dir, self.device.name, arch.id)}
        runner = compiled.device_runner
        if runner is None:
            out["note"] = f"not measured: {self.offline}"
        elif not self.measure:
            out["note"] = "not measured (measure=False)"
        else:
            try:
                stats = self._measuring().measure(arch.id, runner)
            except HwnasError as err:
                report.add({"name": "latency", "passed": False, "detail":
                            f"measuring the latency on '{self.device.name}' failed: {err}"})
                return out
            out["measured"] = stats.to_dict()
            if out["predicted_ms"]:
                out["measured_over_predicted"] = stats.corrected_ms / out["predicted_ms"]
            verified = search_verification(self.run, self.device.name, arch.id)
            out.update(judge_latency(verified, stats, lambda: self._paired(arch, runner)))
            budget = "" if out["within_budget"] is None else (
                f"; {'within' if out['within_budget'] else 'over'} the search's {out['budget_ms']:.4g} ms budget "
                f"by its rule ({out['decided_by']})")
            report.add({"name": "latency", "passed": True, "corrected_ms": stats.corrected_ms, "ms": out["ms"],
                        "within_budget": out["within_budget"],
                        "detail": f"latency {out['ms']:.3f} ms ({out['source']}); export's check "
                                  f"{stats.corrected_ms:.3f} ms (drift-corrected, median {stats.median_ms:.3f} ms, "
                                  f"n={stats.n}) on '{self.device.name}'{budget}"})
        return out

    def _paired(self, arch: GeneArch, runner: Runner) -> tuple[LatencyStats, LatencyStats]:
        """(the bundle's, the subnet's as search verification compiles it) timed together in the
        export's session (`hwnas.export.budget`)."""
        import torch

        session = self._measuring()
        twin = session.compile(f"{arch.id}-as-verified", session.timing_subnet(arch),
                               torch.zeros(1, 3, arch.r, arch.r))
        got = session.measure_together({"bundle": runner, "as_verified": twin})
        return got["bundle"], got["as_verified"]

    def _measuring(self) -> DeviceSession:
        """The device's measuring session (`hwnas.profiling.session`), opened once per export
        session: the reference compiled once into this export's scratch folder (INT8 devices:
        calibrated on the training images the exported models calibrate on) and the run's
        anchor (None when the device was never profiled in this run)."""
        if self._session is None:
            from hwnas.profiling.session import open_session
            from hwnas.supernet.data import CALIBRATION_IMAGES, spread_images

            def calibration() -> np.ndarray:
                return spread_images(self._supernet()[3].dataset, CALIBRATION_IMAGES, None)[0]

            self._session = open_session(self.run, self.device, backend=self.backend,
                                         protocol=self.protocol, workdir=self._tmp,
                                         calibration=calibration)
        return self._session

    def _meta(self, cand: Candidate, meta: dict[str, Any], loaders: Any, accuracy: dict[str, Any],
              compiled: _Compiled, latency: dict[str, Any], report: Report, status: str,
              memory: dict[str, Any]) -> dict[str, Any]:
        from hwnas.export.manifest import FORMAT, VERSION
        from hwnas.extras import dist_version

        arch = cand.arch
        artifact = compiled.artifact
        calib = self._supernet()[3]
        versions = dict(artifact.metadata["versions"] if artifact else self.backend.versions())
        if any(name == _ONNX_CHECK for name, *_ in compiled.runners):
            versions.setdefault("onnxruntime", dist_version("onnxruntime") or "?")
        versions.update(python=platform.python_version(), platform=platform.platform())
        return {
            "format": FORMAT, "version": VERSION, "id": arch.id, "status": status,
            "precision": self.device.precision,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "family": self.run.family.name, "arch": json.loads(arch.to_json()),
            "arch_text": arch.describe(), "source": cand.source,
            "run": str(self.run.run_dir),
            "supernet": {"checkpoint": self.run.supernet or "shipped", "width_mult": arch.w,
                         "n_classes": int(meta["n_classes"]), "dataset": loaders.dataset},
            "input": {"name": compiled.onnx["input"], "shape": compiled.onnx["input_shape"],
                      "dtype": compiled.onnx["input_dtype"], "layout": "NCHW"},
            "preprocess": {"size": arch.r, "mean": list(loaders.mean), "std": list(loaders.std),
                           "scale": "1/255", "channels": "RGB (grey replicated)",
                           "resize": "bilinear, align_corners=False, antialias=False",
                           "crop_fraction": 0.875 if loaders.dataset == "imagefolder" else 1.0},
            "classes": list(loaders.class_names),
            "accuracy": {"split": "test", "top1": accuracy["top1"], "loss": accuracy["loss"],
                         "n": accuracy["n"], "bn_calibration": {
                             "split": "train", "seed": 0, "batches": len(calib),
                             "images": len(calib.dataset)},
                         **{p: accuracy[p] for p in ACCURACY_CHECKED if p in accuracy}},
            "predicted": {"latency_ms": cand.predicted_latency_ms(self.device.name),
                          "top1": cand.predicted_top1, "source": cand.source, "row": cand.row},
            "latency": latency,
            "memory": memory,
            "device": self.device.model_dump(mode="json"),
            "artifact": _relative(artifact.to_dict(), compiled) if artifact else None,
            "onnx": compiled.onnx,
            "weights": WEIGHTS,
            "tensorrt": compiled.kit,
            "runtime_versions": versions,
            "verification": {"passed": report.passed, "failures": report.failures(),
                             "report": VERIFY_JSON},
        }


def _weights_source(finetuned: dict[str, Any] | None) -> dict[str, Any]:
    """Where a bundle's weights come from: the supernet's shared weights, or a fine-tuning run
    (its epochs and top-1 before / after, as `hwnas finetune` measured them)."""
    if finetuned is None:
        return {"source": "supernet", "finetuned": None}
    keep = ("epochs", "top1_before", "top1_after", "n", "supernet", "supernet_sha256", "teacher", "settings")
    return {"source": "finetuned", "finetuned": {k: finetuned.get(k) for k in keep}}


def _compare(name: str, runner: Runner, tol: Any, images: np.ndarray, reference: np.ndarray,
             labels: np.ndarray) -> dict[str, Any]:
    """The check of one exported model; a runtime failure is a failed check, not a crash."""
    try:
        outputs = run_batched(runner, images)
    except HwnasError as err:
        return {"name": name, "passed": False, "detail": f"{name}: running it failed: {err}"}
    return compare(name, outputs, reference, tol, labels)


def check_max_int8_drop(value: float) -> float:
    """The INT8 / bf16 drop limit as a float; a SettingError line when negative or not a number."""
    return ExportSettings(max_int8_drop=value).max_int8_drop


def _relative(record: dict[str, Any], compiled: _Compiled) -> dict[str, Any]:
    """An artifact record with file paths relative to the bundle folder."""
    def rel(p: str | None) -> str | None:
        return None if p is None else Path(p).name

    out = dict(record, path=rel(record["path"]), files=[rel(f) for f in record["files"]])
    # file entries of the metadata ("onnx", ORT INT8's "fp32_onnx") name files beside the artifact
    out["metadata"] = {k: (rel(v) if k.endswith("onnx") and isinstance(v, str) and "/" in v else v)
                       for k, v in record["metadata"].items()}
    return out


def _save_weights(module: Any, path: Path) -> None:
    from safetensors.torch import save

    from hwnas.fileio import atomic_write_bytes

    state = {k: v.detach().cpu().contiguous().clone() for k, v in module.state_dict().items()}
    atomic_write_bytes(path, save(state, metadata={"format": "pt", "writer": "hwnas-export"}))


def _profiled(run_dir: Path, device: str, arch_id: str) -> dict[str, Any] | None:
    """The run's own measurement of this subnet on this device (random weights), if any."""
    from hwnas.profiling.store import read_measurements

    df = read_measurements(run_dir, device=device, kind="subnet")
    if df.empty or arch_id not in set(df["key"]):
        return None
    row = df[df["key"] == arch_id].iloc[0]
    return {"corrected_ms": float(row["corrected_ms"]), "median_ms": float(row["median_ms"]),
            "measured_at": str(row.get("measured_at", ""))}
