"""The measurement protocol: how hwnas times a model, identically on every backend.

Backends only compile and load (`hwnas.devices.base`); this module is the one place that times: a
seeded input staged outside the timed call, thread counts re-applied and read back before every
timed block, warm-up by count and by time, `perf_counter_ns` (CPU) or CUDA events (GPU) around each
inference, summarised as `LatencyStats`. `measure_many` corrects for the machine's drift: shuffled
rounds with a small reference model timed beside every candidate's block; the median per-round
candidate/reference ratio times the device's calibrated anchor (`hwnas.profiling.anchors`) is the
corrected latency. A candidate whose run raises stops the measurement with a `DeviceError` naming it.

The protocol's design, item by item, and how well it holds: docs/devices.md, 'Measurement protocol'.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from typing import Callable, Mapping, Sequence

import numpy as np

from hwnas.devices.base import Runner, one_line
from hwnas.devices.protocol_settings import ProtocolSettings
from hwnas.devices.stats import LatencyStats, summarize
from hwnas.errors import DeviceError, HwnasError, InputError

__all__ = ["measure", "measure_many", "ProgressFn"]

ProgressFn = Callable[[int, int, str], None]  # progress(done, total, candidate_id)


def _check(**values: float) -> None:
    """The settings' bounds, defined once (`ProtocolSettings`): one line naming the first outside them."""
    ProtocolSettings(**values)


_DEFAULT = ProtocolSettings()


def _timed_block(runner: Runner, prepared: object, runs: int, warmup_runs: int,
                 warmup_s: float) -> tuple[list[float], int]:
    """activate -> warm up (by count AND time) -> `runs` timed single inferences."""
    runner.activate()
    warm = 0
    start = time.perf_counter()
    while warm < warmup_runs or time.perf_counter() - start < warmup_s:
        runner.time_once(prepared)  # time_once (not invoke): GPU runners sync per call
        warm += 1
    collecting = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside one timed run is not the model's time
    try:
        return [runner.time_once(prepared) for _ in range(runs)], warm
    finally:
        if collecting:
            gc.enable()


class _Inputs:
    """One seeded input per (shape, dtype), shared by all runners that need it."""

    def __init__(self, seed: int):
        self.seed = seed
        self.cache: dict[tuple, np.ndarray] = {}

    def __call__(self, runner: Runner) -> np.ndarray:
        key = (runner.input_shape, runner.input_dtype.str)
        if key not in self.cache:
            self.cache[key] = runner.make_input(self.seed)
        return self.cache[key]


def measure(runner: Runner, *, runs: int = 30, warmup_runs: int = 10, warmup_s: float = 0.5,
            reference: Runner | None = None, seed: int = 0) -> LatencyStats:
    """Time one loaded model: warm-up, then `runs` single inferences.

    Without a reference, `corrected_ms` equals the median. With one, this is `measure_many` with
    a single candidate and one round (R C R).
    """
    if reference is not None:
        return measure_many({"model": runner}, reference, rounds=1, runs=runs,
                            warmup_runs=warmup_runs, warmup_s=warmup_s, seed=seed)["model"]
    _check(runs=runs, warmup_runs=warmup_runs, warmup_s=warmup_s, seed=seed)
    try:
        samples, warm = _timed_block(runner, runner.prepare(_Inputs(seed)(runner)), runs,
                                     warmup_runs, warmup_s)
    except HwnasError:
        raise
    except Exception as err:
        raise DeviceError(f"measuring on device '{runner.device.name}' failed: "
                          f"{one_line(err)}") from err
    return summarize(samples, warmup=warm, rounds=1, **runner.how())


