"""`run_search`: the library function behind ``hwnas search``.

One call: load the run's predictors (building the accuracy table and predictor when missing),
refuse impossible budgets, search, take the feasible Pareto front of everything scored, then
verify like a user would: measure the best candidates on the real device (dropping and replacing
any whose latency does not hold with margin for the protocol's noise), evaluate the top-1 of those
that fit for real on the test split (which the accuracy table never saw) and return the best by
it, and write ``pareto.csv``, ``search.json`` and ``pareto.png`` into the run as one unit.

What to search for is one `SearchSettings` (`hwnas.search.settings`), checked before anything is
read; the run is read and written through `open_run` / `RunFiles` alone.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hwnas.errors import BudgetError
from hwnas.accuracy import ensure_accuracy_predictor, measured_accuracy, regression_metrics
from hwnas.search import outputs
from hwnas.search.algorithms import algorithm_names, get_algorithm
from hwnas.search.operators import unique_rows
from hwnas.search.pareto import front_mask, hypervolume
from hwnas.search.precision import (PRECISIONS, SEARCHED, drop_model, precision_report, precision_top1,
                                    precision_variants)
from hwnas.search.problem import (TOP1, Batch, PredictorMissing, Problem, SearchOutcome, load_latency_predictor,
                                  ms_key)
from hwnas.search.settings import SearchSettings
from hwnas.search.verify import (Measure, Verification, acceptance_rule, device_measure, device_paired,
                                 verify_candidates)
from hwnas.search.risk import latency_bound, typical_rel_se
from hwnas.latency.trust import trust_warning
from hwnas.search.ties import PREDICTED_TIE_RULE, order_predicted_ties, order_ties
from hwnas.search.versus import baselines_summary, versus_baselines

__all__ = ["ALGORITHMS", "PRECISIONS", "SearchHooks", "SearchResult", "SearchSettings", "run_search"]

ALGORITHMS = algorithm_names()

Progress = Callable[..., Any]  # progress(event, **fields); events: accuracy, search, verify
AccuracyMeasure = Callable[[Sequence[Any]], np.ndarray]  # archs (the run's family's) -> measured top-1 (%)
ACCURACY_SPLIT = "test"


@dataclass
class SearchResult:
    """What `run_search` found. `best`: the winners, best first -- measured within budget when
    verified, else predicted only (``verified`` False). `front`: the rows of pareto.csv."""

    run_dir: Path
    algo: str
    devices: list[str]
    budgets: dict[str, float]
    best: list[dict[str, Any]]
    front: Any  # pandas DataFrame
    metrics: dict[str, Any]
    verification: list[dict[str, Any]] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)
    message: str = ""
    accuracy_report: dict[str, Any] = field(default_factory=dict)  # the accuracy predictor's selection
    precision: str = "fp32"  # what was asked: fp32, bf16, int8 or auto (each best entry says its own)
    baselines: list[dict[str, Any]] = field(default_factory=list)  # the front against them (`search.versus`)
    #: the accuracy predictor against the test-split checks of the subnets verification evaluated
    #: (held-out: the predictor was fitted on the validation table), `regression_metrics`
    accuracy_checks: dict[str, Any] | None = None
    tie: dict[str, Any] | None = None  # `hwnas.search.ties.order_ties`' record when a tie reordered `best`
    #: device -> its latency predictor on held-out subnets (`hwnas.latency.trust.held_out_quality`)
    latency_trust: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when at least one subnet is returned (measured within budget if verified)."""
        return bool(self.best)


@dataclass(frozen=True)
class SearchHooks:
    """Stand-ins for what verification measures for real (tests, benchmarks): `measure` (device,
    archs) -> ms replaces the devices; `measure_accuracy` archs -> test top-1 replaces evaluating
    the supernet; `measure_precision_accuracy` {precision: fn} the bf16 / INT8 artifacts' top-1;
    `drop_models` {precision: model} the measured drop models; `measure_memory` archs -> [{ram_kb,
    flash_kb}] replaces exporting them (`hwnas.search.memory_check`); `measure_paired` (device, arch,
    baseline key) -> (latency ratio, its rel. SE) replaces timing a subnet beside a baseline (with a
    `measure` stand-in and none here, baselines are judged on the measurements alone)."""

    measure: Measure | None = None
    measure_accuracy: AccuracyMeasure | None = None
    measure_precision_accuracy: Mapping[str, AccuracyMeasure] | None = None
    drop_models: Mapping[str, Any] | None = None
    measure_memory: Any = None
    measure_paired: Any = None


