"""How much predicting a search did: rows and batches through the accuracy predictor and the cost
models, and the seconds spent in each, so algorithms compare at equal predictor calls and a
search's time splits into predicting and the algorithm's own bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PredictorUsage"]


@dataclass
class PredictorUsage:
    acc_calls: int = 0  # rows asked of the top-1 objective
    acc_batches: int = 0
    acc_computed: int = 0  # rows actually run through the accuracy predictor (not memoised)
    cost_calls: int = 0
    cost_batches: int = 0
    acc_s: float = 0.0  # seconds in the accuracy predictor (features included)
    cost_s: float = 0.0  # seconds in the cost models (latency predictors, MACs, params)

    def reset(self) -> None:
        self.acc_calls = self.acc_batches = self.acc_computed = self.cost_calls = self.cost_batches = 0
        self.acc_s = self.cost_s = 0.0

    def scored_elsewhere(self, rows: int, batches: int) -> None:
        """Count rows other processes scored on copies of the problem (Optuna's workers), each row
        once through every predictor."""
        self.acc_calls += rows
        self.acc_computed += rows
        self.cost_calls += rows
        self.acc_batches += batches
        self.cost_batches += batches

    def as_dict(self) -> dict[str, int]:
        return {"predictor_calls": self.acc_calls, "accuracy_batches": self.acc_batches,
                "predictor_computed": self.acc_computed, "cost_calls": self.cost_calls,
                "cost_batches": self.cost_batches}

    def time_split(self, search_s: float) -> dict[str, float]:
        """Seconds of a search spent in the accuracy predictor, in the cost models (latency
        predictors, MACs, params) and in the algorithm's own bookkeeping (the rest)."""
        return {"accuracy_predictor_s": round(self.acc_s, 4), "latency_predictor_s": round(self.cost_s, 4),
                "bookkeeping_s": round(max(search_s - self.acc_s - self.cost_s, 0.0), 4)}
