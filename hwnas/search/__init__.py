"""Search the supernet for the accuracy/latency Pareto front of a device.

`run_search` is the whole stage (what ``hwnas search`` calls). The parts: the problem definition over predictors (`problem`), vectorised operators
on the int matrix (`operators`), Once-for-All's constrained evolution (`evolution`), NSGA-II
(`nsga2`), Optuna samplers with shared storage (`optuna_search`), Pareto/hypervolume helpers
(`pareto`) and verification on the real device (`verify`). Accuracy tables and predictors live
in `hwnas.accuracy`.
"""

from __future__ import annotations

from hwnas.accuracy import ensure_accuracy_predictor
from hwnas.search.api import ALGORITHMS, SearchResult, run_search
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.nsga2 import NSGA2Settings, nsga2_search
from hwnas.search.optuna_search import optuna_search
from hwnas.search.pareto import front_mask, hypervolume
from hwnas.search.problem import Batch, PredictorMissing, Problem, SearchOutcome
from hwnas.search.random_search import random_search
from hwnas.search.verify import Verification, verify_candidates

__all__ = [
    "ALGORITHMS", "SearchResult", "run_search", "ensure_accuracy_predictor",
    "Problem", "Batch", "SearchOutcome", "PredictorMissing",
    "EvolutionSettings", "evolution_search", "NSGA2Settings", "nsga2_search", "optuna_search",
    "random_search", "front_mask", "hypervolume", "Verification", "verify_candidates",
]
