"""`hwnas profile --samples auto`: measure until the latency predictor stops getting better.

Every measurement costs the user device time, and with the runtime priors
(`hwnas.latency.priors`) a predictor often reaches its final quality from 10-20 subnets. So:

1. measure a small stratified set (`AutoSettings.start` subnets spread over MACs, min and max in);
2. fit the predictor (`fit_best`, cross-validated) and note its out-of-fold RMS log error;
3. stop when that error has not improved by `min_gain` (relative) over its best for `patience`
   batches in a row, or `max_samples` are measured, or the `budget_s` time is spent;
4. otherwise measure the next `batch` subnets *where the predictor is least sure* (active
   learning): the best few cross-validated candidates form a committee, each refitted on every
   row; a pool subnet's uncertainty is the spread of the committee's log-predictions. The
   picks are spread over the predicted latency range (one per bin) so a batch does not
   spend every measurement on one corner of the space.

`auto_profile` holds the loop and never touches a device: the caller gives it `measure(archs)`,
which makes it testable against any latency function; `profile_auto` runs it on a run's devices
with the profile stage's measurements (`hwnas.profiling.stage.measure_subnets`). It lives with the
latency predictors it fits: profiling below knows nothing of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from hwnas.errors import InputError

__all__ = ["AutoSettings", "AutoResult", "auto_profile", "profile_auto", "committee_spread", "pick_uncertain"]

MeasureFn = Callable[[list], np.ndarray]  # archs -> their measured ms (the same order)


@dataclass(frozen=True)
class AutoSettings:
    start: int = 10  # stratified subnets measured before the first fit
    batch: int = 5  # subnets measured between fits
    patience: int = 2  # batches without improvement before stopping
    min_gain: float = 0.03  # relative drop of the CV error that counts as an improvement
    max_samples: int = 100
    budget_s: float | None = None  # wall-clock budget; checked between batches
    committee: int = 4  # cross-validated candidates whose disagreement measures uncertainty
    pool: int = 2000  # candidate subnets the next batch is chosen from
    seed: int = 0

    def check(self) -> None:
        if self.start < 3 or self.batch < 1 or self.max_samples < self.start:
            raise InputError(f"auto sampling needs start >= 3, batch >= 1 and max_samples >= start, got "
                             f"{self.start}, {self.batch}, {self.max_samples}")
        if self.budget_s is not None and not self.budget_s > 0:
            raise InputError(f"the time budget must be positive seconds, got {self.budget_s}")


@dataclass
class AutoResult:
    samples: int  # subnets measured in all
    stopped: str  # why: "converged", "max_samples", "budget"
    chosen: str  # the last fit's predictor
    history: list[dict[str, Any]] = field(default_factory=list)  # per fit: n, cv rmse_log, within_10
    measured_ids: list[str] = field(default_factory=list)  # the subnets measured, in order


def committee_spread(committee: Sequence[Any], m: np.ndarray) -> np.ndarray:
    """Per row, the standard deviation of the committee's log-predictions (0 for one member)."""
    logs = np.stack([np.log(np.maximum(p.predict(m), 1e-12)) for p in committee])
    return logs.std(axis=0)


def pick_uncertain(spread: np.ndarray, center: np.ndarray, k: int) -> np.ndarray:
    """Indices of `k` rows: the most uncertain (`spread`) row of each of `k` equal-count bins of
    `center` (the predicted log-latency), so the picks cover the latency range."""
    k = min(k, len(spread))
    order = np.argsort(center, kind="stable")
    picks = []
    for chunk in np.array_split(order, k):
        if len(chunk):
            picks.append(int(chunk[np.argmax(spread[chunk])]))
    return np.asarray(picks, dtype=np.int64)


