"""The agent's measuring process: it builds and times the models, and is killed when it overruns.

A received model is untrusted work for a runtime: a 394-byte `Loop` with 10^12 trips never
returns from `session.run`. Runtime calls cannot be interrupted reliably from Python (ONNX
Runtime's `RunOptions.terminate` exists for ONNX Runtime's runs alone; session building,
OpenVINO's compile and TensorRT's engine build have no such switch), so the agent measures in a
child process (`python -m hwnas.devices.agent.worker`) and kills it when a limit passes: the
device is free again at once, and the next request starts a fresh child.

Parent (`MeasureWorker`) and child talk JSON lines over the child's stdin/stdout (never pickle).
The child publishes what it is doing in a 32-byte shared file (`_Beat`: phase, since when, which
model, seconds spent building so far), written around every runtime call, so the parent can time
one inference without a message per inference (which would disturb the timings):

    phase COMPILE  building and loading one model          limit: per job (`run(compile_s=)`)
    phase RUN      one inference (or staging its input)    limit `run_timeout_s`
    all but COMPILE  the rest of the request               limit `request_timeout_s`
"""

from __future__ import annotations

import json
import mmap
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hwnas.devices.agent.wire import Refusal

__all__ = ["WorkerLimits", "MeasureWorker", "main"]

_IDLE, _COMPILE, _RUN = 0.0, 1.0, 2.0
_BEAT = struct.Struct("=dddd")  # phase, monotonic time it began, model index, seconds built
_POLL_S = 0.1


@dataclass(frozen=True)
class WorkerLimits:
    run_timeout_s: float
    request_timeout_s: float  # building time (limited per model) not counted


class _Beat:
    """The child's phase in a small shared file; the parent reads it, the child writes it."""

    def __init__(self, path: Path):
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), _BEAT.size)
        self.built_s = 0.0  # the child's: seconds the current job has spent building models

    def set(self, phase: float, index: int) -> None:
        _BEAT.pack_into(self._map, 0, phase, time.monotonic(), float(index), self.built_s)

    def read(self) -> tuple[float, float, int, float]:
        while True:  # two equal reads: not torn by a write in between
            first, second = self._map[:_BEAT.size], self._map[:_BEAT.size]
            if first == second:
                phase, since, index, built_s = _BEAT.unpack(first)
                return phase, since, int(index), built_s

    def clear(self) -> None:
        self._map[:_BEAT.size] = bytes(_BEAT.size)

    def close(self) -> None:
        self._map.close()


