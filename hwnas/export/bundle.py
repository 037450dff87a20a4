"""Run an exported bundle on images: `load(bundle_dir).predict(images)`.

A bundle is untrusted input (bundles are passed around): `load` checks every file's sha256 first,
then runs the model with *this machine's* definition of the device the bundle names (built-in, or
in the `devices_file` the caller passes), never with runtime options, providers, hosts or paths
taken from model.json; files are read only when the manifest lists them inside the bundle, and an
ONNX model that carries ONNX Runtime session options or points at data outside the bundle is
refused. SHA256SUMS detects damage, not tampering: whoever edits a bundle can recompute it. To
know a bundle is the one you exported, compare `Bundle.fingerprint` (printed by `hwnas export`)
or pass `fingerprint=` to `load`. Where the device's runtime is not usable here (an OpenVINO bundle
on a machine without OpenVINO, a TensorRT bundle whose engine is built on the target) it falls
back to the bundle's ONNX model on ONNX Runtime's CPU provider; `Bundle.runtime` says which runs.

Preprocessing repeats the evaluation pipeline of the supernet's dataset: uint8 (0-255) or float
(0-1) pixels are scaled to [0, 1], grey is replicated to RGB (alpha dropped), the central
``crop_fraction`` square is kept (image folders: 0.875), the image is resized to the subnet's
resolution (bilinear, no antialias, as `resize_batch`) and normalised with the dataset's mean/std.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from hwnas.errors import HwnasError, InputError
from hwnas.export.manifest import SUMS, BundleError, check_files, inside, read_meta, sha256_file
from hwnas.families.base import GeneArch

if TYPE_CHECKING:
    from hwnas.devices.base import Runner

__all__ = ["Bundle", "load", "onnx_runner", "bundle_fingerprint"]


def onnx_runner(path: Path, input_shape: Sequence[int], input_dtype: str = "float32") -> Runner:
    """An ONNX model on ONNX Runtime's CPU provider (the built-in `cpu-ort` device)."""
    from hwnas.devices import Artifact, get_device

    device = get_device("cpu-ort")
    artifact = Artifact(format="onnx", path=Path(path), input_shape=tuple(input_shape),
                        input_dtype=input_dtype, device=device.name, backend=device.backend)
    return device.backend_impl().load(artifact)


class Bundle:
    """A loaded bundle: its metadata (`meta`, model.json) and a runner of its model."""

    def __init__(self, path: Path, meta: dict[str, Any], runner: Runner, runtime: str):
        self.path, self.meta, self.runner, self.runtime = path, meta, runner, runtime
        pre = meta["preprocess"]
        self.input_size = int(pre["size"])
        self.mean = np.asarray(pre["mean"], np.float32).reshape(1, 3, 1, 1)
        self.std = np.asarray(pre["std"], np.float32).reshape(1, 3, 1, 1)
        self.crop_fraction = float(pre.get("crop_fraction", 1.0))

    @property
    def id(self) -> str:
        return self.meta["id"]

    @property
    def arch(self) -> GeneArch:
        return bundle_arch(self.meta)

    @property
    def classes(self) -> list[str]:
        return list(self.meta["classes"])

    @property
    def status(self) -> str:
        return self.meta["status"]

    @property
    def fingerprint(self) -> str:
        """The sha256 of the bundle's SHA256SUMS: it changes with any file, so it names one
        exported bundle (compare it with the one `hwnas export` printed)."""
        return bundle_fingerprint(self.path)

    # -- images -> input -------------------------------------------------------------------
    def preprocess(self, images: Any) -> np.ndarray:
        """Images (see `predict`) -> the model's float32 input [N, 3, r, r]."""
        import torch

        from hwnas.supernet.data import resize_batch

        batch = []
        for img in _split(images):
            x = torch.from_numpy(_pixels(img)).permute(2, 0, 1)[None]  # [1, 3, H, W]
            x = resize_batch(_center_crop(x, self.crop_fraction), self.input_size)
            batch.append(x[0].numpy())
        if not batch:
            raise InputError("no images to predict")
        return ((np.stack(batch) - self.mean) / self.std).astype(np.float32)

    def logits(self, images: Any) -> np.ndarray:
        """Raw model outputs [N, classes]."""
        from hwnas.export.verify import run_batched

        return run_batched(self.runner, self.preprocess(images))

    def predict(self, images: Any) -> tuple[np.ndarray, np.ndarray]:
        """Class indices [N] and softmax probabilities [N, classes].

        `images`: one image or a sequence/stack of them; an image is a PIL image, a 2-D grey
        array (H x W) or an H x W x C array (C = 1, 3 or 4), uint8 0-255 or float 0-1. A 3-D
        array whose last axis is not 1, 3 or 4 is a stack of grey images (N x H x W).
        """
        z = self.logits(images).astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        return p.argmax(axis=1), p.astype(np.float32)

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Bundle({str(self.path)!r}, id={self.id!r}, runtime={self.runtime!r}, "
                f"status={self.status!r})")


