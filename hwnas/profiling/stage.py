"""`hwnas profile`: measure subnets (and reference models) on devices into the run's store.

Which subnets: a predictor must be right across the whole latency range, and a uniform sample
bunches in the middle (sums of many slots), so `select_subnets` stratifies over MACs: it spreads
targets evenly from the smallest to the largest network and takes the pool member nearest each,
always including the space's min and max.

How: each subnet is compiled by the device's backend (the same `compile` that export uses) and
measured in a `hwnas.profiling.session` (`DeviceSession.measure`, the call search verification
and export use too): timed with the drift-corrected protocol beside the run's fixed reference
subnet and put in milliseconds with the device's anchor (`hwnas.profiling.anchors`). Each result
is appended to the store as soon as it is measured, so a crash loses at most the subnet in
flight and a rerun skips everything already measured. Local devices are profiled one after
another (two timing jobs on one machine spoil both), in the calling thread, so Ctrl-C stops them
at once; remote agents run in parallel, each in a daemon thread of its own that starts no new
measurement after Ctrl-C and that the process does not wait for.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from hwnas.errors import DeviceError, InputError
from hwnas.families.base import GeneArch
from hwnas.profiling.anchors import build_timing_subnet, reference_arch, reference_key, run_anchor
from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.session import open_session
from hwnas.profiling.store import MeasurementStore, stats_row
from hwnas.run import RunConfig

__all__ = ["ProtocolSettings", "check_devices", "select_subnets", "reference_arch", "reference_key", "run_anchor",
           "build_timing_subnet", "block_key", "profile", "measure_subnets", "measure_paired"]

ProgressFn = Callable[[str, int, int, str], Any]  # (device, done, total, key)


def select_subnets(space: Any, n: int, seed: int = 0, n_classes: int = 1000) -> list[GeneArch]:
    """`n` distinct subnets covering the MACs range evenly (min and max included)."""
    from hwnas.families.sampling import sample_graded

    if n < 1:
        raise InputError(f"--samples must be at least 1, got {n}")
    rng = np.random.default_rng(seed)
    size = max(20 * n, 2000)
    pool = np.concatenate([space.to_matrix([space.min_arch(), space.max_arch()]),
                           space.sample_matrix(size, rng), sample_graded(space, size, rng)]).astype(np.int64)
    macs = space.family.count_params_macs(pool, space.width_mult, n_classes)[1]
    targets = np.linspace(macs.min(), macs.max(), n)
    order = np.argsort(macs)
    sorted_macs = macs[order]
    taken: set[int] = set()
    picks: list[int] = []
    for t in targets:  # nearest not-yet-taken pool member to each target
        pos = int(np.searchsorted(sorted_macs, t))
        for step in range(len(order)):
            cand = [p for p in (pos - step, pos + step) if 0 <= p < len(order) and order[p] not in taken]
            if cand:
                best = min(cand, key=lambda p: abs(sorted_macs[p] - t))
                taken.add(order[best])
                picks.append(order[best])
                break
    archs = space.from_matrix(pool[picks])
    unique = list(dict.fromkeys(archs))  # the pool may hold duplicates of min/max
    rng.shuffle(unique)  # measure in random order: drift must not correlate with size
    return unique


@dataclass
class _Job:
    device: str
    subnets: list[GeneArch]
    models: list[str] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)  # lookup-table entries (ENTRY_COLUMNS)


def block_key(entry: dict[str, Any], columns: Sequence[str] | None = None) -> str:
    """Store key of one lookup-table entry, e.g. ``block:block/2/1/40/5/6/16`` (the values of
    `columns`: a family's layout's `entry_columns`; by default `ENTRY_COLUMNS`, the default
    family's)."""
    from hwnas.families.parts import CostLayout

    return "block:" + "/".join(str(entry[c]) for c in (columns or CostLayout.entry_columns))


_REFERENCE = re.compile(r"timm:([A-Za-z0-9][A-Za-z0-9_.-]*)(?:@r([1-9][0-9]{0,3}))?")


def reference_spec(spec: str, default_r: int) -> tuple[str, int]:
    """``timm:NAME`` (timed at `default_r`) or ``timm:NAME@rN`` (at N) -> (NAME, resolution)."""
    match = _REFERENCE.fullmatch(spec)
    if match is None:
        raise InputError(f"reference {spec!r} must look like timm:MODEL_NAME or timm:MODEL_NAME@rRESOLUTION, "
                         "e.g. timm:mobilenetv3_large_100 or timm:lcnet_050@r44")
    return match[1], int(match[2]) if match[2] else default_r


def _build_timm(spec: str, n_classes: int):
    import timm

    name = reference_spec(spec, 1)[0]
    try:
        return timm.create_model(name, pretrained=False, num_classes=n_classes).eval()
    except RuntimeError as err:  # timm: "Unknown model (...)"
        raise InputError(f"reference {spec!r}: {err}; list names with timm.list_models()") from None


def _count(module, r: int) -> tuple[int, int]:
    """Parameters, and MACs (FLOPs / 2) from torch's FLOP counter, for reference models."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    params = sum(p.numel() for p in module.parameters())
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.zeros(1, 3, r, r))
    return params, counter.get_total_flops() // 2


def _measure_device(run: RunConfig, job: _Job, store: MeasurementStore, devices_file: str | Path | None,
                    protocol: ProtocolSettings, reference_r: int, progress: ProgressFn | None,
                    recalibrate: bool = False, stop: threading.Event | None = None) -> dict[str, Any]:
    """Measure what `job` names and the store lacks; with `stop` set, no further measurement starts."""
    import torch

    from hwnas.devices import get_device

    device = get_device(job.device, devices_file)
    backend = device.backend_impl()
    backend.check()
    space, n_classes = run.space, run.n_classes
    done_subnets = store.keys(job.device, "subnet")
    done_models = store.keys(job.device, "model")
    done_blocks = store.keys(job.device, "block")
    todo = [a for a in job.subnets if a.id not in done_subnets]
    todo_models = [m for m in job.models if m not in done_models]
    layout = space.family.cost_layout(space.width_mult, n_classes)
    entry_columns = layout.entry_columns
    todo_blocks = [b for b in job.blocks if block_key(b, entry_columns) not in done_blocks]
    total = len(todo) + len(todo_models) + len(todo_blocks)
    summary = {"device": job.device, "measured": 0,
               "skipped": len(job.subnets) + len(job.models) + len(job.blocks) - total}
    if progress:
        progress(job.device, 0, total, "")
    if total == 0:
        return summary

    with open_session(run, device, backend=backend, protocol=protocol) as session:
        session.calibrate_anchor(store, recalibrate)

        def measure_one(key: str, module, r: int, shape: tuple[int, ...] | None = None, **row_kw: Any) -> None:
            if stop is not None and stop.is_set():
                raise _Stopped
            stats, artifact = session.measure_module(key, module, torch.zeros(shape or (1, 3, r, r)))
            store.append([stats_row(job.device, row_kw.pop("kind"), key, stats,
                                    meta=session.row_meta(artifact), columns=space.flat_columns,
                                    **row_kw)])
            summary["measured"] += 1
            if progress:
                progress(job.device, summary["measured"], total, key)

        try:
            for arch in todo:
                params, macs = arch.family.arch_params_macs(arch, n_classes)
                measure_one(arch.id, session.timing_subnet(arch), arch.r, kind="subnet", arch=arch,
                            params=params, macs=macs)
            for entry in todo_blocks:
                module, shape = layout.entry_module(entry)
                measure_one(block_key(entry, entry_columns), module.eval(), int(entry["size"]),
                            shape=tuple(shape), kind="block", block=entry)
            for spec in todo_models:
                module = _build_timm(spec, n_classes)
                r = reference_spec(spec, reference_r)[1]
                params, macs = _count(module, r)
                measure_one(spec, module, r, kind="model", params=params, macs=macs, block={"resolution": r})
        except _Stopped:
            pass
    return summary


class _Stopped(Exception):
    """Raised before a measurement once profiling was told to stop (Ctrl-C in another thread)."""


def measure_subnets(run: RunConfig, device: str, archs: Sequence[GeneArch], *,
                    devices_file: str | Path | None = None, protocol: ProtocolSettings = ProtocolSettings(),
                    progress: ProgressFn | None = None, recalibrate: bool = False):
    """Measure `archs` on `device` (those not yet in the run's store), then return the store's
    subnet rows for all of them (a DataFrame indexed by arch id). Used to verify search results
    and by ``--samples auto``."""
    from hwnas.devices import get_device

    reason = get_device(device, devices_file).available()
    if reason:
        raise DeviceError(f"device '{device}' is not usable here: {reason}")
    store = MeasurementStore(run.run_dir)
    _measure_device(run, _Job(device, list(archs)), store, devices_file, protocol,
                    max(run.space.r_choices), progress, recalibrate)
    df = store.read()
    df = df[(df["device"] == device) & (df["kind"] == "subnet")].set_index("key")
    return df.loc[[a.id for a in archs]]


def measure_paired(run: RunConfig, device: str, arch: GeneArch, reference: str, *,
                   devices_file: str | Path | None = None, protocol: ProtocolSettings = ProtocolSettings()
                   ) -> tuple[float, float]:
    """(`arch`'s latency / the reference model's, its relative standard error) on `device`, both
    timed in one call (`DeviceSession.measure_together`: shuffled through the same rounds beside the
    run's reference), so the ratio carries no session's level; `reference` is ``timm:NAME@rN``.
    Two numbers each taken in its own session differ by a few percent; this one is what a
    comparison with a hand-designed network is judged on."""
    import torch

    dev = check_devices([device], devices_file, [reference])[0]
    r = reference_spec(reference, max(run.space.r_choices))[1]
    with open_session(run, dev, protocol=protocol) as session:
        subnet = session.compile(arch.id, session.timing_subnet(arch), torch.zeros(1, 3, arch.r, arch.r))
        model = session.compile(reference, _build_timm(reference, run.n_classes), torch.zeros(1, 3, r, r))
        stats = session.measure_together({"subnet": subnet, "reference": model})
    a, b = stats["subnet"], stats["reference"]
    return a.corrected_ms / b.corrected_ms, float(np.hypot(a.rel_se, b.rel_se))


def _block_entries(space: Any, n_classes: int = 1000) -> list[dict[str, Any]]:
    """Every part a lookup table needs: every entry of the family's cost layout over the space's
    choices of each part's key columns (e.g. stage, first/later position, kernel, expand; plus stem
    and head), at the smallest, middle and largest resolution (the table interpolates the rest)."""
    rs = sorted({space.r_choices[0], space.r_choices[len(space.r_choices) // 2], space.r_choices[-1]})
    return _family_block_entries(space, rs, n_classes)


def _family_block_entries(space, rs: Sequence[int], n_classes: int) -> list[dict[str, Any]]:
    import itertools

    layout = space.family.cost_layout(space.width_mult, n_classes)
    choices = space.column_choices()
    entries: set[tuple] = set()
    for p, part in enumerate(layout.parts):
        for key in itertools.product(rs, *(choices[c] for c in part.columns[1:])):
            entries.add(layout.entry(p, tuple(int(v) for v in key)))
    order = {"stem": 0, "block": 1, "head": 2}
    return [dict(zip(layout.entry_columns, e))
            for e in sorted(entries, key=lambda t: (order[t[0]],) + tuple(t[1:]))]


def check_devices(devices: Sequence[str], devices_file: str | Path | None = None,
                  references: Sequence[str] = ()) -> list:
    """The named devices, after checking (before any work) that each exists and is usable here and
    that every reference looks like ``timm:NAME``; one line otherwise."""
    from hwnas.devices import get_device

    if not devices:
        raise InputError("name at least one --device (see `hwnas devices list`)")
    for spec in references:
        reference_spec(spec, 1)
    resolved = [get_device(d, devices_file) for d in devices]  # unknown names fail before any work
    for dev in resolved:
        reason = dev.available()
        if reason:
            raise DeviceError(f"device '{dev.name}' is not usable here: {reason}")
    return resolved


def profile(run: RunConfig, devices: Sequence[str], samples: int, *,
            devices_file: str | Path | None = None,
            references: Sequence[str] = (), reference_resolution: int | None = None,
            protocol: ProtocolSettings = ProtocolSettings(), progress: ProgressFn | None = None,
            blocks: bool = False, recalibrate: bool = False) -> list[dict[str, Any]]:
    """Profile `samples` stratified subnets (and `references` like "timm:efficientnet_b0") on each
    device into the run's store; with `blocks`, also the parts (stem, blocks, head) a lookup-table
    predictor sums (see `_block_entries`). `recalibrate`: measure a fresh anchor for devices new
    to this run instead of the host's (`hwnas.profiling.anchors`). Returns one summary per device.
    `samples` 0 with `references` or `blocks`: those only (``--samples auto`` measures its subnets
    itself: `hwnas.latency.auto_profile`)."""
    resolved = check_devices(devices, devices_file, references)
    ref_r = reference_resolution or max(run.space.r_choices)
    store = MeasurementStore(run.run_dir)
    entries = _block_entries(run.space, run.n_classes) if blocks else []
    only_extras = samples == 0 and (references or blocks)
    subnets = [] if only_extras else select_subnets(run.space, samples, seed=protocol.seed,
                                                    n_classes=run.n_classes)
    local = [_Job(d.name, subnets, list(references), entries) for d in resolved if not d.is_remote]
    remote = [_Job(d.name, subnets, list(references), entries) for d in resolved if d.is_remote]

    stop = threading.Event()

    def measure(job: _Job) -> dict[str, Any]:
        return _measure_device(run, job, store, devices_file, protocol, ref_r, progress, recalibrate,
                               stop)

    agents = [_AgentThread(measure, job) for job in remote]
    try:
        for worker in agents:
            worker.start()
        results = [measure(job) for job in local]
        return results + [worker.outcome() for worker in agents]
    except BaseException:  # Ctrl-C (or a failure): no agent starts another measurement
        stop.set()
        raise


class _AgentThread(threading.Thread):
    """Measures one remote device's job and keeps its summary or error. A daemon: after Ctrl-C
    the process exits without waiting for an agent's answer (what was stored stays; the rerun
    measures the one in flight again)."""

    def __init__(self, measure: Callable[[_Job], dict[str, Any]], job: _Job):
        super().__init__(daemon=True, name=f"profile-{job.device}")
        self.measure, self.job = measure, job
        self.summary: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.summary = self.measure(self.job)
        except BaseException as err:  # handed to the caller by outcome()
            self.error = err

    def outcome(self) -> dict[str, Any]:
        while self.is_alive():
            self.join(0.2)  # short waits: Ctrl-C reaches the main thread between them
        if self.error is not None:
            raise self.error
        return self.summary
