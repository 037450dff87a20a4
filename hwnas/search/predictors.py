"""The run's latency predictors, as the search loads them (files through the run's `RunFiles`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hwnas.errors import HwnasError, InputError

__all__ = ["PredictorMissing", "Predictor", "latency_predictor_path", "load_latency_predictor"]


class PredictorMissing(HwnasError):
    """A predictor the search needs has not been made yet."""


class Predictor(Protocol):
    def predict(self, archs: Any) -> np.ndarray: ...


def latency_predictor_path(run_dir: str | Path, device: str) -> Path:
    from hwnas.run import RunFiles

    return RunFiles(Path(run_dir)).latency_predictor(device)


def load_latency_predictor(run_dir: str | Path, device: str, width_mult: float | None = None) -> Predictor:
    """The device's latency predictor of the run, or a one-line error naming the command."""
    path = latency_predictor_path(run_dir, device)
    if not path.exists():
        raise PredictorMissing(f"no latency predictor for device '{device}' in {run_dir}: make it with "
                               f"`hwnas latency fit --run {run_dir} --device {device}`")
    from hwnas.latency import load_predictor

    pred = load_predictor(path)
    w = getattr(getattr(pred, "meta", None), "width_mult", None)
    if width_mult is not None and w is not None and float(w) != float(width_mult):
        raise InputError(f"{path} was fitted for width multiplier {w}, but the run's space has "
                         f"{width_mult}; refit it with `hwnas latency fit --run {run_dir} --device {device}`")
    return pred
