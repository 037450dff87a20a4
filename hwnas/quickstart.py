"""`hwnas quickstart`: the whole pipeline on the embedded default, in one call.

shipped supernet -> profile this machine's CPU on a real runtime -> fit its latency predictor ->
accuracy table + predictor -> profile subnets along the predicted front and refit (where the search
decides: `hwnas.search.front_profile`) -> search the Pareto front under a latency budget -> measure
the top candidates -> export the best with verification -> summary. Every stage resumes from what the
run directory already holds, so a second call is fast.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwnas.errors import InputError

__all__ = ["QuickstartSettings", "quickstart"]


@dataclass(frozen=True)
class QuickstartSettings:
    run_dir: Path = Path("runs/quickstart")
    device: str = "cpu-ort"
    samples: int = 60  # random subnets profiled for the latency predictor
    front_samples: int = 16  # then subnets along the predicted front (0: none)
    # subnets evaluated for the accuracy predictor: the shipped supernet's first 200 ship evaluated
    # (hwnas.accuracy.precomputed), so this costs nothing on the default supernet
    accuracy_samples: int = 200
    budget_ms: float | None = None  # default: 40% of the way from the fastest to the slowest profiled
    top_k: int = 3
    seed: int = 0
    references: tuple[str, ...] = ()  # more timm models to time (the run's baselines always are)


@dataclass
class QuickstartResult:
    settings: QuickstartSettings
    budget_ms: float
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    latency_report: dict[str, Any] = field(default_factory=dict)
    search: Any = None
    bundle: Path | None = None
    bundle_meta: dict[str, Any] = field(default_factory=dict)
    shipped: int = 0  # which of search.best the bundle holds
    passed_over: list[str] = field(default_factory=list)  # returned subnets whose bundle broke the budget


def default_budget(run: Any, device: str, samples: int, seed: int) -> float:
    """40% of the way up the latency range of the profile stage's own subnets (the same ones on a
    rerun: `select_subnets` is seeded), not of everything measured since: front profiling and
    verification add subnets at the range's ends, and a budget that moved would make a rerun
    search, and measure, anew."""
    from hwnas.profiling.stage import select_subnets
    from hwnas.profiling.store import read_measurements

    ids = {a.id for a in select_subnets(run.space, samples, seed=seed, n_classes=run.n_classes)}
    df = read_measurements(run.run_dir, device=device, kind="subnet")
    own = df["key"].astype(str).isin(ids)
    ms = df.loc[own if own.any() else df.index, "corrected_ms"].to_numpy()
    lo, hi = float(np.min(ms)), float(np.max(ms))
    return round(lo + 0.4 * (hi - lo), 3)


def quickstart(settings: QuickstartSettings = QuickstartSettings(),
               log: Callable[[str], Any] = print, progress: Callable[..., Any] | None = None
               ) -> QuickstartResult:
    """Run every stage (skipping what the run already has); returns what each produced."""
    from hwnas.baselines import profile_key, run_baselines
    from hwnas.export import default_bundle_dir, export_subnet, read_meta
    from hwnas.export.budget import bundle_latency
    from hwnas.latency.api import fit_from_run
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import profile
    from hwnas.run import open_run
    from hwnas.search import SearchSettings, ensure_accuracy_predictor, run_search
    from hwnas.search.front_profile import front_profiled, profile_front

    s = settings
    if s.samples < 10:
        raise InputError(f"--samples must be at least 10 for a useful latency predictor, got {s.samples}")
    def search_settings(budget: float) -> SearchSettings:
        return SearchSettings((s.device,), (budget,), algo="evolution", pareto=True, top_k=s.top_k, seed=s.seed,
                              accuracy_samples=s.accuracy_samples)

    search_settings(s.budget_ms if s.budget_ms is not None else 1.0)  # every setting, before minutes of profiling
    run = open_run(s.run_dir)
    clock: dict[str, float] = {}

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        log(f"[{len(clock) + 1}/{6 + bool(s.front_samples)}] {name}")
        t = time.perf_counter()
        out = fn()
        clock[name] = round(time.perf_counter() - t, 1)
        return out

    def profile_progress(dev: str, done: int, total: int, key: str) -> None:
        if progress:
            progress("profile", done=done, total=total, device=dev, key=key)

    # the baselines (hand-designed networks trained alone: hwnas.baselines) are timed beside the subnets
    references = (*s.references, *(profile_key(b["name"], b["resolution"]) for b in run_baselines(run)))
    stage(f"profile {s.samples} subnets and {len(references)} baselines on {s.device}",
          lambda: profile(run, [s.device], s.samples, references=references,
                          protocol=ProtocolSettings(seed=s.seed), progress=profile_progress))
    predictor_path = run.files.latency_predictor(s.device)
    report = stage("fit the latency predictor", lambda: fit_from_run(
        run.run_dir, s.device, width_mult=run.space.width_mult, n_classes=run.n_classes,
        seed=s.seed)[1] if not predictor_path.exists() else {"path": str(predictor_path), "reused": True})
    stage(f"accuracy of {s.accuracy_samples} subnets (BN-recalibrated)",
          lambda: ensure_accuracy_predictor(run, s.accuracy_samples, seed=s.seed, progress=progress))
    budget = s.budget_ms if s.budget_ms is not None else default_budget(run, s.device, s.samples, s.seed)
    if s.front_samples:
        done = front_profiled(run, s.device)
        report = {**report, **stage(
            f"front: profile {s.front_samples} subnets along the predicted front, refit the latency predictor",
            lambda: profile_front(run, s.device, s.front_samples, seed=s.seed, protocol=ProtocolSettings(seed=s.seed),
                                  progress=profile_progress) if done is None else {"front": done})}
    res = stage(f"search the Pareto front under {budget} ms, measure the top {s.top_k}",
                lambda: run_search(run.run_dir, search_settings(budget), progress=progress))
    out = QuickstartResult(s, budget, clock, report, res)
    if not res.ok:
        log(f"no subnet met the budget when measured: {res.message}")
        return out
    def export(arch_id: str) -> Path:
        existing = default_bundle_dir(run.run_dir, arch_id, s.device)
        if (existing / "model.json").exists() and read_meta(existing)["status"] == "verified":
            return existing  # a rerun keeps the verified bundle it already made
        return export_subnet(run.run_dir, arch_id, s.device)

    # the first returned subnet whose bundle holds the budget when export measures it again (by the
    # search's rule, re-measured paired before it is condemned); the next accepted one otherwise
    for k, best in enumerate(res.best):
        bundle = stage(f"export subnet {best['id']} for {s.device} with verification", lambda: export(best["id"]))
        out.bundle, out.bundle_meta, out.shipped = bundle, read_meta(bundle), k
        if bundle_latency(out.bundle_meta)[1] is not False:
            break
        out.passed_over.append(best["id"])
        log(f"{best['id']} broke the {budget} ms budget when export measured it again "
            f"({out.bundle_meta['latency'].get('decided_by')}); "
            + ("shipping the next accepted subnet" if k + 1 < len(res.best) else "no accepted subnet is left"))
    return out
