"""Search the supernet for the accuracy/latency Pareto front of a device.

`run_search` is the whole stage (what ``hwnas search`` calls). The parts: the problem definition
over predictors (`problem`), the algorithms behind one base class and registry (`algorithms`),
vectorised operators on the int matrix (`operators`), Once-for-All's constrained evolution
(`evolution`), NSGA-II (`nsga2`), Optuna samplers with shared storage (`optuna_search`),
Pareto/hypervolume helpers (`pareto`) and verification on the real device (`verify`). Accuracy
tables and predictors live in `hwnas.accuracy`.

Names are imported on first use, so `import hwnas.search.algorithms` (the CLI's ``--algo``
choices) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "ALGORITHMS": "hwnas.search.api", "SearchResult": "hwnas.search.api", "run_search": "hwnas.search.api",
    "ensure_accuracy_predictor": "hwnas.accuracy",
    "Problem": "hwnas.search.problem", "Batch": "hwnas.search.problem",
    "SearchOutcome": "hwnas.search.problem", "PredictorMissing": "hwnas.search.problem",
    "EvolutionSettings": "hwnas.search.evolution", "evolution_search": "hwnas.search.evolution",
    "NSGA2Settings": "hwnas.search.nsga2", "nsga2_search": "hwnas.search.nsga2",
    "optuna_search": "hwnas.search.optuna_search", "random_search": "hwnas.search.random_search",
    "front_mask": "hwnas.search.pareto", "hypervolume": "hwnas.search.pareto",
    "Verification": "hwnas.search.verify", "verify_candidates": "hwnas.search.verify",
    "SearchAlgorithm": "hwnas.search.algorithms", "get_algorithm": "hwnas.search.algorithms",
    "algorithm_names": "hwnas.search.algorithms",
}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'hwnas.search' has no attribute {name!r}")
