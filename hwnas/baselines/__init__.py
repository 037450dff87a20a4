"""Hand-designed networks trained alone on a run's data: what a user would ship without a search.

`train_baseline` trains a timm model from scratch with the documented `BaselineRecipe` and scores
it on the test split; the front is compared with these at equal measured latency.
"""

from hwnas.baselines.stage import profile_key, run_baselines, shipped_baselines, train_run_baseline
from hwnas.baselines.training import BaselineRecipe, BaselineResult, build_baseline, train_baseline

__all__ = ["BaselineRecipe", "BaselineResult", "build_baseline", "train_baseline", "profile_key",
           "run_baselines", "shipped_baselines", "train_run_baseline"]
