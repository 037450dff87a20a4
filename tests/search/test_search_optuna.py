"""Optuna search on shared storage: a journal file (default) and a real PostgreSQL server, with
two worker processes on one study. The study must end with exactly the requested trials."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from hwnas.search.optuna_search import describe_storage, make_storage, optuna_search, study_outcome
from hwnas.search.pareto import front_mask


def _check_study(problem, storage, name: str, n_expected: int, n_workers: int) -> None:
    import optuna

    study = optuna.load_study(study_name=name, storage=make_storage(storage))
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == n_expected  # none lost, none extra
    assert {t.state for t in trials} == {optuna.trial.TrialState.COMPLETE}
    assert sorted(t.number for t in trials) == list(range(n_expected))  # none duplicated
    per_worker: dict[str, int] = {}
    for t in trials:
        per_worker[t.user_attrs["hwnas_worker"]] = per_worker.get(t.user_attrs["hwnas_worker"], 0) + 1
        assert set(t.constraints) == {"ms:dev"}
    assert sorted(per_worker.values()) == sorted([n_expected // n_workers] * n_workers)
    archive = study_outcome(problem, storage, name)
    front = front_mask(problem.loss(archive), archive.feasible)
    assert front.any()
    assert (archive.cols["ms:dev"][front] <= problem.budgets["dev"]).all()
    # a valid front: no feasible trial dominates a front member
    loss = problem.loss(archive)[archive.feasible]
    for f in problem.loss(archive)[front]:
        assert not ((loss <= f).all(axis=1) & (loss < f).any(axis=1)).any()


def test_optuna_samplers_in_process_with_the_journal_file(synth_problem, tmp_path):
    journal = tmp_path / "optuna.journal"
    out = optuna_search(synth_problem, "nsga2", 60, journal, "nsga", population=20, seed=0)
    assert len(out.archive) == 60 and synth_problem.counters()["accuracy_batches"] == 3  # asked 20 at a time
    _check_study(synth_problem, journal, "nsga", 60, 1)
    more = optuna_search(synth_problem, "nsga2", 20, journal, "nsga", population=20, seed=1)
    assert len(more.archive) == 80 and more.info["trials_before"] == 60  # a rerun adds to the study
    tpe = optuna_search(synth_problem, "tpe", 24, journal, "tpe", population=10, batch=8, seed=0)
    assert len(tpe.archive) == 24
    assert describe_storage(journal) == f"journal:{journal}"


def test_two_workers_share_one_journal_study(synth_problem, tmp_path):
    journal = tmp_path / "shared.journal"
    out = optuna_search(synth_problem, "nsga2", 40, journal, "shared", workers=2, population=10, seed=0)
    assert out.info["workers"] == 2 and len(out.archive) == 40
    _check_study(synth_problem, journal, "shared", 40, 2)


# -- PostgreSQL -----------------------------------------------------------------------------------
def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).parent if which else None


def _as_user() -> list[str]:
    """initdb refuses to run as root: run the server as the 'postgres' (or 'nobody') user."""
    if os.geteuid() != 0:
        return []
    import pwd

    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        if shutil.which("runuser"):
            return ["runuser", "-u", user, "--"]
    pytest.skip("running as root and no 'postgres'/'nobody' user with runuser to start PostgreSQL as")


@pytest.fixture
def postgres_url():
    """A throwaway PostgreSQL server on 127.0.0.1 (initdb + pg_ctl in a temp dir), stopped after.
    CI must install the server: `apt-get install -y postgresql` (Debian)."""
    pytest.importorskip("psycopg", reason="needs psycopg 3: pip install 'psycopg[binary]' (hwnas[postgres])")
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server not installed (apt-get install -y postgresql)")
    prefix = _as_user()
    root = Path(tempfile.mkdtemp(prefix="hwnas-pg-"))
    os.chmod(root, 0o777)
    data, log = root / "data", root / "server.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def run(*args) -> None:
        subprocess.run([*prefix, *map(str, args)], check=True, capture_output=True, text=True)

    try:
        run(bindir / "initdb", "-D", data, "-U", "hwnas", "--auth=trust", "-E", "UTF8", "--no-sync")
        run(bindir / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "start", "-o",
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off")
        yield f"postgresql://hwnas@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_one_postgres_study(synth_problem, postgres_url):
    out = optuna_search(synth_problem, "nsga2", 40, postgres_url, "pg", workers=2, population=10, seed=0)
    assert len(out.archive) == 40
    _check_study(synth_problem, postgres_url, "pg", 40, 2)
    assert "hwnas@127.0.0.1" in describe_storage(postgres_url)
    np.testing.assert_array_equal(out.archive.feasible, out.archive.violation <= 0)
