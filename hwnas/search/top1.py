"""The top-1 objective: the accuracy predictor's top-1, made pessimistic and memoised.

With `risk` k > 0 and a predictor that knows its spread, the objective is ``mean - k * sigma``: a
search that maximises the mean is drawn to where the predictor errs high (the winner's curse),
most of all where it extrapolates. In a reduced precision (`hwnas.search.precision.PrecisionDrop`)
the predicted drop is taken off and the sigmas add in quadrature. A batch on the fast path reads
its accuracy features (or a ridge predictor's pair tables) from the `FastPath`'s gathers.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hwnas.search.fused import FastPath
from hwnas.search.indexed import SlotIndex

__all__ = ["Top1Model", "Top1Memo"]


class Top1Model:
    """Top-1 of rows from `accuracy` (a predictor; ``predict_with_std`` when it knows its
    spread), less `risk` sigmas, less `drop`'s predicted drop when it is set."""

    def __init__(self, accuracy: Any, risk: float = 0.0, drop: Any = None) -> None:
        self.accuracy, self.risk, self.drop = accuracy, risk, drop

    def mean_std(self, m: np.ndarray, fast: FastPath | None = None, idx: SlotIndex | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The predictor's (top-1, sigma) of rows `m`, by the fastest path (sigma 0 when it has
        none). `fast` and `idx`: the problem's fast path and the batch's slot index, when known."""
        got = fast.top1_mean_std(idx) if fast is not None and idx is not None else None
        if got is not None:
            return got
        if hasattr(self.accuracy, "predict_with_std"):
            mean, std = self.accuracy.predict_with_std(m)
        else:
            mean, std = self.accuracy.predict(m), np.zeros(len(m))
        return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)

    def objective(self, m: np.ndarray, fast: FastPath | None = None, idx: SlotIndex | None = None
                  ) -> np.ndarray:
        """What a search maximises for rows `m`."""
        if self.drop is not None:
            mean, std = self.mean_std(m, fast, idx)
            return self.drop.objective(mean, std, m, self.risk)
        risk = self.risk > 0 and hasattr(self.accuracy, "predict_with_std")
        got = fast.top1_mean_std(idx) if fast is not None and idx is not None else None
        if got is not None:
            mean, std = got
            return mean - self.risk * std if risk else mean
        if risk:
            mean, std = self.accuracy.predict_with_std(m)
            return np.asarray(mean, dtype=np.float64) - self.risk * np.asarray(std, dtype=np.float64)
        return np.asarray(self.accuracy.predict(m), dtype=np.float64)  # (the mean alone: cheaper)

    def estimate(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the predictor's own top-1, no risk penalty: what is reported; its one-sigma uncertainty,
        NaN if it has none) of rows `m`, in one call; with `drop`: minus the predicted drop, the
        sigmas added in quadrature."""
        m = np.asarray(m, dtype=np.int32)
        if self.drop is not None:
            mean, std = self.mean_std(m)
            return self.drop.estimate(mean, std, m)
        if hasattr(self.accuracy, "predict_with_std"):
            mean, std = self.accuracy.predict_with_std(m)
            return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
        return np.asarray(self.accuracy.predict(m), dtype=np.float64), np.full(len(m), np.nan)


class Top1Memo:
    """Objective values by network: an evolutionary search keeps re-breeding the networks it
    already has (about two thirds of OFA's 50,000 children are repeats), and the accuracy
    predictor is most of a search's time."""

    LIMIT = 2_000_000  # rows kept at most: bounds the memory of very long searches

    def __init__(self) -> None:
        self.values: dict[bytes, float] = {}

    def clear(self) -> None:
        self.values.clear()

    def __call__(self, m: np.ndarray, idx: SlotIndex | None,
                 score: Callable[[np.ndarray, SlotIndex | None], np.ndarray]) -> tuple[np.ndarray, int]:
        """(the values of rows `m`, how many rows `score` computed: those not known yet)."""
        rows = np.ascontiguousarray(m, dtype=np.int32)
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel().tolist()
        memo = self.values
        if len(memo) > self.LIMIT:
            memo.clear()
        missing = {k: i for i, k in enumerate(keys) if k not in memo}
        if missing:
            pos = np.fromiter(missing.values(), dtype=np.int64, count=len(missing))
            memo.update(zip(missing, score(rows[pos], None if idx is None else idx.take(pos)).tolist()))
        out = np.fromiter(map(memo.__getitem__, keys), dtype=np.float64, count=len(keys))
        return out, len(missing)
