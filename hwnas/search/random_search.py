"""Random search: the baseline every search must beat at equal predictor calls."""

from __future__ import annotations

import numpy as np

from hwnas.latency.base import single_thread
from hwnas.search.operators import sample_mixed
from hwnas.search.problem import Batch, Problem, SearchOutcome

__all__ = ["random_search"]

def random_search(problem: Problem, n: int, seed: int = 0, batch: int = 1000,
                  graded: bool = True) -> SearchOutcome:
    """Score `n` random subnets (half uniform, half graded small-to-large when `graded`, else
    uniform over networks) in batches of `batch`."""
    rng = np.random.default_rng(seed)
    parts = []
    with single_thread():
        for lo in range(0, n, batch):
            k = min(batch, n - lo)
            m = sample_mixed(problem.space, k, rng) if graded else problem.space.sample_matrix(k, rng)
            parts.append(problem.evaluate(m))

    return SearchOutcome(Batch.concat(parts), [], {"samples": n, "graded": graded})