# -- the parent's side --------------------------------------------------------------------------
class MeasureWorker:
    """The child process that measures for an agent: one job at a time (the agent's lock)."""

    def __init__(self, workdir: Path, limits: WorkerLimits):
        self.workdir, self.limits = workdir, limits
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        workdir.mkdir(parents=True, exist_ok=True)
        self._beat_path = workdir / f".worker-{os.getpid()}-{id(self):x}.beat"
        self._beat_path.write_bytes(bytes(_BEAT.size))
        self._beat = _Beat(self._beat_path)  # one file for every child this object starts
        self._cancel: str | None = None
        # Linux delivers the child's "parent died" signal when the *thread* that started it
        # ends, so children are started from one thread that lives as long as the agent
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="hwnas-agent-spawn")

    def run(self, job: dict[str, Any], labels: list[str], compile_s: float) -> dict[str, Any]:
        """The child's answer to `job`; a `Refusal` when a limit passes (building one model
        takes `compile_s`, one inference `run_timeout_s`, the rest `request_timeout_s`) or the
        child dies (it is killed, so the device is free), or 503 when `cancel` stopped it."""
        self._cancel = None
        self._send(json.dumps(job) + "\n")
        start = time.monotonic()
        while True:
            try:
                line = self._lines.get(timeout=_POLL_S)
            except queue.Empty:
                self._check(start, labels, compile_s)
                continue
            if line is None:
                self._check(start, labels, compile_s)  # killed on purpose: say why
                raise Refusal(422, "measurement_failed", f"the measuring process died "
                              f"({self._reap()}) while measuring this request's models")
            return json.loads(line)

    def cancel(self, reason: str) -> None:
        """Stop the job in progress now (from another thread: the agent is stopping)."""
        self._cancel = reason
        self._kill()

    def close(self) -> None:
        self._kill()
        self._beat_path.unlink(missing_ok=True)  # a later job makes a new one

    # -- internals ---------------------------------------------------------------------------
    def _send(self, text: str) -> None:
        for attempt in (1, 2):  # an idle child that died since the last job is replaced once
            if self._proc is None:
                self._spawner.submit(self._start).result()
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(text)
                self._proc.stdin.flush()
                return
            except OSError:  # BrokenPipeError: it died
                self._reap()
                if attempt == 2:
                    raise Refusal(503, "worker_failed", "the agent's measuring process cannot "
                                  "be started; see the agent's log", retry_after=5) from None

    def _start(self) -> None:
        """Start a child (in the spawner thread); its answers are queued by a reader thread."""
        import hwnas

        if not self._beat_path.exists():  # closed before, or the state dir was wiped
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._beat_path.write_bytes(bytes(_BEAT.size))
            self._beat = _Beat(self._beat_path)
        self._beat.clear()
        env = dict(os.environ)  # the child imports hwnas from wherever this process did
        root = str(Path(hwnas.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hwnas.devices.agent.worker", str(self._beat_path),
             str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            encoding="utf-8", cwd=self.workdir, env=env,  # cwd: no path resolves elsewhere
            start_new_session=True)  # a Ctrl-C in the agent's terminal is the agent's to handle
        self._lines = queue.Queue()
        threading.Thread(target=_read_lines, args=(self._proc.stdout, self._lines),
                         daemon=True, name="hwnas-agent-worker-reader").start()

    def _check(self, start: float, labels: list[str], compile_s: float) -> None:
        """Kill the child and refuse the request when a limit has passed (or on `cancel`)."""
        if self._cancel is not None:
            self._kill()
            raise Refusal(503, "stopping", self._cancel, retry_after=5)
        if (why := self._overrun(start, labels, compile_s)) is not None:
            self._kill()
            raise Refusal(422, "time_limit", f"{why}; the measurement was stopped and the "
                          "device is free again")

    def _overrun(self, start: float, labels: list[str], compile_s: float) -> str | None:
        now, lim = time.monotonic(), self.limits
        phase, since, index, built_s = self._beat.read()
        building_s = now - since if phase == _COMPILE else 0.0
        if now - start - built_s - building_s > lim.request_timeout_s:
            return (f"the request took more than the agent's limit of {lim.request_timeout_s:g} "
                    "s per request (--request-timeout); send fewer models or runs per request")
        what = labels[index] if 0 <= index < len(labels) else "a model"
        if phase == _COMPILE and building_s > compile_s:
            return (f"building {what} took more than the agent's limit of {compile_s:g} s "
                    "(--compile-timeout)")
        if phase == _RUN and now - since > lim.run_timeout_s:
            return (f"one inference of {what} took more than the agent's limit of "
                    f"{lim.run_timeout_s:g} s (--run-timeout)")
        return None

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()  # SIGKILL: a runtime stuck in native code ignores anything gentler
        self._reap()

    def _reap(self) -> str:
        """Forget the child (the next job starts a new one); how it ended, in words."""
        proc, self._proc = self._proc, None
        self._beat.clear()
        if proc is None:
            return "not running"
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "did not exit"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"


def _read_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)  # end of file: the child is gone


