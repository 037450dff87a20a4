"""Latency predictors: fit a device's latency from measured subnets, predict it for many.

One module per kind, all `LatencyPredictor`s (JSON + npz on disk, never pickle):

- `AnalyticPredictor` (analytic): exact per-part costs -> small regularised regression;
- `LookupTablePredictor` (lut): sum of per-block costs, measured or fitted by NNLS;
- `MLPPredictor` (mlp): MLP ensemble on the architecture encoding;
- `HybridPredictor` (hybrid): analytic/lookup base x learned ratio;
- `TransferPredictor` (transfer): a source device's predictor adapted from a few rows.

`fit_best` picks among them by cross-validation; `hwnas.latency.api` holds what the CLI wraps
(`fit_from_table`, `predict_table`, `evaluate_predictor`, `fit_from_run`).
"""

from __future__ import annotations

from hwnas.latency.analytic import AnalyticPredictor, analytic_features
from hwnas.latency.api import evaluate_predictor, fit_from_run, fit_from_table, predict_table
from hwnas.latency.base import LatencyPredictor, PredictorMeta, load_predictor, predictor_kinds
from hwnas.latency.hybrid import HybridPredictor
from hwnas.latency.lut import LookupTablePredictor
from hwnas.latency.mlp import MLPPredictor
from hwnas.latency.select import cross_validate, default_candidates, fit_best
from hwnas.latency.transfer import TransferPredictor

__all__ = [
    "LatencyPredictor",
    "PredictorMeta",
    "load_predictor",
    "predictor_kinds",
    "AnalyticPredictor",
    "LookupTablePredictor",
    "MLPPredictor",
    "HybridPredictor",
    "TransferPredictor",
    "analytic_features",
    "cross_validate",
    "default_candidates",
    "fit_best",
    "fit_from_table",
    "fit_from_run",
    "predict_table",
    "evaluate_predictor",
]
