"""Ties, measured and predicted: a faster model at an accuracy nobody can distinguish is the better
answer.

Measured: among the returned subnets, those whose test top-1 the test split cannot tell from the
best one's; the fastest of them ships first, and the summary names the tie. Predicted: candidates
whose predicted top-1 is within the accuracy predictor's out-of-fold error of the best are measured
fastest first, so the first tries are not the ones nearest the budget, where the latency predictor's
underestimates gather.

Two subnets are tied when their top-1 differ by at most one standard error of the difference,
``sqrt(se_a^2 + se_b^2)`` with ``se = 100 * sqrt(p (1 - p) / n)`` on the `n` test images (the
unpaired form: on the same images the paired one is smaller, so this calls a tie a little more
readily).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

__all__ = ["TIE_RULE", "PREDICTED_TIE_RULE", "top1_se", "order_ties", "order_predicted_ties"]

TIE_RULE = "|top1_best - top1| <= sqrt(se_best^2 + se^2), se = 100 * sqrt(p * (1 - p) / n_test)"
PREDICTED_TIE_RULE = ("candidates with top1_objective_best - top1_objective <= the accuracy predictor's "
                      "out-of-fold MAE are measured first, by predicted latency / budget, lowest first")


def top1_se(top1: float, n: int) -> float:
    """Standard error (points) of a top-1 (%) measured on `n` images."""
    p = min(max(top1 / 100.0, 0.0), 1.0)
    return 100.0 * math.sqrt(p * (1 - p) / n) if n > 0 else math.inf


def order_ties(chosen: Sequence[int], top1: Mapping[int, float], ms: Mapping[int, float],
               n_test: Mapping[int, int], ids: Mapping[int, str]) -> tuple[list[int], dict[str, Any] | None]:
    """(`chosen` with the fastest subnet tied with the best first, the tie's record or None).
    `chosen`: rows by measured top-1, best first; `ms`: each row's measured latency; `n_test`:
    the test images each was evaluated on (a row without is never tied)."""
    if len(chosen) < 2 or chosen[0] not in n_test:
        return list(chosen), None
    best = chosen[0]
    se_best = top1_se(top1[best], n_test[best])
    tied = [i for i in chosen if i in n_test and i in ms
            and top1[best] - top1[i] <= math.hypot(se_best, top1_se(top1[i], n_test[i]))]
    fastest = min(tied, key=lambda i: ms[i])
    if fastest == best:
        return list(chosen), None
    record = {"rule": TIE_RULE, "best_top1": ids[best], "shipped": ids[fastest],
              "tied": [{"id": ids[i], "measured_top1": top1[i], "se": top1_se(top1[i], n_test[i]),
                        "n_test": n_test[i], "measured_ms": ms[i]} for i in tied],
              "message": (f"{ids[fastest]} ({top1[fastest]:.2f}%, {ms[fastest]:.3f} ms) is tied on test top-1 with "
                          f"{ids[best]} ({top1[best]:.2f}%, {ms[best]:.3f} ms): the difference "
                          f"{top1[best] - top1[fastest]:.2f} is within one standard error "
                          f"({math.hypot(se_best, top1_se(top1[fastest], n_test[fastest])):.2f}); "
                          f"the faster one goes first")}
    return [fastest] + [i for i in chosen if i != fastest], record


def order_predicted_ties(order: Sequence[int], objective: Mapping[int, float] | Any, load: Mapping[int, float] | Any,
                         delta: float) -> tuple[list[int], int]:
    """(`order` with the candidates tied with the best predicted one moved first, lowest `load`
    (predicted latency over budget) first; how many were tied). `order`: candidates best predicted
    first; `delta`: the accuracy predictor's out-of-fold MAE (0: no reordering)."""
    if not order or not delta > 0:
        return list(order), 0
    best = max(float(objective[i]) for i in order)
    tied = [i for i in order if best - float(objective[i]) <= delta]
    rest = [i for i in order if best - float(objective[i]) > delta]
    return sorted(tied, key=lambda i: float(load[i])) + rest, len(tied)