def run_search(run_dir: str | Path, settings: SearchSettings | str | Sequence[str], *args: Any,
               progress: Progress | None = None, hooks: SearchHooks | None = None, **keywords: Any) -> SearchResult:
    """Search the run's supernet for subnets meeting the settings' latency budgets and write
    pareto.csv, search.json and pareto.png into the run: ``run_search(run_dir, SearchSettings(...))``.

    The keyword call of earlier versions, ``run_search(run_dir, device, latency_ms, algo=...,
    ...)``, still works: its keywords are `SearchSettings`' and `SearchHooks`'.

    The top-1 objective is ``predicted - accuracy_risk * sigma`` (see `Problem`); pareto.csv reports
    the prediction itself (`top1_pred`), its sigma and the objective (`top1_objective`).
    With `verify`: the best candidates by predicted top-1 are measured on each device until
    `accuracy_checks` (default 3 * top_k) hold every budget with `latency_margin` (see
    `hwnas.search.verify`) or `max_measure` (default 2 * accuracy_checks) are measured; those that
    fit are evaluated on the test split, and the `top_k` best by measured top-1 are returned.

    `precision`: "fp32" (the devices as named), "bf16" / "int8" (each device's variant in that
    precision, ``<device>-bf16`` / ``<device>-int8``: its latency predictor, and verification on it)
    or "auto" (every precision each device has a variant for, e.g. cpu-openvino: fp32, bf16, int8;
    cpu-ort: fp32, int8; the front holds (subnet, precision) points, so each subnet runs in the
    precision that wins for it; a variant that is not usable here and was never fitted in this run
    is left out, and search.json says why). bf16 / INT8 top-1 is the predicted fp32 top-1 minus
    the drop model of the first device's variant (`hwnas.accuracy.int8`: measured on `int8_samples`
    subnets when its table is shorter). Each precision is searched on its own (same algorithm and
    seed) and the archives are merged into one front, so every algorithm runs unchanged. bf16 /
    INT8 candidates are verified on the variant device, and their measured top-1 is that
    artifact's on the test split. pareto.csv says each row's ``precision`` and the device its
    latency belongs to (``ms_device``, ``ms_device:<device>``); its latency columns stay named by
    the devices given.
    """
    if not isinstance(settings, SearchSettings):
        settings, progress, hooks = _from_keywords(settings, *args, progress=progress, hooks=hooks, **keywords)
    elif args or keywords:
        raise TypeError("run_search(run_dir, settings, *, progress=None, hooks=None): every option is a "
                        "SearchSettings field")
    from hwnas.accuracy.api import check_accuracy_table
    from hwnas.run import open_run

    run = open_run(run_dir, create=False)
    # before anything slow: a run without a usable accuracy table is one line, not a long build
    check_accuracy_table(run, settings.accuracy_samples)
    hooks = hooks or SearchHooks()
    res = _search(run, settings, progress, hooks)
    rounds = []
    # fewer than top_k fit: fold the verification measurements into the latency predictors and search again
    while (settings.verify and len(res.best) < settings.top_k and len(rounds) < settings.refit_rounds
           and settings.precision == "fp32" and hooks.measure is None):
        rounds.append({"returned": len(res.best), "measured": res.metrics.get("measured"),
                       "first_try_within_budget": res.metrics.get("first_try_within_budget")})
        _refit_latency(run, res.devices, progress)
        res = _search(run, settings, progress, hooks, refits=rounds)
    return res


def _refit_latency(run, devices: Sequence[str], progress: Progress | None) -> None:
    """Refit each device's latency predictor on every measurement of the run (the verification
    measurements just made among them)."""
    from hwnas.latency.api import fit_from_run

    for d in devices:
        if progress is not None:
            progress("verify", message=f"refitting the latency predictor of {d} with the verification measurements")
        fit_from_run(run.run_dir, d, width_mult=run.space.width_mult, n_classes=run.n_classes,
                     family=run.family.name)


