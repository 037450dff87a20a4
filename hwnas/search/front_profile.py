"""Profile where the search decides: subnets spread along the predicted Pareto front.

A latency predictor fitted on random subnets misprices the subnets a search then picks: the front's
members (the most accurate for their latency) are unlike random ones, and a search favours exactly
those its predictor underprices. On this project's 2-core VM a fresh quickstart's picks measured
10-25 % over their predictions while its random subnets sat within ±10 %. Measuring a few subnets
along the predicted front and refitting puts training rows where the search looks
(`hwnas profile --front N`; a stage of `hwnas quickstart`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hwnas.errors import InputError

__all__ = ["front_subnets", "profile_front", "front_profiled"]


def front_subnets(run: Any, device: str, n: int, *, seed: int = 0) -> list[Any]:
    """`n` subnets of the front the run's predictors see for `device` (predicted top-1 against
    predicted latency, up to the slowest profiled subnet), spread evenly in predicted latency."""
    from hwnas.accuracy import load_accuracy_predictor
    from hwnas.profiling.store import read_measurements
    from hwnas.search.algorithms import get_algorithm
    from hwnas.search.api import _candidates as candidates
    from hwnas.search.problem import Problem, load_latency_predictor, ms_key
    from hwnas.search.settings import SearchSettings

    if n < 1:
        raise InputError(f"the front needs at least 1 subnet to profile, got {n}")
    measured = read_measurements(run.run_dir, device=device, kind="subnet")
    if measured.empty:
        raise InputError(f"run {run.run_dir} has no subnets measured on {device}: profile random ones first "
                         f"(`hwnas profile --run {run.run_dir} --device {device} --samples 60`)")
    if not run.files.accuracy_predictor.exists():
        raise InputError(f"run {run.run_dir} has no accuracy predictor, so it has no predicted front: "
                         f"`hwnas accuracy build --run {run.run_dir} --samples 200` first")
    budget = float(measured["corrected_ms"].max())
    problem = Problem(run.space, load_accuracy_predictor(run.run_dir),
                      {device: load_latency_predictor(run.run_dir, device, run.space.width_mult)},
                      {device: budget}, n_classes=run.n_classes)
    algorithm = get_algorithm("evolution")
    problem.prepare()
    algorithm.load()
    outcome, _ = algorithm.run(problem, SearchSettings(device, budget, seed=seed, pareto=True).request(run.run_dir),
                               None)
    _, table, on_front, _ = candidates(problem, outcome.archive, True, 1, {})  # the search's own front
    front = table.take(np.flatnonzero(on_front))
    order = np.argsort(front.cols[ms_key(device)], kind="stable")
    picks = order[np.unique(np.round(np.linspace(0, len(order) - 1, min(n, len(order)))).astype(int))]
    return run.space.from_matrix(front.m[picks])


def profile_front(run: Any, device: str, n: int, *, seed: int = 0, devices_file: Any = None,
                  protocol: Any = None, progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Measure `front_subnets` into the run's store (as profiling does; subnets already measured
    are kept) and refit `device`'s latency predictor on every subnet measured. Returns the fit's
    report with ``front``: the ids profiled."""
    from hwnas.latency.api import fit_from_run
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import measure_subnets

    if not run.files.latency_predictor(device).exists():  # the front is the predictors' own
        fit_from_run(run.run_dir, device, width_mult=run.space.width_mult, n_classes=run.n_classes, seed=seed)
    archs = front_subnets(run, device, n, seed=seed)
    measure_subnets(run, device, archs, devices_file=devices_file,
                    protocol=protocol or ProtocolSettings(seed=seed), progress=progress)
    pred, report = fit_from_run(run.run_dir, device, width_mult=run.space.width_mult, n_classes=run.n_classes,
                                seed=seed)
    pred.meta.notes.front = [a.id for a in archs]  # what `front_profiled` reads: a rerun skips the stage
    pred.save(report["path"])
    return {**report, "front": pred.meta.notes.front}


def front_profiled(run: Any, device: str) -> list[str] | None:
    """The ids `profile_front` measured for the device's current latency predictor, or None when
    that predictor was fitted without them."""
    from hwnas.latency import load_predictor

    path = run.files.latency_predictor(device)
    return load_predictor(path).meta.notes.front if path.exists() else None
