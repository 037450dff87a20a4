"""Search with Optuna's samplers: NSGA-II and multivariate multi-objective TPE.

Each flat column of the space (any family's `flat_columns`) is one
categorical parameter over its `column_choices()` (the int-matrix codes), suggested in every trial,
so the search space is fixed (samplers model all of it); genes a network does not use (slots past
a stage's depth) are ignored when the row is made canonical. Trials are asked in batches, the batch is scored with one call of each predictor,
and every trial is told its objective values after its constraints are set with
`Trial.set_constraint` (Optuna 5 reads constraints from the trial for both samplers; the older
`constraints_func` argument is deprecated there).

Storage is a local journal file by default (safe across processes, unlike SQLite) or any Optuna
storage URL, e.g. PostgreSQL, so workers on several machines share one study. The `workers`
processes started here split the requested trials exactly; workers started elsewhere with the
same storage and study name add their own.
"""

from __future__ import annotations

import os
import socket
import stat
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwnas.errors import InputError
from hwnas.latency.base import single_thread
from hwnas.search.problem import TOP1, Batch, Problem, SearchOutcome

__all__ = ["SAMPLERS", "make_storage", "describe_storage", "optuna_search", "study_outcome",
           "run_worker"]

SAMPLERS = ("nsga2", "tpe")
_LOCK_STALE_S = 30.0  # a journal lock older than this, whose holder cannot be checked, is stale


def _optuna():
    import optuna

    return optuna


def _distributions(space) -> dict[str, Any]:
    """One categorical distribution per flat column of `space` (any family), over its codes."""
    from optuna.distributions import CategoricalDistribution

    return {c: CategoricalDistribution([int(v) for v in choices])
            for c, choices in zip(space.flat_columns, space.column_choices())}


def _rows(space, trials) -> np.ndarray:
    """The canonical int matrix of trials' parameters."""
    cols = space.flat_columns
    return space.canonical(np.array([[t.params[c] for c in cols] for t in trials], dtype=np.int32))


def make_storage(spec: str | Path):
    """An Optuna storage: a URL (``postgresql://...``, ``sqlite:///...``) or a journal file path.

    A URL is handed to Optuna as a string: it then wraps the database in its caching layer, which
    reads only new trials each time (a worker re-reads the study before every batch)."""
    optuna = _optuna()
    text = str(spec)
    if "://" in text:
        return text
    from optuna.storages.journal import JournalFileBackend

    # absolute: Optuna's default lock made a symlink to the journal's path as given, which from
    # a relative --run dangles, and its acquire loop then spins at 100% CPU forever
    path = os.path.abspath(os.path.expanduser(text))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalLock(path)))


class JournalLock:
    """The journal file's writer lock (Optuna's `BaseJournalFileLock` interface): the file
    ``<journal>.lock`` made with O_EXCL, holding ``<pid> <host>`` of its holder.

    It excludes Optuna's own locks on the same journal (they create the same path), and it is
    never left stale: a lock whose holder process on this host is gone is cleared at once; a
    lock without a holder this host can check (another host's, or Optuna's symlink lock) is
    cleared once it is older than `stale_s` (an append holds it for milliseconds). Waiting
    sleeps (no spinning); a lock held longer than `stale_s` by a live process is an InputError
    line naming the file and its holder."""

    def __init__(self, journal: str, stale_s: float = _LOCK_STALE_S):
        self.path = journal + ".lock"
        self.stale_s = stale_s
        self.host = socket.gethostname()

    def acquire(self) -> bool:
        delay, since, seen = 0.001, time.monotonic(), None
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                found = self._clear_if_stale()
                if found is None:
                    continue
                holder, ident = found
                if ident != seen:  # another holder: the wait for this one starts now
                    since, seen = time.monotonic(), ident
                if time.monotonic() - since > self.stale_s:
                    raise InputError(f"the Optuna journal lock {self.path} has been held for more "
                                     f"than {self.stale_s:g} s by {holder}; if no search uses "
                                     f"{self.path[:-5]} any more, delete the lock file")
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()} {self.host}\n")
            return True

    def release(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _clear_if_stale(self) -> tuple[str, tuple[int, int]] | None:
        """Remove the lock file when its holder is gone; None when the name is free now, else
        (a description of the live holder, the lock file's identity)."""
        from hwnas.fileio import pid_alive

        try:
            st = os.lstat(self.path)
            holder = "" if stat.S_ISLNK(st.st_mode) else Path(self.path).read_text()[:200]
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError):
            holder = ""
        pid, _, host = holder.strip().partition(" ")
        age = time.time() - st.st_mtime
        ident = (st.st_ino, st.st_dev)
        if pid.isdigit() and host == self.host:
            if pid_alive(int(pid)):
                return f"process {pid} on this host", ident
        elif age <= self.stale_s:
            return f"process {pid} on {host}" if host else "another process", ident
        aside = f"{self.path}.{uuid.uuid4().hex}.stale"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return None
        moved = os.lstat(aside)
        if (moved.st_ino, moved.st_dev) != (st.st_ino, st.st_dev):  # replaced meanwhile: put back
            try:
                os.link(aside, self.path, follow_symlinks=False)
            except OSError:
                pass
        os.unlink(aside)
        return None


