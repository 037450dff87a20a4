"""Search the supernet for the accuracy/latency Pareto front of a device.

`run_search(run_dir, SearchSettings(...))` is the whole stage (what ``hwnas search`` calls; the
settings are checked once, in `settings`, by the rules of `checks`). The parts: the problem over
predictors (`problem`, made of `goals`, `costs`, `top1`, `precision`'s drop model and `usage`;
it scores `batch`es), the algorithms behind one base class and registry (`algorithms`),
vectorised operators on the int matrix (`operators`), Once-for-All's constrained evolution
(`evolution`), NSGA-II (`nsga2`), Optuna samplers with shared storage (`optuna_search`),
Pareto/hypervolume helpers (`pareto`) and verification on the real device (`verify`). The fast
path of every family with a slot layout (`hwnas.families.slots`): the layout over a space's
choices (`slots`), exact tables of additive models (`tabulate`), choice-index rows and their
breeding (`indexed`) and one fused gather per batch for every cost column and the accuracy
features (`fused`). Accuracy tables and predictors live in `hwnas.accuracy`.

Names are imported on first use, so `import hwnas.search.algorithms` (the CLI's ``--algo``
choices) stays cheap.
"""

from __future__ import annotations

from hwnas.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "hwnas.search.api": ("ALGORITHMS", "SearchResult", "SearchHooks", "run_search"),
    "hwnas.search.settings": ("SearchSettings",),
    "hwnas.accuracy": ("ensure_accuracy_predictor",),
    "hwnas.search.problem": ("Problem", "Batch", "SearchOutcome", "PredictorMissing"),
    "hwnas.search.algorithms": ("SearchAlgorithm", "get_algorithm", "algorithm_names"),
    "hwnas.search.evolution": ("EvolutionSettings", "evolution_search"),
    "hwnas.search.nsga2": ("NSGA2Settings", "nsga2_search"),
    "hwnas.search.optuna_search": ("optuna_search",),
    "hwnas.search.random_search": ("random_search",),
    "hwnas.search.pareto": ("front_mask", "hypervolume"),
    "hwnas.search.verify": ("Verification", "verify_candidates"),
})