def auto_profile(space: Any, measure: MeasureFn, settings: AutoSettings = AutoSettings(), *,
                 n_classes: int = 1000, first: Sequence[Any] | None = None,
                 candidates: np.ndarray | None = None, priors: Sequence[Any] | None = None,
                 log: Callable[[str], Any] | None = None) -> AutoResult:
    """Measure subnets of `space` with `measure` until the predictor's CV error stops improving
    (the module docstring). `first`: the initial stratified subnets (default: `select_subnets`);
    `candidates`: flat rows to choose every later batch from (default: fresh samples of the
    space; a fixed set replays a measured table); `priors`: runtime priors (default: the shipped
    ones of the space's family)."""
    from hwnas.families import NetworkSpec
    from hwnas.latency.select import default_candidates, fit_best
    from hwnas.latency.priors import runtime_priors
    from hwnas.profiling.stage import select_subnets

    settings.check()
    t0 = time.monotonic()
    net = NetworkSpec(space.family.name, space.width_mult, n_classes)
    archs = list(first) if first is not None else select_subnets(space, settings.start, settings.seed,
                                                                  n_classes)
    ms = list(np.asarray(measure(archs), dtype=np.float64))
    priors = runtime_priors(net) if priors is None else list(priors)
    rng = np.random.default_rng(settings.seed + 1)
    best_err, stale, history = float("inf"), 0, []
    while True:
        m = space.to_matrix(archs).astype(np.int64)
        y = np.asarray(ms)
        pred, report = fit_best(m, y, net=net, priors=priors)
        err = float(report["chosen_metrics"]["rmse_log"])
        history.append({"n": len(archs), "cv_rmse_log": err, "cv_within_10":
                        float(report["chosen_metrics"]["within_10"]), "chosen": report["chosen"]})
        if log:
            log(f"{len(archs)} subnets: {report['chosen']}, CV RMS log error {err:.4f}")
        if err < best_err * (1 - settings.min_gain):
            best_err, stale = err, 0
        else:
            stale += 1
        stopped = ("converged" if stale >= settings.patience else
                   "max_samples" if len(archs) >= settings.max_samples else
                   "budget" if settings.budget_s is not None and time.monotonic() - t0 >= settings.budget_s
                   else None)
        if stopped:
            return AutoResult(len(archs), stopped, report["chosen"], history, [a.id for a in archs])
        cands = default_candidates(len(archs), net=net, priors=priors)
        ranked = sorted(report["candidates"], key=lambda r: r["rmse_log"])[:settings.committee]
        committee = [cands[r["index"]].clone().fit(m, y) for r in ranked]
        pool = _pool(space, settings.pool, rng, {a.id for a in archs}, candidates)
        if not len(pool):
            return AutoResult(len(archs), "max_samples", report["chosen"], history, [a.id for a in archs])
        take = min(settings.batch, settings.max_samples - len(archs))
        at = pick_uncertain(committee_spread(committee, pool), np.log(pred.predict(pool)), take)
        new = space.from_matrix(pool[at])
        archs += new
        ms += list(np.asarray(measure(new), dtype=np.float64))


def _pool(space: Any, n: int, rng: np.random.Generator, measured: set[str],
          candidates: np.ndarray | None = None) -> np.ndarray:
    """Distinct unmeasured subnets: of `candidates`, else `n` sampled half uniform, half graded
    over size."""
    from hwnas.families.sampling import sample_mixed

    drawn = sample_mixed(space, n, rng) if candidates is None else candidates
    m = np.unique(np.asarray(drawn, dtype=np.int64), axis=0)
    keep = [i for i, a in enumerate(space.from_matrix(m)) if a.id not in measured]
    return m[keep]


def profile_auto(run: Any, devices: Sequence[str], settings: AutoSettings, *,
                 devices_file: Any = None, references: Sequence[str] = (),
                 reference_resolution: int | None = None, protocol: Any = None,
                 progress: Callable[..., Any] | None = None, blocks: bool = False,
                 recalibrate: bool = False, log: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
    """``hwnas profile --samples auto``: each device, one after another, measured by `auto_profile`
    into the run's store (then its `references` and `blocks`, as `hwnas.profiling.stage.profile`
    does); one summary per device, as `profile`'s plus ``auto`` (subnets taken, why it stopped,
    the CV history). `log` hears of every fit."""
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import check_devices, measure_subnets, profile
    from hwnas.profiling.store import MeasurementStore

    settings.check()
    protocol = protocol or ProtocolSettings()
    store = MeasurementStore(run.run_dir)
    out = []
    for dev in check_devices(devices, devices_file, references):
        before = len(store.keys(dev.name, "subnet"))

        def measure(archs: list, name: str = dev.name) -> np.ndarray:
            rows = measure_subnets(run, name, archs, devices_file=devices_file, protocol=protocol,
                                   progress=progress, recalibrate=recalibrate)
            return rows["corrected_ms"].to_numpy(dtype=np.float64)

        result = auto_profile(run.space, measure, settings, n_classes=run.n_classes,
                              log=(lambda msg, name=dev.name: log(f"{name}: {msg}")) if log else None)
        measured = len(store.keys(dev.name, "subnet")) - before
        summary = {"device": dev.name, "measured": measured, "skipped": result.samples - measured}
        if references or blocks:
            (extra,) = profile(run, [dev.name], 0, devices_file=devices_file, references=references,
                               reference_resolution=reference_resolution, protocol=protocol,
                               progress=progress, blocks=blocks, recalibrate=recalibrate)
            summary["measured"] += extra["measured"]
            summary["skipped"] += extra["skipped"]
        out.append({**summary, "auto": {"samples": result.samples, "stopped": result.stopped,
                                        "chosen": result.chosen, "history": result.history}})
    return out
