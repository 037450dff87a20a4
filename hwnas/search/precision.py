"""Searching in reduced precisions (bf16, INT8): which device each precision's latency and
accuracy come from, the top-1 drop it costs, and what search.json says about it.

A precision other than fp32 is scored on each device's variant (`precision_variant`:
``<device>-bf16`` / ``<device>-int8``): its latency predictor, and its top-1 is the fp32
accuracy predictor's minus a drop model measured on that variant (`hwnas.accuracy.int8`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from hwnas.errors import DeviceError
from hwnas.search.checks import SettingError, literal

__all__ = ["SEARCHED", "REDUCED", "PRECISIONS", "PrecisionDrop", "precision_variants", "drop_model",
           "precision_top1", "precision_report"]

SEARCHED = ("fp32", "bf16", "int8")  # the precisions a search scores subnets in (an archive tags each by index)
REDUCED = SEARCHED[1:]  # scored on a device's variant, top-1 minus a measured drop
PRECISIONS = (*SEARCHED, "auto")


class PrecisionDrop:
    """Top-1 in a reduced precision: the fp32 prediction minus `model`'s predicted drop
    (``predict_with_std(m) -> (drop, sigma)`` in top-1 points), the two sigmas in quadrature."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def objective(self, mean: np.ndarray, std: np.ndarray, m: np.ndarray, risk: float) -> np.ndarray:
        """The search objective: ``mean - drop``, less `risk` combined sigmas."""
        drop, dstd = self.model.predict_with_std(m)
        mean = mean - np.asarray(drop, np.float64)
        if risk > 0:
            return mean - risk * np.sqrt(np.nan_to_num(std) ** 2 + np.asarray(dstd) ** 2)
        return mean

    def estimate(self, mean: np.ndarray, std: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(top-1, combined sigma), as reported."""
        drop, dstd = self.model.predict_with_std(m)
        return mean - np.asarray(drop, np.float64), np.sqrt(std ** 2 + np.asarray(dstd, np.float64) ** 2)


def precision_variants(run, devices: list[str], precision: str, devices_file
                       ) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(precision -> device -> the device whose latency, measurements and accuracy drop that
    precision uses: the device itself in fp32, its variant (`precision_variant`) in bf16 / int8;
    the precisions `auto` leaves out -> why). A named precision a device has no variant for is one
    line naming the devices that have one."""
    from hwnas.devices import get_device
    from hwnas.devices.registry import precision_variant

    if precision == "fp32":
        return {"fp32": {d: d for d in devices}}, {}
    if precision != "auto":
        return {precision: {d: precision_variant(d, precision, devices_file) for d in devices}}, {}
    for d in devices:
        own = get_device(d, devices_file).precision
        if own != "fp32":
            raise SettingError(f"{{precision}} auto scores each subnet in every precision its device has a variant "
                               f"for, but '{d}' is a {own} device; name its fp32 device ({{precision}} {own} "
                               f"searches {own} only)", "precision")
    out, left_out = {"fp32": {d: d for d in devices}}, {}
    for p in REDUCED:
        found, missing = {}, []
        for d in devices:
            try:
                found[d] = precision_variant(d, p, devices_file)
            except DeviceError:
                missing.append(d)
        if missing:
            left_out[p] = f"no {p} variant of {', '.join(missing)}"
            continue
        for v in found.values():  # one never fitted here that this machine cannot profile or verify
            why = None if run.files.latency_predictor(v).exists() else get_device(v, devices_file).available()
            if why:
                left_out[p] = f"'{v}' has no latency predictor in this run and is not usable here: {why}"
                break
        else:
            out[p] = found
    if len(out) == 1:
        raise SettingError(f"{{precision}} auto has nothing to compare fp32 with: {literal('; '.join(left_out.values()))}; "
                           "search with {precision} fp32", "precision")
    return out, left_out


def drop_model(run, device: str, n: int, seed: int, devices_file, progress):
    """The top-1 drop model of reduced-precision `device` (its table measured first when short)."""
    from hwnas.accuracy.int8 import ensure_drop_model

    return ensure_drop_model(run, device, n, seed=seed, devices_file=devices_file, progress=progress)


def precision_top1(run, device: str, devices_file, progress) -> Callable[[Sequence[Any]], np.ndarray]:
    """Measured test top-1 of archs compiled for reduced-precision `device` (kept in its table)."""
    from hwnas.accuracy.int8 import precision_top1 as measure

    return lambda archs: measure(run, archs, device, devices_file=devices_file, progress=progress)


def precision_report(precision: str, precs: list[str], variants: dict[str, dict[str, str]],
                     drops: dict[str, Any], skipped: dict[str, str], left_out: dict[str, str]) -> dict[str, Any]:
    """search.json's ``precision`` block: which precisions were considered (and which `auto` left
    out, why), which were searched (a budget no subnet meets in one skips it), on which devices'
    predictors, and how bf16 / INT8 top-1 was estimated and measured."""
    out: dict[str, Any] = {"asked": precision, "considered": precs, "left_out": left_out or None,
                           "searched": [p for p in precs if p not in skipped],
                           "skipped": skipped or None, "latency_devices": variants}
    for p, drop in drops.items():
        out[f"{p}_accuracy"] = {
            "drop_model": drop.describe() if hasattr(drop, "describe") else {"kind": type(drop).__name__},
            "predicted": f"top1_pred of a row in {p} = the fp32 accuracy predictor's top-1 minus the predicted drop; "
                         "top1_std adds the drop's sigma in quadrature",
            "measured": f"measured_top1 of a row in {p} is the {p} artifact's own top-1 on the test split "
                        f"(compiled for the {p} device as an export for it is" +
                        (", calibrated on training images)" if p == "int8" else ")")}
    return out
