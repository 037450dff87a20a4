"""Scored subnets: what the problem hands an algorithm, and what an algorithm hands back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = ["Batch", "SearchOutcome"]


@dataclass
class Batch:
    """Scored subnets: canonical rows, named columns, constraint violation (0 = feasible)."""

    m: np.ndarray
    cols: dict[str, np.ndarray]
    violation: np.ndarray

    def __len__(self) -> int:
        return len(self.m)

    @property
    def feasible(self) -> np.ndarray:
        return self.violation <= 0

    def take(self, idx: np.ndarray) -> Batch:
        return Batch(self.m[idx], {k: v[idx] for k, v in self.cols.items()}, self.violation[idx])

    @staticmethod
    def concat(batches: Sequence[Batch], width: int = 46) -> Batch:
        """One batch of `batches` (an empty one `width` columns wide when there are none)."""
        batches = [b for b in batches if len(b)]
        if not batches:
            return Batch(np.zeros((0, width), np.int32), {}, np.zeros(0))
        keys = set(batches[0].cols).intersection(*(b.cols for b in batches[1:]))
        return Batch(np.concatenate([b.m for b in batches]),
                     {k: np.concatenate([b.cols[k] for b in batches]) for k in sorted(keys)},
                     np.concatenate([b.violation for b in batches]))


@dataclass
class SearchOutcome:
    """What a search algorithm hands back: every subnet it scored (its archive), the best-so-far
    history, and algorithm facts for the report."""

    archive: Batch
    history: list[float] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
