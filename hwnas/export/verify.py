"""Verification of an exported model against its PyTorch subnet, on real test images.

Checks, each recorded in verify.json whether it passes or not:

- the PyTorch subnet's outputs depend on the input (a network with broken BN statistics gives
  nearly the same output for every image, and "outputs match" would then prove nothing);
- per exported model: outputs are finite, ``max |exported - pytorch|`` is at most
  ``atol + rtol * max |pytorch|`` (a per-backend/precision `Tolerance`; int8 and bf16 instead bound
  the relative RMS error, since one image's worst logit in reduced precision depends on the CPU's
  kernels) and top-1 agrees on at least ``min_agreement`` of the images;
- the latency was measured on the device.

Any failed check fails the export: `VerificationError` (exit code 2 on the command line), and the
bundle is kept, marked failed in model.json and verify.json.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hwnas.devices.base import run_batched
from hwnas.errors import HwnasError

__all__ = ["VerificationError", "Tolerance", "tolerance_for", "run_batched", "compare",
           "input_dependence", "Report"]


class VerificationError(HwnasError):
    """An exported model failed its verification; `bundles` are the (kept, marked) bundles."""

    def __init__(self, message: str, bundles: list[Any] | None = None):
        super().__init__(message)
        self.bundles = list(bundles or [])


@dataclass(frozen=True)
class Tolerance:
    """Allowed output error: ``atol + rtol * max |reference|`` (None: recorded, not judged), at
    most `max_rel_rms` of ``rms(exported - pytorch) / rms(pytorch)`` when set, and the least top-1
    agreement."""

    atol: float | None
    rtol: float | None
    min_agreement: float
    max_rel_rms: float | None = None

    def limit(self, scale: float) -> float | None:
        return None if self.atol is None or self.rtol is None else self.atol + self.rtol * scale


_BY_PRECISION = {
    "fp32": Tolerance(1e-3, 1e-3, 0.98),
    "fp16": Tolerance(2e-2, 5e-2, 0.95),  # 11 mantissa bits; CPU kernels may accumulate in fp16
    # bf16 (8 mantissa bits; OpenVINO on AVX512-BF16, shipped supernet's subnets, 256 test images):
    # relative RMS 0.8-1.3%, worst logit 2-4% of the largest, top-1 agreement 99.6-100%. Judged like
    # int8, with a bound 4x the worst seen (a broken artifact is ~100% off); its accuracy on the whole
    # test split is export's "bf16 accuracy" check. An untrained (random-weight) subnet is ~18% off:
    # random layers amplify the rounding, so such a bundle fails, as its outputs do differ that much
    "bf16": Tolerance(None, None, 0.95, max_rel_rms=0.05),
    # int8: one image's worst logit moves by 10-30% of the largest logit, by CPU (its kernels round
    # differently): no stable bound. What quantisation costs is judged by top-1 agreement and the
    # test top-1 drop (export's "int8 accuracy" check); the RMS bound only catches broken artifacts
    # (a broken one is ~100% off, a working one 5-20%)
    "int8": Tolerance(None, None, 0.90, max_rel_rms=0.5),
}
#: fp32 models of runtimes whose fp32 convolutions use reduced inputs (`Backend.fp32_math`)
_BY_FP32_MATH = {
    "tf32": Tolerance(1e-2, 1e-2, 0.97),  # TensorRT runs fp32 convolutions in TF32
}


def tolerance_for(precision: str, fp32_math: str = "fp32") -> Tolerance:
    """The tolerance of a model of `precision` on a runtime whose fp32 arithmetic is
    `fp32_math` (the backend's `Backend.fp32_math`)."""
    if precision == "fp32" and fp32_math in _BY_FP32_MATH:
        return _BY_FP32_MATH[fp32_math]
    return _BY_PRECISION.get(precision, _BY_PRECISION["fp32"])


def _check(name: str, passed: bool, detail: str, **values: Any) -> dict[str, Any]:
    return {"name": name, "passed": bool(passed), "detail": detail, **values}


def compare(name: str, outputs: np.ndarray, reference: np.ndarray, tol: Tolerance,
            labels: np.ndarray | None = None) -> dict[str, Any]:
    """One check: `outputs` (exported model) against `reference` (PyTorch) on the same images."""
    outputs, reference = np.asarray(outputs, np.float64), np.asarray(reference, np.float64)
    if outputs.shape != reference.shape:
        return _check(name, False, f"{name}: output shape {outputs.shape} differs from PyTorch's "
                      f"{reference.shape}")
    finite = bool(np.isfinite(outputs).all())
    diff = float(np.abs(outputs - reference).max()) if finite else float("inf")
    limit = tol.limit(float(np.abs(reference).max()))
    rel_rms = (float(np.sqrt(np.mean((outputs - reference) ** 2) / max(np.mean(reference ** 2), 1e-30)))
               if finite else float("inf"))
    agree = float((outputs.argmax(1) == reference.argmax(1)).mean()) if finite else 0.0
    values: dict[str, Any] = {"max_abs_diff": diff, "limit": limit, "rel_rms": rel_rms,
                              "top1_agreement": agree, "n_images": int(len(reference)),
                              "tolerance": asdict(tol)}
    if labels is not None:
        values["top1_exported"] = float((outputs.argmax(1) == labels).mean() * 100)
        values["top1_pytorch"] = float((reference.argmax(1) == labels).mean() * 100)
    problems = []
    if not finite:
        problems.append("non-finite outputs")
    elif limit is not None and diff > limit:
        problems.append(f"max |diff| {diff:.3g} > {limit:.3g}")
    elif tol.max_rel_rms is not None and rel_rms > tol.max_rel_rms:
        problems.append(f"relative RMS error {rel_rms:.3g} > {tol.max_rel_rms:.3g}")
    if agree < tol.min_agreement:
        problems.append(f"top-1 agrees on {agree:.0%} of {len(reference)} images "
                        f"(< {tol.min_agreement:.0%})")
    error = (f"max |diff| {diff:.3g} <= {limit:.3g}" if limit is not None else
             f"relative RMS error {rel_rms:.3g} <= {tol.max_rel_rms:.3g} (max |diff| {diff:.3g})")
    detail = (f"{name}: " + ", ".join(problems) if problems else
              f"{name}: {error}, top-1 agrees on {agree:.0%}")
    return _check(name, not problems, detail, **values)


def input_dependence(reference: np.ndarray, floor: float = 1e-6) -> dict[str, Any]:
    """The PyTorch outputs must differ between images, or the comparison proves nothing."""
    if len(reference) < 2:
        return _check("outputs depend on the input", True, "one image: not checked", spread=None)
    spread = float(np.asarray(reference, np.float64).std(axis=0).max())
    ok = spread > floor
    detail = (f"outputs vary across images (spread {spread:.3g})" if ok else
              f"the PyTorch subnet gives the same output for every image (spread {spread:.3g}): "
              "its weights or BatchNorm statistics are broken")
    return _check("outputs depend on the input", ok, detail, spread=spread)


@dataclass
class Report:
    """The checks of one export; passes when every check does."""

    checks: list[dict[str, Any]] = field(default_factory=list)

    def add(self, check: dict[str, Any]) -> dict[str, Any]:
        self.checks.append(check)
        return check

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def failures(self) -> list[str]:
        return [c["detail"] for c in self.checks if not c["passed"]]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failures": self.failures(), "checks": self.checks}
