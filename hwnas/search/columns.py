"""The columns of pareto.csv that other stages read (export, the dashboard): one spelling, beside
their writer (`hwnas.search.api`)."""

from __future__ import annotations

__all__ = ["TOP1_PRED", "TOP1_STD", "MEASURED_TOP1", "ms_pred", "ms_device", "measured_ms"]

TOP1_PRED = "top1_pred"  # the accuracy predictor's top-1 (%), not the risk-adjusted objective
TOP1_STD = "top1_std"
MEASURED_TOP1 = "measured_top1"  # on the test split, for verified rows


def ms_pred(device: str) -> str:
    """Predicted latency (ms) on `device`."""
    return f"ms_pred:{device}"


def ms_device(device: str) -> str:
    """The device whose latency `ms_pred(device)` holds: `device` itself, or its bf16 / INT8 variant
    for points of a precision-aware search (``--precision bf16|int8|auto``)."""
    return f"ms_device:{device}"


def measured_ms(device: str) -> str:
    """Measured, drift-corrected latency (ms) on `device`, for verified rows."""
    return f"measured_ms:{device}"