def measure_many(runners: Mapping[str, Runner], reference: Runner, *, rounds: int = _DEFAULT.rounds,
                 runs: int = _DEFAULT.runs, warmup_runs: int = _DEFAULT.warmup_runs,
                 warmup_s: float = _DEFAULT.warmup_s, rewarm_runs: int = _DEFAULT.rewarm_runs,
                 ref_runs: int = _DEFAULT.ref_runs, ref_warmup_runs: int = _DEFAULT.ref_warmup_runs,
                 seed: int = _DEFAULT.seed,
                 anchor_ms: float | None = None, progress: ProgressFn | None = None
                 ) -> dict[str, LatencyStats]:
    """Time many loaded models with shuffled rounds and an interleaved reference (see above).

    `runs` is per candidate per round (n = rounds * runs). `progress(done, total, id)` is called
    after every candidate block (total = rounds * len(runners)). `anchor_ms`: the reference
    latency that turns ratios into `corrected_ms` (default: this call's reference median).
    Returns one `LatencyStats` per id, in the input order; raises `DeviceError` naming the
    candidate that failed.
    """
    _check(rounds=rounds, runs=runs, warmup_runs=warmup_runs, warmup_s=warmup_s,
           rewarm_runs=rewarm_runs, ref_runs=ref_runs, ref_warmup_runs=ref_warmup_runs,
           seed=seed)  # numpy's generators refuse negative seeds
    if anchor_ms is not None and not anchor_ms > 0:
        raise InputError(f"anchor_ms must be a positive latency, got {anchor_ms}")
    ids = list(runners)
    for cid in ids:
        if runners[cid].device.name != reference.device.name:
            raise DeviceError(f"candidate '{cid}' runs on device '{runners[cid].device.name}' but "
                              f"the reference on '{reference.device.name}'; both must share one")
    if not ids:
        return {}
    inputs = _Inputs(seed)
    order_rng = random.Random(seed)
    ref_all: list[float] = []
    ref_prepared = reference.prepare(inputs(reference))

    def reference_block() -> list[float]:
        try:
            samples, _ = _timed_block(reference, ref_prepared, ref_runs, ref_warmup_runs, 0.0)
        except HwnasError as err:
            raise DeviceError(f"the reference model failed: {err}") from err
        except Exception as err:
            raise DeviceError(f"the reference model failed on device "
                              f"'{reference.device.name}': {one_line(err)}") from err
        ref_all.extend(samples)
        return samples

    samples: dict[str, list[float]] = {cid: [] for cid in ids}
    near: dict[str, list[float]] = {cid: [] for cid in ids}
    ratios: dict[str, list[float]] = {cid: [] for cid in ids}
    warm: dict[str, int] = {}
    done, total = 0, rounds * len(ids)
    for r in range(rounds):
        order = ids[:]
        order_rng.shuffle(order)
        before = reference_block()
        for cid in order:
            runner = runners[cid]
            first = cid not in warm
            try:
                block, n_warm = _timed_block(runner, runner.prepare(inputs(runner)), runs,
                                             warmup_runs if first else rewarm_runs,
                                             warmup_s if first else 0.0)
            except HwnasError as err:
                raise DeviceError(f"measuring candidate '{cid}' failed (round {r + 1}): "
                                  f"{err}") from err
            except Exception as err:
                raise DeviceError(f"measuring candidate '{cid}' on device "
                                  f"'{runner.device.name}' failed (round {r + 1}): "
                                  f"{one_line(err)}") from err
            after = reference_block()
            samples[cid] += block
            near[cid] += before + after
            ratios[cid].append(statistics.median(block) / statistics.median(before + after))
            warm.setdefault(cid, n_warm)  # the full warm-up before the first block
            before = after
            done += 1
            if progress is not None:
                progress(done, total, cid)
    ref_median = anchor_ms if anchor_ms is not None else statistics.median(ref_all)
    return {cid: summarize(samples[cid], warmup=warm[cid],
                           corrected_ms=statistics.median(ratios[cid]) * ref_median,
                           ref_median_ms=ref_median, ref_ms=near[cid], rounds=rounds,
                           rel_se=median_rel_se(ratios[cid]), **runners[cid].how())
            for cid in ids}


def median_rel_se(values: Sequence[float]) -> float:
    """Relative standard error of the median of `values` (1.2533 sigma / sqrt(n) for normal
    noise, with sigma from the MAD so one disturbed round does not inflate it)."""
    if len(values) < 2:
        return 0.0
    a = np.asarray(values, dtype=np.float64)
    med = float(np.median(a))
    sigma = 1.4826 * float(np.median(np.abs(a - med)))
    return 1.2533 * sigma / math.sqrt(len(a)) / med if med > 0 else 0.0