def _split(images: Any) -> list[Any]:
    if isinstance(images, np.ndarray):
        if images.ndim == 2 or (images.ndim == 3 and images.shape[-1] in (1, 3, 4)):
            return [images]
        if images.ndim in (3, 4):
            return list(images)
        raise InputError("an image array must be H x W, H x W x C or a stack of them; "
                         f"got shape {images.shape}")
    if isinstance(images, (list, tuple)):
        return list(images)
    return [images]


def _pixels(img: Any) -> np.ndarray:
    """One image -> float32 H x W x 3 in [0, 1]."""
    if hasattr(img, "convert") and hasattr(img, "mode"):  # a PIL image
        img = np.asarray(img if img.mode in ("L", "RGB", "RGBA") else img.convert("RGB"))
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[-1] not in (1, 3, 4):
        raise InputError(f"an image must be H x W or H x W x C (C = 1, 3 or 4), got shape {a.shape}")
    numeric = np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)
    if a.dtype == np.bool_ or not numeric:
        raise InputError(f"image pixels must be uint8 (0-255) or float (0-1), got {a.dtype}")
    if np.issubdtype(a.dtype, np.integer):
        if a.min() < 0 or a.max() > 255:
            raise InputError("integer image pixels must be within 0..255")
        x = a.astype(np.float32) / 255.0
    else:
        x = a.astype(np.float32)
        if x.min() < 0.0 or x.max() > 1.0:
            raise InputError("float image pixels must be within 0..1; pass uint8 for 0..255 "
                             "(e.g. image.astype(np.uint8))")
    x = x[:, :, :3]
    return np.ascontiguousarray(np.repeat(x, 3, axis=2) if x.shape[-1] == 1 else x)


def _center_crop(x: Any, fraction: float) -> Any:
    if fraction >= 1.0:
        return x
    h, w = x.shape[-2:]
    side = max(1, int(round(min(h, w) * fraction)))
    top, left = (h - side) // 2, (w - side) // 2
    return x[..., top:top + side, left:left + side]


# -- loading -----------------------------------------------------------------------------------
def bundle_fingerprint(root: str | Path) -> str:
    """The sha256 of `root`/SHA256SUMS (which lists every file's sha256, model.json's included)."""
    return sha256_file(Path(root) / SUMS)


def _listed(root: Path, meta: dict[str, Any], name: Any) -> Path:
    """`root / name` for a file the manifest lists (so its sha256 was checked) inside the bundle."""
    path = inside(root, name)
    if Path(name).as_posix() not in meta["files"]:
        raise BundleError(f"bundle {root}: {name!r} is not one of the files model.json lists; "
                          "export the bundle again")
    return path


def _checked_onnx(root: Path, meta: dict[str, Any], name: Any) -> Path:
    """The bundle's ONNX file `name`, refused when it carries ONNX Runtime session options
    (metadata 'ort_config') or keeps tensors in files the manifest does not list."""
    import onnx

    from hwnas.devices.agent.wire import external_tensors

    path = _listed(root, meta, name)
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - any parse failure is the file's
        raise BundleError(f"bundle {root}: {name} is not a readable ONNX model ({type(err).__name__}); "
                          "export the bundle again") from None
    if any(prop.key == "ort_config" for prop in model.metadata_props):
        raise BundleError(f"bundle {root}: {name} carries ONNX Runtime session options (metadata "
                          "'ort_config'), which hwnas never writes; export the bundle again")
    folder = Path(str(name)).parent
    for tensor in external_tensors(model):
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        _listed(root, meta, (folder / location).as_posix())
    return path


def _artifact(root: Path, meta: dict[str, Any]):
    from hwnas.devices import Artifact

    artifact = Artifact.from_dict(meta["artifact"])
    if artifact.format == "onnx" and artifact.path is not None:
        artifact.path = _checked_onnx(root, meta, str(artifact.path))
    else:
        artifact.path = None if artifact.path is None else _listed(root, meta, str(artifact.path))
    artifact.files = [_listed(root, meta, str(f)) for f in artifact.files]
    artifact.metadata = {}  # runners read nothing from it; a bundle's says nothing to trust
    return artifact


def bundle_arch(meta: dict[str, Any]) -> GeneArch:
    """The subnet a bundle holds: its family's arch from Once-for-All's arch dict (bundles written
    before families are the default family's, their width in the dict's "w")."""
    from hwnas.families import DEFAULT_FAMILY, get_family

    family = get_family(str(meta.get("family", DEFAULT_FAMILY)))
    obj = meta["arch"]
    width = meta.get("supernet", {}).get("width_mult")
    if width is None and isinstance(obj.get("w"), (int, float)):
        width = obj["w"]
    return family.arch_from_dict(obj, width)


