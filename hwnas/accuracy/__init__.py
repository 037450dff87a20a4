"""Accuracy side of a run: the measured table, predictors that know their limits, selection.

Names load lazily (like `hwnas.supernet`), so importing one module of the package (export imports
`hwnas.accuracy.precision`) does not load the predictors.
"""

from __future__ import annotations

from hwnas.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "hwnas.accuracy.api": ("ACCURACY_PREDICTOR", "ensure_accuracy_predictor", "fit_accuracy_predictor",
                           "load_accuracy_predictor"),
    "hwnas.accuracy.predictors": ("AccuracyPredictor", "MLPEnsemblePredictor", "OFAMLPPredictor",
                                  "RidgePredictor", "accuracy_predictor_kinds", "load_predictor_file",
                                  "make_accuracy_predictor"),
    "hwnas.accuracy.select": ("cross_val_predict", "fit_best_accuracy", "regression_metrics"),
    "hwnas.accuracy.table": ("ACCURACY_TABLE", "accuracy_sample", "anchor_rows", "build_accuracy_table",
                             "measured_accuracy", "read_accuracy_table"),
})
