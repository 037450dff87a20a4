"""Kills, reruns and two processes on one folder: stale locks, orphaned workers, leftovers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from fault_stubs import sigint_at_default
from hwnas.errors import InputError

HERE = Path(__file__).parent


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until(condition, what: str, limit_s: float = 60.0) -> None:
    """Poll `condition` (a guard against hanging, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.05)


# -- item 3: a killed Optuna search must not hang its rerun ------------------------------------------
RERUN = """
import optuna
from hwnas.search.optuna_search import make_storage
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(study_name="s", storage=make_storage("run/optuna.journal"),
                            load_if_exists=True)
print("trials", len(study.trials))
"""


@pytest.mark.parametrize("stale", ["optuna-symlink-lock", "hwnas-lock-of-a-dead-process"])
def test_rerun_with_a_relative_run_and_a_stale_journal_lock_finishes(tmp_path, stale):
    """The rerun of a killed search (`--run run`, relative) found `optuna.journal.lock` left by
    the killed process and spun at 100% CPU forever."""
    (tmp_path / "run").mkdir()
    lock = tmp_path / "run" / "optuna.journal.lock"
    if stale == "optuna-symlink-lock":
        os.symlink("run/optuna.journal", lock)  # what Optuna's lock made of the relative path
        old = time.time() - 3600
        os.utime(lock, (old, old), follow_symlinks=False)
    else:
        lock.write_text(f"{dead_pid()} {socket.gethostname()}\n")
    proc = subprocess.run([sys.executable, "-c", RERUN], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)  # the timeout only guards against the hang
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "trials 0" and not lock.exists() and not lock.is_symlink()


def test_a_journal_lock_held_by_a_live_process_is_one_clear_error(tmp_path):
    from hwnas.search.optuna_search import JournalLock

    journal = str(tmp_path / "optuna.journal")
    Path(journal + ".lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")
    with pytest.raises(InputError, match=f"held for more than 0.2 s by process {os.getpid()}"
                       ".*delete the lock file") as err:
        JournalLock(journal, stale_s=0.2).acquire()
    assert "\n" not in str(err.value)
    assert Path(journal + ".lock").exists()  # a live holder's lock is never removed


def test_a_journal_lock_of_a_dead_process_is_taken_over(tmp_path):
    from hwnas.search.optuna_search import JournalLock

    journal = str(tmp_path / "optuna.journal")
    Path(journal + ".lock").write_text(f"{dead_pid()} {socket.gethostname()}\n")
    lock = JournalLock(journal)
    assert lock.acquire()
    assert Path(journal + ".lock").read_text().split()[0] == str(os.getpid())
    lock.release()
    assert not Path(journal + ".lock").exists()


# -- item 5: killing `hwnas search --workers 2` kills its workers ---------------------------------
SEARCH = """
import sys
sys.path.insert(0, {stubs!r})
from fault_stubs import slow_problem
from hwnas.search.optuna_search import optuna_search

if __name__ == "__main__":
    optuna_search(slow_problem({markers!r}), "nsga2", 100000, {journal!r}, "s", workers=2,
                  population=10)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_killing_a_parallel_search_ends_its_workers(tmp_path, sig):
    markers = tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "search.py"
    script.write_text(SEARCH.format(stubs=str(HERE), markers=str(markers),
                                    journal=str(tmp_path / "optuna.journal")))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"},
                            preexec_fn=sigint_at_default)
    workers: list[int] = []
    try:
        def two_workers_busy() -> bool:
            assert proc.poll() is None, proc.stderr.read().decode()
            workers[:] = [int(p.name) for p in markers.iterdir() if int(p.name) != proc.pid]
            return len(workers) >= 2

        wait_until(two_workers_busy, "two search workers at work", 120)
        os.kill(proc.pid, sig)  # the parent only, as `kill PID` does
        proc.wait(timeout=60)  # SIGINT: the parent must not wait for its workers' whole share
        wait_until(lambda: not any(alive(p) for p in workers), f"workers {workers} to end")
    finally:
        for pid in [proc.pid, *workers]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)


# -- item 9: two `hwnas train` on one --out; the log after a kill -----------------------------------
HOLD = """
import sys, time
from hwnas.fileio import file_lock
with file_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_training_on_the_same_out_is_refused(tmp_path, monkeypatch, capsys):
    import hwnas.supernet.train as train
    from hwnas.cli import main

    class Started(Exception):
        pass

    def started(*args, **kwargs):
        raise Started  # stands for the training itself: never run here

    monkeypatch.setattr(train, "build_loaders", started)
    monkeypatch.setenv("HWNAS_NO_PROGRESS", "1")
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out / train.TRAIN_LOCK)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        cfg = train.load_train_config(None)
        with pytest.raises(InputError, match="is being trained by another process") as err:
            train.train_supernet(cfg, out)
        assert "\n" not in str(err.value)
        with pytest.raises(SystemExit) as done:
            main(["train", "--out", str(out)])
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert done.value.code == 2 and len(lines) == 1
        assert "is being trained by another process" in lines[0]
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(Started):  # the holder is gone (killed): its lock went with it
        train.train_supernet(train.load_train_config(None), out)