def describe_storage(spec: str | Path) -> str:
    """The storage for reports, without a password."""
    text = str(spec)
    if "://" not in text:
        return f"journal:{text}"
    try:
        from sqlalchemy.engine import make_url

        return make_url(text).render_as_string(hide_password=True)
    except Exception:  # not an SQLAlchemy URL: hide everything between :// and @
        head, _, rest = text.partition("://")
        return f"{head}://***@{rest.split('@', 1)[1]}" if "@" in rest else text


def _sampler(kind: str, seed: int, population: int, batch: int):
    optuna = _optuna()
    if kind == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    if kind == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, seed=seed, constant_liar=batch > 1,
                                          n_startup_trials=min(population, 100))
    raise InputError(f"unknown Optuna sampler {kind!r}; use one of {', '.join(SAMPLERS)}")


def _directions(problem: Problem) -> list[str]:
    return ["maximize" if o == TOP1 else "minimize" for o in problem.objectives]


def _quiet():
    """Optuna logs every finished trial at INFO; a search tells thousands."""
    optuna = _optuna()
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return level


class _Mirror:
    """A worker's in-memory copy of the shared study.

    `Study.ask` writes every suggested parameter to the storage as its own record (46 here, plus
    constraints and the result): with a journal file that is ~50 fsyncs per trial, with PostgreSQL
    ~50 transactions. So the sampler runs on a local in-memory study that mirrors the shared one's
    completed trials, and each finished trial goes to the shared study in one write (`add_trials`).
    Trials this worker wrote carry its tag and are not mirrored back."""

    TAG = "hwnas_worker"

    def __init__(self, shared, sampler, directions: list[str], tag: str):
        optuna = _optuna()
        self.shared, self.tag = shared, tag
        self.local = optuna.create_study(directions=directions, sampler=sampler)
        self._seen: set[int] = set()  # numbers of the shared trials already looked at

    def sync(self) -> None:
        optuna = _optuna()
        trials = self.shared.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        new = [t for t in trials if t.number not in self._seen]
        self._seen.update(t.number for t in new)
        new = [t for t in new if t.user_attrs.get(self.TAG) != self.tag]
        if new:
            self.local.add_trials(new)


def run_worker(problem: Problem, storage: str | Path, study_name: str, kind: str, n_trials: int, *,
               batch: int, population: int, seed: int, tag: str | None = None,
               progress: Callable[..., Any] | None = None) -> int:
    """Ask/score/tell exactly `n_trials` trials into an existing study, `batch` at a time; returns
    how many it added. Runs in the caller's process or in a worker (the problem arrives pickled)."""
    import uuid

    optuna = _optuna()
    level = _quiet()
    try:
        shared = optuna.load_study(study_name=study_name, storage=make_storage(storage))
        mirror = _Mirror(shared, _sampler(kind, seed, population, batch), _directions(problem),
                         tag or uuid.uuid4().hex)
        local = mirror.local
        dists = _distributions(problem.space)
        limits = problem.limits
        done = 0
        with single_thread():
            while done < n_trials:
                mirror.sync()
                trials = [local.ask(dists) for _ in range(min(batch, n_trials - done))]
                m = _rows(problem.space, trials)
                scored = problem.evaluate(m)
                values = np.stack([scored.cols[o] for o in problem.objectives], axis=1)
                finished = []
                for i, t in enumerate(trials):
                    for key, limit in limits.items():
                        t.set_constraint(key, float(scored.cols[key][i] - limit))
                    t.set_user_attr(_Mirror.TAG, mirror.tag)
                    finished.append(local.tell(t, values[i].tolist()))
                shared.add_trials(finished)
                done += len(finished)
                if progress:
                    progress("search", done=done, total=n_trials)
        return done
    finally:
        optuna.logging.set_verbosity(level)