# -- the child's side ---------------------------------------------------------------------------
class _Watched:
    """A runner whose runtime calls mark the beat, so the parent can time each one."""

    def __init__(self, runner: Any, beat: _Beat, index: int):
        self._runner, self._beat, self._index = runner, beat, index

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def _call(self, fn: Any, *args: Any) -> Any:
        self._beat.set(_RUN, self._index)
        try:
            return fn(*args)
        finally:
            self._beat.set(_IDLE, self._index)

    def time_once(self, prepared: Any) -> float:
        return self._call(self._runner.time_once, prepared)

    def prepare(self, x: Any) -> Any:
        return self._call(self._runner.prepare, x)

    def activate(self) -> None:
        self._call(self._runner.activate)

    def make_input(self, seed: int = 0) -> Any:
        return self._call(self._runner.make_input, seed)


def _load(backend: Any, device: Any, job: dict[str, Any], sha: str) -> Any:
    """A runner for a stored model: the ONNX file itself for ONNX backends, else what a
    backend built from ONNX makes of it (`OnnxBuiltBackend.compile_onnx`)."""
    from hwnas.devices.base import Artifact, OnnxBuiltBackend, one_line
    from hwnas.errors import DeviceError, HwnasError

    spec = job["inputs"][sha]
    artifact = Artifact(format="onnx", path=Path(spec["path"]), input_shape=tuple(spec["shape"]),
                        input_dtype=spec["dtype"], device=device.name, backend=backend.name,
                        precision=device.precision, metadata={"sha256": sha})
    if isinstance(backend, OnnxBuiltBackend):
        try:
            artifact = backend.compile_onnx(artifact, Path(job["workdir"]) / f"{sha}-{device.name}")
        except HwnasError:
            raise
        except Exception as err:
            raise DeviceError(f"device '{device.name}': building from ONNX failed: "
                              f"{one_line(err)}") from err
    return backend.load(artifact)


def _measure(job: dict[str, Any], beat: _Beat) -> dict[str, Any]:
    from hwnas.devices.device import Device
    from hwnas.devices.protocol import measure, measure_many
    from hwnas.devices.registry import make_backend

    device = Device.model_validate(job["device"])
    backend = make_backend(device)
    runners: dict[str, _Watched] = {}
    try:
        for index, sha in enumerate(job["order"]):
            began = time.monotonic()
            beat.set(_COMPILE, index)
            try:
                runners[sha] = _Watched(_load(backend, device, job, sha), beat, index)
            finally:
                beat.built_s += time.monotonic() - began
                beat.set(_IDLE, index)
        candidates = {mid: runners[sha] for mid, sha in job["models"].items()}
        reference = runners[job["reference"]] if job["reference"] else None
        if job["endpoint"] == "measure":
            (mid, runner), = candidates.items()
            stats = {mid: measure(runner, reference=reference, **job["protocol"])}
        else:
            stats = measure_many(candidates, reference, **job["protocol"])
        return {mid: s.to_dict() for mid, s in stats.items()}
    finally:
        for runner in runners.values():
            runner.close()


def _answer(job: dict[str, Any], beat: _Beat) -> dict[str, Any]:
    from hwnas.devices.base import one_line
    from hwnas.errors import HwnasError

    try:
        return {"results": _measure(job, beat)}
    except HwnasError as err:
        return {"error": str(err)}
    except Exception as err:  # noqa: BLE001 - a model the runtime chokes on: the client's answer
        traceback.print_exc()
        return {"error": one_line(err)}
    finally:
        beat.built_s = 0.0
        beat.set(_IDLE, -1)


def _die_with_parent(parent: int) -> None:
    """End when the agent ends, also by SIGKILL: never a stuck child measuring for nobody."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)

    def watch() -> None:  # other systems (and belt and braces): poll the parent
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    """`python -m hwnas.devices.agent.worker BEAT_FILE PARENT_PID`: answer jobs from stdin."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever a runtime prints goes to the agent's log, not into the answers
    _die_with_parent(int(sys.argv[2]))
    beat = _Beat(Path(sys.argv[1]))
    for line in sys.stdin:
        answers.write(json.dumps(_answer(json.loads(line), beat)) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