def _torch_module(root: Path, meta: dict[str, Any]):
    """The PyTorch subnet rebuilt from the arch and weights.safetensors (no pickle)."""
    from safetensors.torch import load_file

    arch = bundle_arch(meta)
    module = arch.family.static_subnet(arch, n_classes=int(meta["supernet"]["n_classes"]))
    module.load_state_dict(load_file(str(_listed(root, meta, meta["weights"]))), strict=True)
    return module.eval()


def trusted_device(meta: dict[str, Any], devices_file: str | Path | None = None):
    """The device a bundle runs on here, built from nothing the bundle could use against its user.

    This machine's own definition of the device the bundle names (built-in, or in the caller's
    `devices_file`) when it has the bundle's backend and precision; otherwise a fixed configuration
    of that backend: its default provider, no options, no remote host (a bundle never makes `load`
    contact a machine), and at most this machine's
    cores as threads. From model.json only the name, backend, precision and thread count are read."""
    import os

    from hwnas.devices import Device, get_device
    from hwnas.errors import DeviceError

    recorded = meta.get("device")
    if not isinstance(recorded, dict):
        raise DeviceError("model.json names no device")
    name, backend = str(recorded.get("name", "")), str(recorded.get("backend", ""))
    precision = str(recorded.get("precision", "fp32"))
    try:
        own = get_device(name, devices_file)
    except DeviceError:
        own = None
    if own is not None and not own.is_remote and own.backend == backend and own.precision == precision:
        return own
    threads = recorded.get("threads", 1)
    threads = min(threads if isinstance(threads, int) and threads >= 1 else 1, os.cpu_count() or 1)
    return Device(name=name, backend=backend, precision=precision, threads=threads)


def _device_runner(root: Path, meta: dict[str, Any], devices_file: str | Path | None) -> tuple[Runner | None, str]:
    """The runner on the bundle's own device, or (None, why not)."""
    from pydantic import ValidationError

    if not meta.get("artifact"):
        return None, meta["status"]
    try:
        device = trusted_device(meta, devices_file)
    except (ValidationError, HwnasError) as err:
        return None, f"its device is not known to this hwnas ({str(err).splitlines()[0]})"
    reason = device.available()
    if reason:
        return None, f"device '{device.name}' is not usable here: {reason}"
    artifact = _artifact(root, meta)
    if artifact.format == "torch-module":
        artifact.payload = _torch_module(root, meta)
    return device.backend_impl().load(artifact), f"{device.name} ({device.backend})"


def load(bundle_dir: str | Path, *, runtime: str = "auto", allow_failed: bool = False,
         fingerprint: str | None = None, devices_file: str | Path | None = None) -> Bundle:
    """Check a bundle's files and load its model.

    `runtime`: "auto" (the bundle's device, else ONNX Runtime on the ONNX model), "device"
    (its device or an error) or "onnx". A bundle that failed verification is refused unless
    `allow_failed`. `fingerprint`: the `Bundle.fingerprint` `hwnas export` printed; a bundle whose
    files differ from those is refused (SHA256SUMS alone catches damage, not a re-signed edit).
    `devices_file`: your devices YAML, for a bundle exported for a device defined there; the
    runtime's settings come from it (or the built-in devices), never from the bundle. Raises
    BundleError (one line) for a missing, tampered or failed bundle.
    """
    if runtime not in ("auto", "device", "onnx"):
        raise InputError(f"runtime must be 'auto', 'device' or 'onnx', got {runtime!r}")
    root = Path(bundle_dir)
    meta = read_meta(root)
    check_files(root, meta)
    if fingerprint is not None and bundle_fingerprint(root) != str(fingerprint).strip().lower():
        raise BundleError(f"bundle {root} is not the bundle with fingerprint {fingerprint}: its files "
                          "differ from the exported ones; do not use it, export it again")
    if str(meta.get("status", "")).startswith("failed") and not allow_failed:
        raise BundleError(f"bundle {root} failed its verification ({meta['status']}); see "
                          "verify.json, or load it with allow_failed=True")
    why = "runtime='onnx' was asked for"
    if runtime != "onnx":
        runner, why = _device_runner(root, meta, devices_file)
        if runner is not None:
            return Bundle(root, meta, runner, why)
        if runtime == "device":
            raise BundleError(f"bundle {root} cannot run on its device here: {why}; "
                              "load it with runtime='onnx' to use its ONNX model")
    onnx = meta["onnx"]
    runner = onnx_runner(_checked_onnx(root, meta, onnx["file"]), onnx["input_shape"], onnx["input_dtype"])
    return Bundle(root, meta, runner, f"onnxruntime cpu on {onnx['file']} ({why})")