def test_resuming_drops_log_records_the_checkpoint_does_not_hold(tmp_path):
    from hwnas.supernet.train import _clean_log

    phases = [SimpleNamespace(name=n) for n in ("full", "kernel", "depth-2")]
    log = tmp_path / "train_log.jsonl"
    records = [{"phase": "full", "epoch": e, "loss": 1.0} for e in (1, 2, 3)]
    records += [{"phase": "kernel", "epoch": e, "loss": 0.5} for e in (1, 2, 3, 3)]  # 3 twice
    records += [{"phase": "depth-2", "epoch": 1, "loss": 0.2}]
    text = "".join(json.dumps(r) + "\n" for r in records) + '{"phase": "kernel", "ep'  # cut off
    log.write_text(text)
    # the checkpoint holds kernel epochs 1-2: epoch 3 is trained (and logged) again
    _clean_log(log, phases, {"phase_index": 1, "epoch": 2, "step": 17, "done": False})
    kept = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["phase"], r["epoch"]) for r in kept] == [("full", 1), ("full", 2), ("full", 3),
                                                        ("kernel", 1), ("kernel", 2)]
    assert log.read_text().endswith("\n")
    _clean_log(log, phases, {"phase_index": 3, "epoch": 0, "step": 0, "done": True})
    assert len(log.read_text().splitlines()) == 5  # a finished run keeps its log


# -- item 9: scratch folders of killed profiles --------------------------------------------------------
def test_a_profile_removes_scratch_folders_of_killed_profiles(tmp_path, tiny_supernet,
                                                            monkeypatch):
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import profile
    from hwnas.run import open_run

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    stale = scratch / f"hwnas-cpu-ort-pid{dead_pid()}-k1ll3d00"
    (stale / "reference").mkdir(parents=True)
    (stale / "reference" / "model.onnx").write_bytes(b"x" * 4096)
    live = scratch / f"hwnas-cpu-ort-pid{os.getppid()}-l1v3l1v3"  # another, running profile
    live.mkdir()
    other = scratch / "unrelated-pid1-folder"
    other.mkdir()
    seen: list[list[str]] = []
    run = open_run(tmp_path / "run", tiny_supernet)
    res = profile(run, ["cpu-ort"], 1, protocol=ProtocolSettings(rounds=1, runs=2),
                  progress=lambda *a: seen.append(sorted(p.name for p in scratch.iterdir())))
    assert res[0]["measured"] == 1
    assert not stale.exists() and live.is_dir() and other.is_dir()
    mine = {n for names in seen for n in names if n.startswith(f"hwnas-cpu-ort-pid{os.getpid()}-")}
    assert mine and not any((scratch / n).exists() for n in mine)  # named by pid, removed after


_APPENDER = """
import sys
from hwnas.profiling.store import MeasurementStore
from hwnas.space import FLAT_COLUMNS
store = MeasurementStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    row = {"device": "cpu-ort", "kind": "subnet", "key": f"{sys.argv[2]}-{i}", "corrected_ms": 1.0,
           "median_ms": 1.0, **{c: 3 for c in FLAT_COLUMNS}}
    store.append([row])
"""


def test_two_profiles_on_one_run_keep_every_row(tmp_path):
    """Two processes appending to one run's measurement store at once: every row survives (the
    store re-reads and writes under an inter-process lock; an in-process lock lost rows)."""
    import subprocess
    import sys

    from hwnas.profiling.store import read_measurements

    script = tmp_path / "append.py"
    script.write_text(_APPENDER)
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), tag, "40"]) for tag in ("a", "b")]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    keys = set(read_measurements(tmp_path)["key"])
    assert keys == {f"{t}-{i}" for t in ("a", "b") for i in range(40)}


_ANCHOR_WRITER = """
import sys
from pathlib import Path
from hwnas.profiling.anchors import AnchorBook
from hwnas.devices.stats import summarize
book = AnchorBook(Path(sys.argv[1]) / "anchors.json")
for i in range(int(sys.argv[3])):
    book.put(f"{sys.argv[2]}-{i}", summarize([1.0, 1.1], warmup=0), {"device": sys.argv[2]})
"""


def test_two_processes_calibrating_anchors_keep_every_anchor(tmp_path):
    """The host's anchor book is shared by every run: concurrent writers must not drop entries."""
    import subprocess
    import sys

    from hwnas.profiling.anchors import AnchorBook

    script = tmp_path / "put.py"
    script.write_text(_ANCHOR_WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), dev, "300"]) for dev in ("a", "b")]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    book = AnchorBook(tmp_path / "anchors.json")
    assert {e["key"] for dev in ("a", "b") for e in book.entries(dev)} == {f"{d}-{i}" for d in "ab" for i in range(300)}


def test_reading_the_store_while_a_profile_appends_never_fails(tmp_path):
    """A reader (the dashboard, a second `hwnas` command) sees one whole version of the store while
    another process renames new ones over it; pyarrow given a path read a new file with the old
    file's size ("Unexpected end of stream")."""
    from hwnas.profiling.store import read_measurements

    script = tmp_path / "append.py"
    script.write_text(_APPENDER)
    writer = subprocess.Popen([sys.executable, str(script), str(tmp_path), "a", "200"])
    reads = 0
    try:
        while writer.poll() is None:
            if (tmp_path / "measurements.parquet").exists():
                read_measurements(tmp_path)
                reads += 1
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.wait() == 0 and reads > 0
    assert len(read_measurements(tmp_path)) == 200
