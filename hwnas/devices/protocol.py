"""The measurement protocol: how hwnas times a model, identically on every backend.

Backends only compile and load (`hwnas.devices.base`); this module is the one place that times.

1. **Input.** One standard-normal input of the compiled shape per (shape, dtype), seeded, staged
   with `Runner.prepare` (host->device copies happen here, outside the timed call).
2. **Threads.** Before every timed block the runner's `activate()` re-applies the device's
   intra-op thread count and reads it back from the runtime (torch: `torch.get_num_threads()`
   after `set_num_threads`; ONNX Runtime: the session's `intra_op_num_threads`; OpenVINO: the
   compiled model's `INFERENCE_NUM_THREADS`; ExecuTorch: the XNNPACK thread pool's size). A
   mismatch raises; the verified count is recorded in `LatencyStats.threads`.
3. **Warm-up.** Before every timed block: at least `warmup_runs` runs *and* at least `warmup_s`
   seconds, whichever takes longer, so small models warm for long enough and large ones still
   get several runs (allocator, caches, JIT kernel selection, CPU frequency).
4. **Timing.** CPU: `time.perf_counter_ns` around each single inference, with Python's garbage
   collector paused during the timed runs (as `timeit` does). GPU: the runner's own
   `time_once` - CUDA events recorded on the work's stream after a synchronize, waiting for the
   end event. One sample = one inference at the device's batch size.
5. **Statistics** (`LatencyStats`): median, mean, std (ddof=1), p90, p99 (linear interpolation),
   min, n, cv = std/mean, and how the numbers were taken (device, backend, threads, batch,
   precision, resolution, host, timer, software versions).
6. **Drift correction** (`measure_many`). Shared machines drift by tens of percent within
   minutes, which plain medians cannot tell from model differences: two passes over 400 OFA
   subnets (ONNX Runtime, 1 thread, 30-run medians) disagreed by 13% (median); shuffled rounds
   plus normalising by a reference cut that to 2.6%. So candidates are measured in `rounds`
   rounds, each in a fresh random order, and a fixed small reference model is timed right before
   and after every candidate's block (R C1 R C2 R ... Cn R; neighbouring candidates share the
   reference block between them). For each round::

       ratio_r = median(candidate samples in round r) / median(reference samples just before
                                                                 and just after that block)

   and ``corrected_ms = median_r(ratio_r) * anchor_ms``. The ratio is the drift-free quantity;
   the anchor only puts it back in milliseconds, so it must be the *same* number for every
   measurement that is compared: the profiler passes the device's calibrated reference latency
   (`hwnas.profiling.anchors`), kept in the run and shared by all runs on the host. Without an
   anchor, the median of all reference samples of this call is used (then two sessions differ by
   the machine's state: 2-4% between two passes measured on this 2-core VM).
   A candidate's first block warms up fully (item 3); its later blocks re-warm with
   `rewarm_runs` runs only (allocator and kernels are warm; this refreshes caches), which makes
   many short rounds cheap. Many rounds matter more than many runs: on this VM, 9 rounds of 10
   runs cut the pass-to-pass disagreement of the ratio of 3 rounds (ORT, 30 subnets: 2.4% ->
   0.9% median), while 5 rounds of 20 runs did not help - the noise is the machine's state from
   second to second, which only more, separate looks average out. With the default 15 rounds and
   the host's anchor, two processes agreed to 1.5% (ORT), 1.7% (OpenVINO), 1.4% (ExecuTorch) and
   2.8% (PyTorch eager) median, where raw medians disagreed by 5-13%
   (experiments/results/devices.json). What it cannot do: on a noisier host (a 2-core AMD VM) the
   candidates' raw medians followed the small reference's with an elasticity of 0.4-0.6, not 1, and
   a 15-round measurement spread ~10% between passes whatever the reference
   (experiments/bench_reference_size.py): there one session's number is good to about +-10%.
   Raw statistics pool the candidate's samples over all rounds (n = rounds * runs);
   `LatencyStats.ratio` is the latency relative to the reference.

Failures are never dropped: a candidate whose run raises stops the measurement with a
`DeviceError` that names it.
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