def _from_keywords(device: str | Sequence[str], latency_ms: float | Sequence[float], algo: str = "evolution",
                   pareto: bool = False, workers: int = 1, storage: str | None = None, top_k: int = 5,
                   seed: int = 0, verify: bool = True, devices_file: str | Path | None = None,
                   progress: Progress | None = None, *, hooks: SearchHooks | None = None,
                   measure: Measure | None = None, measure_accuracy: AccuracyMeasure | None = None,
                   measure_precision_accuracy: Mapping[str, AccuracyMeasure] | None = None,
                   drop_models: Mapping[str, Any] | None = None, measure_memory: Any = None, **settings: Any
                   ) -> tuple[SearchSettings, Progress | None, SearchHooks]:
    """(settings, progress, hooks) of the earlier keyword call (its positional order kept)."""
    given = SearchHooks(measure, measure_accuracy, measure_precision_accuracy, drop_models, measure_memory)
    return (SearchSettings(device, latency_ms, algo=algo, pareto=pareto, workers=workers, storage=storage,
                           top_k=top_k, seed=seed, verify=verify, devices_file=devices_file, **settings),
            progress, hooks or given)


def _search(run, s: SearchSettings, progress: Progress | None, hooks: SearchHooks,
            fallback: str | None = None, refits: list[dict[str, Any]] | None = None) -> SearchResult:
    """One search and its verification, written as one unit. `refits`: what the earlier rounds
    returned, when the latency predictors were refitted before this one (`run_search`)."""
    t0 = time.perf_counter()
    run_dir = run.run_dir
    budgets, devices = s.budgets, s.devices
    algorithm = get_algorithm(s.algo)
    request = s.request(run_dir)
    variants, left_out = precision_variants(run, devices, s.precision, s.devices_file)
    precs = list(variants)
    latency = {p: {d: _load_latency(run, variants[p][d], d, p) for d in devices} for p in precs}
    accuracy = ensure_accuracy_predictor(run, s.accuracy_samples, seed=s.seed, progress=progress)
    drops = {p: (hooks.drop_models or {}).get(p) or drop_model(run, variants[p][devices[0]], s.int8_samples,
                                                               s.seed, s.devices_file, progress)
             for p in precs if p != "fp32"}
    goals = s.goals

    def problem_of(p: str, limits: dict[str, float]) -> Problem:
        return Problem(run.space, accuracy, latency[p], limits, objectives=goals.objectives,
                       n_classes=run.n_classes, max_macs=s.max_macs, max_params=s.max_params,
                       max_ram_kb=s.max_ram_kb, max_flash_kb=s.max_flash_kb, memory_precision=p,
                       accuracy_risk=s.accuracy_risk, top1_drop=drops.get(p))

    problems = {p: problem_of(p, budgets) for p in precs}
    fastest, skipped = _check_budgets(problems, variants)
    problems = {p: pr for p, pr in problems.items() if p not in skipped}
    # judged against the budgets themselves; searched under the latency bound at s.latency_confidence
    judged = problems
    risk = {p: {d: latency_bound(latency[p][d], s.latency_confidence) for d in budgets} for p in problems}
    if s.latency_confidence > 0:
        search_budgets = {}
        for d in budgets:  # one search budget per device, the most cautious of its precisions'
            for p in problems:
                r = risk[p][d]
                # what acceptance will add: the margin and two of this device's typical standard errors
                r["typical_rel_se"] = typical_rel_se(run.run_dir, variants[p][d], latency[p][d])
                r["acceptance_factor"] = 1 + s.latency_margin + 2 * r["typical_rel_se"]
            bound = budgets[d] / max(risk[p][d]["factor"] * risk[p][d]["acceptance_factor"] for p in problems)
            # never below the fastest subnet: then only the fastest fit
            search_budgets[d] = round(max(bound, min(pr.fastest(d)[0] for pr in problems.values())), 6)
        for p in problems:
            for d in budgets:
                risk[p][d]["search_budget_ms"] = search_budgets[d]
        problems = {p: problem_of(p, search_budgets) for p in problems}
    problem = next(iter(problems.values()))  # objectives, reference point, budgets: the same for every precision
    t = time.perf_counter()
    for pr in problems.values():
        pr.prepare()  # the fused tables: built once, before the search clock starts
    algorithm.load()  # (and the algorithm's modules imported)
    prepare_s = time.perf_counter() - t

    archives, outcomes, settings, search_s = [], {}, None, 0.0
    for p, pr in problems.items():
        req = request if p == "fp32" else dataclasses.replace(  # a bf16 / INT8 search is an Optuna study of its own
            request, study_name=(request.study_name or study_name_of(algorithm.name, pr)) + f"-{p}")
        t = time.perf_counter()
        outcome, st = algorithm.run(pr, req, progress)
        search_s += time.perf_counter() - t
        outcome.archive.cols[outputs.PRECISION_TAG] = np.full(len(outcome.archive), float(SEARCHED.index(p)))
        archives.append(outcome.archive)
        outcomes[p] = outcome
        settings = settings or st
    counters = {k: sum(pr.usage.as_dict()[k] for pr in problems.values()) for k in problem.usage.as_dict()}
    split = {k: round(sum(pr.usage.time_split(0.0)[k] for pr in problems.values()), 4)
             for k in ("accuracy_predictor_s", "latency_predictor_s")}
    split["bookkeeping_s"] = round(max(search_s - sum(split.values()), 0.0), 4)
    archive = Batch.concat(archives, width=archives[0].m.shape[1])
    outcome = _merged_outcome(outcomes, archive)
    try:
        feasible, table, on_front, cand = _candidates(problem, archive, s.pareto, s.top_k, fastest)
    except BudgetError:
        if problems is judged:
            raise
        # the bound left no subnet the search could find: search on point predictions, and say so
        return _search(run, s.replace(latency_confidence=0.0), progress, hooks, refits=refits, fallback=(
            f"no subnet found under the latency bound at {s.latency_confidence:g} "
            f"({_budget_text({d: r['search_budget_ms'] for d, r in next(iter(risk.values())).items()})}); "
            "searched on the point predictions instead"))
    prec_of = outputs.precision_of(table)

    t = time.perf_counter()
    ver, top1_measured, first_try, versus, memory = Verification(), {}, None, [], {}
    top_k, margin = s.top_k, s.latency_margin
    if s.verify:
        measure_accuracy = hooks.measure_accuracy or (lambda archs: measured_accuracy(
            run, archs, split=ACCURACY_SPLIT, progress=progress))
        top1_of = {"fp32": measure_accuracy, **{p: (hooks.measure_precision_accuracy or {}).get(p) or precision_top1(
            run, variants[p][devices[0]], s.devices_file, progress) for p in problems if p != "fp32"}}
        archs = problem.space.from_matrix(table.m)

        def measure_top1(rows: list[int]) -> None:
            for p in problems:
                mine = [i for i in rows if prec_of[i] == p]
                if mine:
                    top1_measured.update(zip(mine, top1_of[p]([archs[i] for i in mine])))

        # measured on the device first (seconds a subnet) and evaluated only if it fits: an
        # evaluation on the test split costs minutes on a slow CPU and decides nothing for a
        # subnet over budget. Those the accuracy predictor cannot tell from the best go fastest
        # first; then those with room for the margin in their prediction.
        oof_mae = float((accuracy.out_of_fold or {}).get("mae", 0.0))
        tie_delta = oof_mae if s.ties_fastest_first else 0.0
        load = {i: max(table.cols[ms_key(d)][i] / b for d, b in budgets.items()) for i in cand} if tie_delta else {}
        cand, n_tied = order_predicted_ties(cand, table.cols[TOP1], load, tie_delta)
        predicted_ties = {"rule": PREDICTED_TIE_RULE, "on": s.ties_fastest_first, "delta": round(tie_delta, 4),
                          "tied": n_tied}
        guarded = [i for i in cand if all(table.cols[ms_key(d)][i] * (1 + margin) <= b
                                          for d, b in budgets.items())]
        kept = set(guarded)
        order = guarded + [i for i in cand if i not in kept]
        checks = s.accuracy_checks or 3 * top_k
        measure = hooks.measure or device_measure(run, s.devices_file, s.protocol, progress)
        ver = _verify(judged, table, prec_of, order, checks, measure, variants, s.max_measure, margin)
        first = list(ver.measured)[:top_k]  # in candidate order: the predictor's own satisfaction
        first_try = sum(i in ver.accepted for i in first) / len(first) if first else None
        if s.max_ram_kb is not None or s.max_flash_kb is not None:
            ver.accepted, memory = _check_memory(run, problem, table, prec_of, ver.accepted, s, hooks, progress)
        measure_top1(ver.accepted)
        if s.baselines:
            fronted = [i for i in range(len(table)) if on_front[i] and prec_of[i] == "fp32"]
            top1_pred = np.full(len(table), np.nan)  # the prediction itself, not the risk-adjusted objective
            if fronted and "fp32" in problems:
                top1_pred[fronted] = problems["fp32"].top1_estimate(table.m[fronted])[0]
            # tried down to two out-of-fold errors below a baseline: the predictor's, not the subnets', shortfall
            versus = versus_baselines(run, table, fronted, devices[0], ver.measured, top1_measured, measure,
                                      measure_top1, margin, devices_file=s.devices_file, protocol=s.protocol,
                                      slack=2 * oof_mae,
                                      latency_factor=risk["fp32"][devices[0]]["factor"] if "fp32" in risk else 1.0,
                                      top1_pred=top1_pred, paired=hooks.measure_paired or (
                                          None if hooks.measure else device_paired(run, s.devices_file, s.protocol)))
    verify_s = time.perf_counter() - t
    # measured top-1 decides which of those that fit are returned, and their order
    chosen = sorted(ver.accepted, key=lambda i: -top1_measured[i])[:top_k] if s.verify else cand[:top_k]
    tie = None
    if s.verify and len(chosen) > 1:  # the fastest of those the test split cannot tell from the best first
        ids = {i: a.id for i, a in zip(chosen, problem.space.from_matrix(table.m[chosen]))}
        chosen, tie = order_ties(chosen, top1_measured, {i: ver.measured[i][devices[0]] for i in chosen},
                                 _test_images(run, ids), ids)
    front = outputs.frame(judged, table, prec_of, on_front, ver.measured, chosen, run.n_classes, top1_measured,
                   variants, memory)
    ref = next(iter(judged.values())).reference_point()  # the budgets' own, as the dashboard recomputes it
    metrics = {
        "hypervolume": hypervolume(problem.loss(table.take(np.flatnonzero(on_front))), ref),
        "reference_point": ref.tolist(), "objectives": list(problem.objectives),
        "front_size": int(on_front.sum()), "feasible_scored": int(len(feasible)),
        "scored": int(len(outcome.archive)), **counters,
        "wall_s": round(time.perf_counter() - t0, 3), "search_s": round(search_s, 3),
        "verify_s": round(verify_s, 3), "prepare_s": round(prepare_s, 3), "fastest_predicted_ms": fastest,
        "tabulated_costs": problem.cost_models.tabulated(),
        "cost_paths": problem.cost_paths(), "fast_paths": problem.fast_paths(),
        "time_split": split,
        "measured": ver.n_measured, "accepted": len(ver.accepted),
        "first_try_within_budget": first_try,
        "best_top1_objective": float(feasible.cols[TOP1].max()),
    }
    if len(precs) > 1:
        metrics["by_precision"] = {p: {"scored": int((archive.cols[outputs.PRECISION_TAG] == SEARCHED.index(p)).sum()),
                                       "front_size": int(sum(on_front[i] for i in range(len(table))
                                                             if prec_of[i] == p)),
                                       "skipped": skipped.get(p)} for p in precs}
    verification = {"latency": {"rule": acceptance_rule(margin), "margin": margin,
                                "measured": ver.n_measured, "accepted": len(ver.accepted),
                                "order": predicted_ties},
                    "accuracy": _accuracy_report(problems, table, prec_of, top1_measured, chosen)} if s.verify else None
    chosen_archs = problem.space.from_matrix(table.m[chosen]) if chosen else []
    keyed = front.set_index(["id", outputs.PRECISION])
    chosen_rows = [keyed.loc[(a.id, prec_of[i])] for a, i in zip(chosen_archs, chosen)]
    best = [outputs.best_entry(row, arch, devices, s.verify, prec_of[i], variants)
            for row, arch, i in zip(chosen_rows, chosen_archs, chosen)]
    doc = outputs.report(problem, s, settings, metrics, best, ver, outcome, accuracy, verification)
    doc["settings"]["precision"] = s.precision
    if memory:
        doc["memory"] = {"units": "kB = 1024 bytes", "limits": {"ram_kb": s.max_ram_kb, "flash_kb": s.max_flash_kb},
                         "predicted": "hwnas.families.memory: the arena ExecuTorch's planner reserves, weight bytes",
                         "checks": list(memory.values())}
    doc["precision"] = precision_report(s.precision, precs, variants, drops, skipped, left_out)
    doc["latency_risk"] = {"confidence": s.latency_confidence,
                           "rule": "search: predicted_ms * factor * (1 + margin + 2 * typical_rel_se) <= budget_ms "
                                   "(factor: exp of the predictor's out-of-fold log(measured / predicted) at the "
                                   "confidence, split-conformal); verification: " + acceptance_rule(margin),
                           "by_precision": risk, **({"note": fallback} if fallback else {})}
    doc["baselines"] = versus
    doc["tie"] = tie
    if refits:
        doc["refits"] = {"rounds": refits, "rule": "fewer than top_k fit: refit the latency predictors on every "
                                                   "measurement, search and verify again (at most refit_rounds)"}
        metrics["refits"] = len(refits)
    trust = _latency_trust(run, latency, devices) if s.verify else {}
    doc["latency_trust"] = trust
    if versus:
        doc["baselines_summary"] = baselines_summary(versus)
    paths = outputs.write(run.files, front, doc, outputs.explored(problems, feasible, devices), devices, budgets,
                   title=f"{settings.get('mode', settings['algo'])}: accuracy vs latency on {devices[0]}"
                         + ("" if precs == ["fp32"] else f" ({s.precision})"),
                   plot=s.plot)
    message = _message(s.verify, top_k, len(chosen), ver, _budget_labels(budgets, variants))
    if refits:
        message += (f"; after {len(refits)} refit{'s' if len(refits) > 1 else ''} of the latency predictors on "
                    f"the verification measurements (the first search returned {refits[0]['returned']})")
    for d, q in trust.items():
        if q and q["poor"]:
            message += f"; {trust_warning(d, q)}"
    return SearchResult(run_dir, s.algo, devices, budgets, best, front, metrics, ver.records, paths,
                        message + (f"; {tie['message']}" if tie else ""),
                        getattr(accuracy, "meta", {}).get("metrics") or {}, precision=s.precision,
                        baselines=versus, accuracy_checks=verification["accuracy"]["all_evaluated"] if verification else None,
                        tie=tie, latency_trust=trust)