def _die_with_parent(parent: int) -> None:
    """Pool initializer: a worker ends when the search process does (killed, Ctrl-C) instead of
    running its whole share alone. Linux: PR_SET_PDEATHSIG sends it SIGTERM when its parent dies;
    elsewhere (and if the parent died before that was set) a watchdog thread notices the
    reparenting. Ctrl-C reaches the whole process group: the parent stops the workers, so they
    ignore SIGINT themselves (no traceback from every worker)."""
    import signal
    import sys
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # died before the prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="hwnas-parent-watch").start()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate a pool's worker processes now (shutdown alone waits for their whole share)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown forgets them
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()


def study_outcome(problem: Problem, storage: str | Path, study_name: str) -> Batch:
    """Every completed trial of the study as a scored batch (objective and constrained columns,
    violation from the stored constraints), rows in canonical form."""
    optuna = _optuna()
    study = optuna.load_study(study_name=study_name, storage=make_storage(storage))
    trials = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not trials:
        return Batch.concat([], width=len(problem.space.flat_columns))
    m = _rows(problem.space, trials)
    values = np.array([t.values for t in trials], dtype=np.float64)
    cols = {o: values[:, i] for i, o in enumerate(problem.objectives)}
    violation = np.zeros(len(trials))
    for key, limit in problem.limits.items():
        c = np.array([t.constraints.get(key, np.inf) for t in trials], dtype=np.float64)
        cols.setdefault(key, c + limit)
        violation += np.maximum(c, 0.0) / limit
    cols["trial"] = np.array([t.number for t in trials], dtype=np.float64)
    return Batch(m, cols, violation)


def optuna_search(problem: Problem, kind: str, n_trials: int, storage: str | Path, study_name: str, *,
                  workers: int = 1, batch: int | None = None, population: int = 100, seed: int = 0,
                  progress: Callable[..., Any] | None = None) -> SearchOutcome:
    """Add `n_trials` trials to the study (created if new) with `workers` processes, then return
    every completed trial of the study as the archive."""
    optuna = _optuna()
    if kind not in SAMPLERS:
        raise InputError(f"unknown Optuna sampler {kind!r}; use one of {', '.join(SAMPLERS)}")
    if n_trials < 1 or workers < 1:
        raise InputError(f"n_trials and workers must be at least 1, got {n_trials} and {workers}")
    batch = batch or (population if kind == "nsga2" else 10)
    level = _quiet()
    try:
        study = optuna.create_study(study_name=study_name, storage=make_storage(storage),
                                    directions=_directions(problem), load_if_exists=True)
    finally:
        optuna.logging.set_verbosity(level)
    if [d.name.lower() for d in study.directions] != _directions(problem):
        raise InputError(f"study '{study_name}' in {describe_storage(storage)} optimises other objectives; "
                         "use another study name or storage")
    before = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    start = time.perf_counter()
    shares = [n_trials // workers + (i < n_trials % workers) for i in range(workers)]
    kw = {"batch": batch, "population": population}
    if workers == 1:
        run_worker(problem, storage, study_name, kind, n_trials, seed=seed, progress=progress, **kw)
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                                 initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
            try:
                futures = [pool.submit(run_worker, problem, storage, study_name, kind, q,
                                       seed=seed + i, **kw)
                           for i, q in enumerate(shares) if q]
                while not all(f.done() for f in futures):
                    time.sleep(0.5)
                    if progress:
                        n = len(study.get_trials(deepcopy=False,
                                                 states=(optuna.trial.TrialState.COMPLETE,)))
                        progress("search", done=n - before, total=n_trials)
                for f in futures:
                    f.result()
            except BaseException:  # Ctrl-C, SIGTERM (as an exception), a worker's error
                _stop_workers(pool)
                raise
        n_batches = sum(-(-q // batch) for q in shares)  # scored in the workers
        problem.usage.scored_elsewhere(n_trials, n_batches)
    archive = study_outcome(problem, storage, study_name)
    return SearchOutcome(archive, [], {
        "sampler": kind, "n_trials": n_trials, "workers": workers, "batch": batch,
        "population": population, "study_name": study_name, "storage": describe_storage(storage),
        "trials_before": before, "trials_in_study": len(archive),
        "optuna_s": time.perf_counter() - start})
