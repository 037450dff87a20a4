"""Check search winners on the real device: predicted latency is a promise, measurement decides.

Candidates are measured best-first. One that breaks a budget when measured is dropped and the next
is measured instead, so a returned subnet has always met the budget on the device.

Acceptance allows for the protocol's own noise (picking the lowest of noisy measurements near a
limit is the winner's curse): a subnet is accepted only if its upper bound

    ucb_ms = measured_ms * (1 + margin + 2 * rel_se)

is within the budget, where `rel_se` is the relative standard error of this measurement (from the
spread of its per-round ratios) and `margin` (default 2%) covers what one session cannot see of
the next (anchor and machine state). search.json records the rule and each subnet's bound.
Replacements
are chosen with what was learned: if the predictor has underestimated by up to x%, candidates
whose prediction plus x%, the margin and two typical standard errors breaks the budget are passed
over (unless nothing else is left), so a predictor that runs low near the budget does not cost a
measurement per candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from hwnas.search.problem import Batch, Problem, ms_key
from hwnas.search.risk import DEFAULT_MARGIN

__all__ = ["Measure", "Verification", "verify_candidates", "device_measure", "device_paired", "acceptance_rule",
           "DEFAULT_MARGIN"]

# (device, archs of the run's family) -> measured ms, or (measured ms, relative standard errors)
Measure = Callable[[str, Sequence[Any]], "np.ndarray | tuple[np.ndarray, np.ndarray]"]


def acceptance_rule(margin: float) -> str:
    return f"measured_ms * (1 + {margin:g} + 2 * rel_se) <= budget_ms"


@dataclass
class Verification:
    """`records`: one per measured candidate and device; `accepted`: candidate positions (in the
    order given) that met every budget, best first."""

    records: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    measured: dict[int, dict[str, float]] = field(default_factory=dict)

    @property
    def n_measured(self) -> int:
        return len(self.measured)

    def first_try_share(self, k: int) -> float | None:
        """Share of the first `k` candidates measured that met the budget (the predictor's own
        constraint satisfaction, before replacements)."""
        first = sorted(self.measured)[:k]
        if not first:
            return None
        return sum(i in self.accepted for i in first) / len(first)


def device_measure(run, devices_file=None, protocol=None, progress: Callable[..., Any] | None = None
                   ) -> Measure:
    """Measure with the device's backend into the run's store (`hwnas.profiling.measure_subnets`:
    compiled and timed in a measuring session beside the run's reference, as profiling and export
    measure); the store keeps what was measured, so re-verifying the same subnet is free."""
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import measure_subnets

    def measure(device: str, archs: Sequence[Any]) -> np.ndarray:
        def cb(dev: str, done: int, total: int, key: str) -> None:
            if progress:
                progress("verify", device=dev, done=done, total=total, key=key)

        df = measure_subnets(run, device, list(archs), devices_file=devices_file,
                             protocol=protocol or ProtocolSettings(), progress=cb)
        se = df["rel_se"].to_numpy(dtype=np.float64) if "rel_se" in df else np.zeros(len(df))
        return df["corrected_ms"].to_numpy(dtype=np.float64), np.nan_to_num(se)

    return measure


def device_paired(run, devices_file=None, protocol=None) -> Callable[[str, Any, str], tuple[float, float]]:
    """A subnet timed together with a reference model on the device (`hwnas.profiling.measure_paired`):
    (its latency / the model's, the ratio's relative standard error)."""
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import measure_paired

    def paired(device: str, arch: Any, reference: str) -> tuple[float, float]:
        return measure_paired(run, device, arch, reference, devices_file=devices_file,
                              protocol=protocol or ProtocolSettings())

    return paired


def _measured(result) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(result, tuple):
        ms, se = result
        return np.asarray(ms, dtype=np.float64), np.asarray(se, dtype=np.float64)
    ms = np.asarray(result, dtype=np.float64)
    return ms, np.zeros(len(ms))


def verify_candidates(problem: Problem, candidates: Batch, top_k: int, measure: Measure, *,
                      max_measure: int | None = None, margin: float = DEFAULT_MARGIN) -> Verification:
    """Measure candidates (best first) on every budgeted device until `top_k` meet all budgets
    with the noise allowance (see the module doc), the candidates run out, or `max_measure`
    (default 3 * top_k) have been measured."""
    out = Verification()
    max_measure = max_measure or 3 * top_k
    devices = list(problem.budgets)
    archs = problem.space.from_matrix(candidates.m)
    pred = {d: candidates.cols[ms_key(d)] for d in devices}
    ratio = {d: 1.0 for d in devices}  # worst measured / predicted seen so far (>= 1)
    ses: dict[str, list[float]] = {d: [] for d in devices}  # standard errors of the measurements so far
    left = list(range(len(candidates)))
    while len(out.accepted) < top_k and left and out.n_measured < max_measure:
        want = min(top_k - len(out.accepted), max_measure - out.n_measured)
        # what acceptance will ask of a replacement: the bias seen so far, the margin and two of
        # the standard errors measurements here have had
        need = {d: ratio[d] * (1 + margin + 2 * (float(np.median(ses[d])) if ses[d] else 0.0))
                for d in devices}
        plausible = [i for i in left if all(pred[d][i] * need[d] <= problem.budgets[d] for d in devices)]
        picks = (plausible or left)[:want]
        left = [i for i in left if i not in picks]
        got = {d: _measured(measure(d, [archs[i] for i in picks])) for d in devices}
        for j, i in enumerate(picks):
            ms = {d: float(got[d][0][j]) for d in devices}
            ucb = {d: ms[d] * (1 + margin + 2 * float(got[d][1][j])) for d in devices}
            ok = all(ucb[d] <= problem.budgets[d] for d in devices)
            out.measured[i] = ms
            if ok:
                out.accepted.append(i)
            for d in devices:
                ratio[d] = max(ratio[d], ms[d] / pred[d][i])
                ses[d].append(float(got[d][1][j]))
                out.records.append({"id": archs[i].id, "device": d, "predicted_ms": float(pred[d][i]),
                                    "measured_ms": ms[d], "rel_se": float(got[d][1][j]), "ucb_ms": ucb[d],
                                    "budget_ms": float(problem.budgets[d]),
                                    "error_pct": 100.0 * (ms[d] / pred[d][i] - 1.0),
                                    "within_budget": ms[d] <= problem.budgets[d], "accepted": ok})
    out.accepted.sort()
    return out
