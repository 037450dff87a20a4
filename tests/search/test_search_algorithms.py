from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import BudgetError, InputError
from hwnas.search.evolution import EvolutionSettings, evolution_search
from hwnas.search.nsga2 import NSGA2Settings, nsga2_search
from hwnas.search.pareto import front_mask, hypervolume
from hwnas.search.problem import Problem
from hwnas.search.random_search import random_search


def _hv(problem, outcome) -> float:
    b = outcome.archive
    loss = problem.loss(b)
    return hypervolume(loss[front_mask(loss, b.feasible)], problem.reference_point())


def test_evolution_meets_the_budget_and_beats_random_search(synth_problem):
    p = synth_problem
    out = evolution_search(p, EvolutionSettings(population=60, generations=40), seed=0)
    archive = out.archive
    assert archive.feasible.all()  # invalid children are redrawn, never kept
    assert (archive.cols["ms:dev"] <= p.budgets["dev"]).all()
    assert p.counters()["predictor_calls"] == 60 * 41  # one accuracy call per child, batched
    assert p.counters()["accuracy_batches"] == 41
    assert out.history[-1] >= out.history[0] and out.history == sorted(out.history)
    rnd = random_search(p, len(archive), seed=0).archive
    best_random = rnd.cols["top1"][rnd.feasible].max()
    assert archive.cols["top1"].max() > best_random


def test_nsga2_front_dominates_random_at_equal_calls(synth_problem):
    p = synth_problem
    nsga = nsga2_search(p, NSGA2Settings(population=50, generations=30), seed=0)
    calls = len(nsga.archive)
    rnd = random_search(p, calls, seed=0)
    assert len(rnd.archive) == calls
    assert _hv(p, nsga) > _hv(p, rnd)
    assert nsga.history[-1] <= nsga.archive.cols["top1"][nsga.archive.feasible].max()


def test_impossible_budget_names_the_fastest_subnet(small_space):
    from search_stubs import MacsLatency, SynthAccuracy

    lat = MacsLatency()
    fastest = float(lat.predict(small_space.to_matrix([small_space.min_arch()]))[0])
    p = Problem(small_space, SynthAccuracy(), {"dev": lat}, {"dev": fastest * 0.9}, n_classes=10)
    with pytest.raises(BudgetError) as err:
        p.check_budgets()
    msg = str(err.value)
    assert "\n" not in msg and f"{fastest:.4g} ms" in msg and "'dev'" in msg
    ok = Problem(small_space, SynthAccuracy(), {"dev": lat}, {"dev": fastest * 1.001}, n_classes=10)
    assert ok.check_budgets()["dev"] == pytest.approx(fastest)
    out = evolution_search(ok, EvolutionSettings(population=20, generations=5))  # tight but possible
    assert out.archive.feasible.all()


def test_several_devices_macs_objective_and_a_non_additive_predictor(small_space):
    from search_stubs import LogLatency, MacsLatency, SynthAccuracy

    lat, slow = MacsLatency(), LogLatency()
    m = small_space.sample_matrix(300, 0)
    budgets = {"a": float(np.median(lat.predict(m))), "b": float(np.quantile(slow.predict(m), 0.7))}
    p = Problem(small_space, SynthAccuracy(), {"a": lat, "b": slow}, budgets,
                objectives=("top1", "ms:a", "macs"), n_classes=10)
    assert p.cost_models.tabulated() == {"ms:a": True, "ms:b": False, "macs": True}
    out = nsga2_search(p, NSGA2Settings(population=30, generations=8), seed=1)
    b = out.archive
    assert set(b.cols) >= {"top1", "ms:a", "ms:b", "macs"}
    front = front_mask(p.loss(b), b.feasible)
    assert front.any()
    assert (b.cols["ms:a"][front] <= budgets["a"]).all() and (b.cols["ms:b"][front] <= budgets["b"]).all()
    assert len(p.reference_point()) == 3 and _hv(p, out) > 0


def test_problem_rejects_bad_objectives_and_budgets(small_space):
    from search_stubs import MacsLatency, SynthAccuracy

    with pytest.raises(InputError, match="objectives"):
        Problem(small_space, SynthAccuracy(), {"a": MacsLatency()}, {"a": 1.0}, objectives=("ms:a",))
    with pytest.raises(InputError, match="positive"):
        Problem(small_space, SynthAccuracy(), {"a": MacsLatency()}, {"a": -1.0})


def test_algorithms_come_from_one_registry_and_check_settings_in_one_place(tmp_path):
    """The CLI's --algo choices are the registry; bad settings are one line before any work."""
    from hwnas.cli import Algo
    from hwnas.search.algorithms import SearchRequest, algorithm_names, get_algorithm

    assert [a.value for a in Algo] == list(algorithm_names())
    assert {"evolution", "nsga2", "random", "optuna-nsga2", "optuna-tpe"} <= set(algorithm_names())
    with pytest.raises(InputError, match="unknown search algorithm 'annealing'"):
        get_algorithm("annealing")
    with pytest.raises(InputError, match="^workers and storage apply to optuna-nsga2, optuna-tpe"):
        get_algorithm("evolution").check(SearchRequest(tmp_path, workers=2))
    with pytest.raises(InputError, match="^population must be at least 1"):
        get_algorithm("nsga2").check(SearchRequest(tmp_path, population=0))
    get_algorithm("optuna-tpe").check(SearchRequest(tmp_path, workers=2, storage="x.journal"))


def test_every_algorithm_loads_its_modules_before_the_search_clock():
    import sys

    from hwnas.search.algorithms import algorithm_names, get_algorithm

    for name in algorithm_names():
        algo = get_algorithm(name)
        assert algo.modules, name  # run_search imports them before it times the search
        algo.load()
        assert all(m in sys.modules for m in algo.modules)