def _load_latency(run, device: str, base: str, precision: str):
    if device != base and not run.files.latency_predictor(device).exists():
        raise PredictorMissing(
            f"no latency predictor for '{device}' (the {precision} variant of '{base}') in {run.run_dir}: profile "
            f"it with `hwnas profile --run {run.run_dir} --device {device}`, then fit it with "
            f"`hwnas latency fit --run {run.run_dir} --device {device}`")
    return load_latency_predictor(run.run_dir, device, run.space.width_mult)


def _check_budgets(problems: dict[str, Problem], variants: dict[str, dict[str, str]]
                   ) -> tuple[dict[str, float], dict[str, str]]:
    """(each device's fastest predicted ms over the precisions, precisions no subnet can meet the
    budgets in -> why). Raises when no precision can."""
    fastest: dict[str, float] = {}
    skipped: dict[str, str] = {}
    errors = []
    for p, pr in problems.items():
        try:
            for d, ms in pr.check_budgets().items():
                fastest[d] = min(fastest.get(d, math.inf), ms)
        except BudgetError as err:
            msg = str(err) if p == "fp32" else (f"{err} (in {p.upper()}: latencies predicted for "
                                                f"{', '.join(sorted(set(variants[p].values())))})")
            skipped[p] = msg
            errors.append(msg)
    if len(skipped) == len(problems):
        raise BudgetError(errors[0] if len(errors) == 1 else "; ".join(errors))
    return fastest, skipped


