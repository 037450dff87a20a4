"""Deploy bundles: a searched subnet compiled for a device, verified, with its metadata.

    from hwnas.export import export_subnet, load
    bundle_dir = export_subnet("runs/mnist", "3f2a9c1b7d40", "cpu-ort")
    with load(bundle_dir) as bundle:
        classes, probs = bundle.predict(images)

See docs/pipeline.md, 'Export bundles', for what a bundle holds, and `hwnas.devices.tensorrt_build`
for the TensorRT engine builder that every TensorRT bundle carries.
"""

from __future__ import annotations

from hwnas.export.api import default_bundle_dir, export_pareto, export_subnet
from hwnas.export.bundle import Bundle, load
from hwnas.export.manifest import BundleError, read_meta
from hwnas.export.resolve import pareto_members, resolve_subnet
from hwnas.export.verify import Tolerance, VerificationError

__all__ = [
    "Bundle",
    "BundleError",
    "Tolerance",
    "VerificationError",
    "default_bundle_dir",
    "export_pareto",
    "export_subnet",
    "load",
    "pareto_members",
    "read_meta",
    "resolve_subnet",
]
