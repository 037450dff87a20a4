"""Accuracy side of a run: the measured table, predictors that know their limits, selection."""

from hwnas.accuracy.api import (ACCURACY_PREDICTOR, ensure_accuracy_predictor, fit_accuracy_predictor,
                                load_accuracy_predictor)
from hwnas.accuracy.predictors import (AccuracyPredictor, MLPEnsemblePredictor, OFAMLPPredictor, RidgePredictor,
                                       accuracy_predictor_kinds, load_predictor_file, make_accuracy_predictor)
from hwnas.accuracy.select import cross_val_predict, fit_best_accuracy, regression_metrics
from hwnas.accuracy.table import (ACCURACY_TABLE, accuracy_sample, build_accuracy_table, measured_accuracy,
                                 read_accuracy_table)

__all__ = [
    "ACCURACY_PREDICTOR", "ACCURACY_TABLE", "AccuracyPredictor", "MLPEnsemblePredictor", "OFAMLPPredictor",
    "RidgePredictor", "accuracy_predictor_kinds", "accuracy_sample", "build_accuracy_table",
    "cross_val_predict", "ensure_accuracy_predictor", "fit_accuracy_predictor", "fit_best_accuracy",
    "load_accuracy_predictor", "load_predictor_file", "make_accuracy_predictor", "measured_accuracy",
    "read_accuracy_table",
    "regression_metrics",
]