def study_name_of(algo: str, problem: Problem) -> str:
    from hwnas.search.algorithms import study_name

    return study_name(algo, problem)


def _merged_outcome(outcomes: dict[str, SearchOutcome], archive: Batch) -> SearchOutcome:
    if len(outcomes) == 1:
        only = next(iter(outcomes.values()))
        return SearchOutcome(archive, only.history, only.info)
    first = next(iter(outcomes.values()))
    return SearchOutcome(archive, first.history, {"by_precision": {p: o.info for p, o in outcomes.items()}})


def _verify(problems: dict[str, Problem], table: Batch, prec_of: list[str], cand: list[int], top_k: int,
            measure: Measure, variants: dict[str, dict[str, str]], max_measure: int | None,
            margin: float) -> Verification:
    """`verify_candidates` per precision: each candidate is measured on its precision's devices
    (bf16 / int8 rows on those variants) until `top_k` fit. The first `top_k` candidates (best
    first) say how many each precision must supply; a precision that falls short passes its share
    to the next best candidates of any precision, within `max_measure` (default 2 * top_k)
    measurements in all.
    Returns table rows."""
    most = max_measure or 2 * top_k
    out = Verification()
    left = list(cand)
    while len(out.accepted) < top_k and left and out.n_measured < most:
        want = top_k - len(out.accepted)
        share = {p: sum(prec_of[i] == p for i in left[:want]) for p in problems}
        for p, n in share.items():
            rows = [i for i in left if prec_of[i] == p]
            budget = most - out.n_measured
            if n == 0 or not rows or budget <= 0:
                continue

            def measure_p(d: str, archs, p=p):
                return measure(variants[p][d], archs)

            ver = verify_candidates(problems[p], table.take(np.array(rows)), n, measure_p, max_measure=budget,
                                    margin=margin)
            for rec in ver.records:
                rec["precision"], rec["device"] = p, variants[p][rec["device"]]
            out.records.extend(ver.records)
            out.accepted.extend(rows[i] for i in ver.accepted)
            out.measured.update({rows[i]: ms for i, ms in ver.measured.items()})
        left = [i for i in left if i not in out.measured]
    order = {i: k for k, i in enumerate(cand)}
    out.accepted = sorted(out.accepted, key=order.__getitem__)[:top_k]
    out.measured = dict(sorted(out.measured.items(), key=lambda kv: order[kv[0]]))
    return out


def _accuracy_report(problems: dict[str, Problem], table: Batch, prec_of: list[str], measured: dict[int, float],
                     chosen: list[int]) -> dict[str, Any]:
    """Predicted vs measured top-1 of every evaluated candidate and of the returned ones (bf16 /
    INT8 rows: the drop-adjusted prediction vs that artifact's measured top-1)."""
    def compare(rows: list[int]) -> dict[str, Any] | None:
        if not rows:
            return None
        pred = outputs.estimate(problems, table.m[rows], [prec_of[i] for i in rows])[0]
        true = np.array([measured[i] for i in rows])
        return regression_metrics(pred, true)

    from hwnas.supernet.data import BN_IMAGES

    return {"split": ACCURACY_SPLIT, "bn_images": BN_IMAGES, "evaluated": len(measured),
            "all_evaluated": compare(sorted(measured)), "returned": compare([i for i in chosen if i in measured])}


def _candidates(problem: Problem, archive: Batch, pareto: bool, top_k: int, fastest: dict[str, float]
                ) -> tuple[Batch, Batch, np.ndarray, list[int]]:
    """(distinct feasible subnets scored; the rows kept for the report: the front plus the best
    candidates; which of those are on the front; candidate positions in `table`, best first).

    Candidates are the front's members (`pareto`) or every feasible subnet, by predicted top-1."""
    tag = archive.cols.get(outputs.PRECISION_TAG)  # (subnet, precision) points are distinct
    key = archive.m if tag is None else np.column_stack([archive.m, tag.astype(archive.m.dtype)])
    uniq = archive.take(unique_rows(key))
    feasible = uniq.take(np.flatnonzero(uniq.feasible))
    if not len(feasible):
        raise BudgetError(f"the search found no subnet meeting {_budget_text(dict(problem.budgets))}; the "
                          f"fastest predicted: {', '.join(f'{d} {ms:.4g} ms' for d, ms in fastest.items())}")
    on_front = front_mask(problem.loss(feasible))
    pool = np.flatnonzero(on_front) if pareto else np.arange(len(feasible))
    order = pool[np.argsort(-feasible.cols[TOP1][pool], kind="stable")]
    keep = np.union1d(np.flatnonzero(on_front), order[:max(3 * top_k, 50)])
    pos = {int(k): i for i, k in enumerate(keep)}
    return feasible, feasible.take(keep), on_front[keep], [pos[int(i)] for i in order if int(i) in pos]


def _budget_labels(budgets: dict[str, float], variants: dict[str, dict[str, str]]) -> dict[str, float]:
    """Budgets keyed by the devices the latencies were of ("cpu-ort-int8", or "cpu-ort or
    cpu-ort-int8" for auto), for messages."""
    return {" or ".join(dict.fromkeys(v[d] for v in variants.values())): b for d, b in budgets.items()}


def _budget_text(budgets: dict[str, float]) -> str:
    return ", ".join(f"{b:g} ms on {d}" for d, b in budgets.items())


def _message(verify: bool, top_k: int, n_ok: int, ver: Verification, budgets: dict[str, float]) -> str:
    if not verify:
        return f"{top_k} best predicted subnets (not measured: verification was skipped)"
    if n_ok == 0:
        return (f"none of the {ver.n_measured} measured candidates met {_budget_text(budgets)} on the device: "
                "the latency predictor underestimates there; profile more subnets and refit it, or "
                "search with a lower latency budget")
    if n_ok < top_k:
        return (f"only {n_ok} of {top_k} subnets met {_budget_text(budgets)} when measured "
                f"({ver.n_measured} measured)")
    return f"{n_ok} subnets met {_budget_text(budgets)} when measured ({ver.n_measured} measured)"


def _latency_trust(run, latency: dict[str, dict[str, Any]], devices: list[str]) -> dict[str, Any]:
    """Each device's fp32 latency predictor on the run's held-out subnets (this search's
    verification measurements among them)."""
    from hwnas.latency.trust import held_out_quality

    models = latency.get("fp32") or next(iter(latency.values()))
    return {d: held_out_quality(run.run_dir, d, models[d]) for d in devices if d in models}


def _test_images(run, ids: dict[int, str]) -> dict[int, int]:
    """Test images each row's measured top-1 was evaluated on (the run's test-split table)."""
    from hwnas.accuracy.table import read_accuracy_table

    try:
        table = read_accuracy_table(run.run_dir, run.files.accuracy_split(ACCURACY_SPLIT).name, run.space)
    except (OSError, ValueError):
        return {}
    n = dict(zip(table["id"].astype(str), table["n"]))
    return {i: int(n[v]) for i, v in ids.items() if v in n and n[v] == n[v]}


def _check_memory(run, problem: Problem, table: Batch, prec_of: list[str], accepted: list[int],
                  s: SearchSettings, hooks: SearchHooks, progress: Progress | None
                  ) -> tuple[list[int], dict[int, dict[str, Any]]]:
    """The accepted candidates whose artifact holds the memory limits (`hwnas.search.memory_check`),
    and each one's record by table row."""
    from hwnas.search.memory_check import artifact_memory, judge_memory

    measure = hooks.measure_memory or artifact_memory(problem.space.family, run.n_classes)
    if progress is not None:
        progress("verify", message=f"exporting {len(accepted)} subnets to check their memory on the artifact")
    archs = problem.space.from_matrix(table.m[accepted]) if accepted else []
    ok, records = judge_memory(archs, [prec_of[i] for i in accepted],
                               {"ram_kb": s.max_ram_kb, "flash_kb": s.max_flash_kb}, measure)
    return [i for i, fits in zip(accepted, ok) if fits], dict(zip(accepted, records))


