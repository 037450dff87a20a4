"""The agent: an HTTP server on the target machine that times ONNX models with its backends.

GET /health, POST /measure and POST /measure_many (`protocol.measure` / `measure_many`). A token
allows timing a self-contained ONNX model on the agent's own devices and nothing else: a request
names a device and carries no device spec, runtime option, provider or path; the token, size and
content type are checked before a body is read. One measurement at a time (two timings on the same
cores ruin both), built and timed in a child process (`worker`) killed at its time limits, so no
client can hold the agent. Finished requests are stored by request id: a retry is answered from
disk, also after a restart. Run it with `hwnas agent serve` or `python -m hwnas.devices.agent`.

Endpoints, checks, limits and TLS: docs/devices.md, 'Devices: adding your own', 'The agent, in detail'.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import platform
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

from hwnas.devices.agent import tls as agent_tls
from hwnas.devices.agent.store import ModelStore, ResultStore, default_state_dir
from hwnas.devices.agent.wire import (
    API_VERSION,
    CONTENT_TYPE,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_PORT,
    MeasureRequest,
    ProtocolOptions,
    Refusal,
    decode_frames,
    read_token,
)
from hwnas.devices.agent.worker import MeasureWorker, WorkerLimits
from hwnas.devices.base import Backend, OnnxBuiltBackend, one_line
from hwnas.devices.device import Device
from hwnas.devices.registry import builtin_devices, load_devices, make_backend
from hwnas.errors import AgentError, HwnasError

__all__ = ["Agent", "AgentLimits", "LIMIT_OPTIONS", "make_server", "serve", "main"]

_ENDPOINTS = {"/measure": "measure", "/measure_many": "measure_many"}


@dataclass(frozen=True)
class AgentLimits:
    """What one request or connection may take from the agent; each is an option of `hwnas
    agent serve` (`LIMIT_OPTIONS`). A never-ending model is stopped by `run_timeout_s` (or
    `compile_timeout_s`), so with the defaults the next client waits well under a minute."""

    #: one inference (warm-up or timed) of one model; a model that never returns is stopped here
    run_timeout_s: float = 10.0
    #: building and loading one model (ONNX Runtime session, OpenVINO IR, TensorRT engine);
    #: None: 45 s, or 900 s on backends that build engines on the target (TensorRT)
    compile_timeout_s: float | None = None
    #: one whole request, every model and round, its builds not counted (those have their own
    #: limit); below the client's 900 s read timeout
    request_timeout_s: float = 600.0
    #: requests waiting for the device behind the one being measured (more: 503 busy); each
    #: holds up to about 2 x --max-request-bytes of memory while it waits
    max_queue: int = 4
    #: open connections; at the cap a new one replaces the oldest not yet authenticated
    max_connections: int = 64
    #: from connecting to a complete request line and headers (with the token)
    header_timeout_s: float = 10.0
    #: from connecting to the last byte of the request body
    receive_timeout_s: float = 120.0
    #: on SIGTERM/SIGINT, how long the measurement in progress may still finish
    stop_grace_s: float = 4.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value, low = getattr(self, f.name), 0 if f.name == "max_queue" else 1e-9
            if value is None and f.name == "compile_timeout_s":
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= low):
                raise AgentError(f"agent limit {LIMIT_OPTIONS[f.name][0]} must be a positive "
                                 f"number{' or 0' if low == 0 else ''}, got {value}")

    def worker(self) -> WorkerLimits:
        return WorkerLimits(self.run_timeout_s, self.request_timeout_s)

    def compile_limit(self, backend: Backend) -> float:
        """Seconds one model's build may take on `backend` (a capability, not a name)."""
        if self.compile_timeout_s is not None:
            return self.compile_timeout_s
        return 900.0 if backend.builds_on_target else 45.0


#: each limit's command-line option and its help (`main` and `hwnas agent serve`)
LIMIT_OPTIONS: dict[str, tuple[str, str]] = {
    "run_timeout_s": ("--run-timeout", "seconds one inference of one model may take"),
    "compile_timeout_s": ("--compile-timeout", "seconds building and loading one model may "
                          "take (default 45, 900 for TensorRT)"),
    "request_timeout_s": ("--request-timeout", "seconds one whole request may take"),
    "max_queue": ("--max-queue", "requests that may wait for the device (more: 503 busy)"),
    "max_connections": ("--max-connections", "open connections"),
    "header_timeout_s": ("--header-timeout", "seconds a connection has to send its headers"),
    "receive_timeout_s": ("--receive-timeout", "seconds a connection has to send its whole "
                          "request"),
    "stop_grace_s": ("--stop-grace", "seconds a measurement may finish after SIGTERM"),
}


class Agent:
    """The agent's state and its measurements, apart from HTTP (so it is testable alone)."""

    def __init__(self, token: str, *, devices_file: str | Path | None = None,
                 state_dir: str | Path | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 limits: AgentLimits | None = None):
        if max_request_bytes < 1024:
            raise AgentError(f"max_request_bytes must be at least 1024, got {max_request_bytes}")
        self._token = token.encode()
        self.max_request_bytes = int(max_request_bytes)
        self.limits = limits or AgentLimits()
        # absolute at startup: the measuring worker runs in its own working directory
        self.state_dir = (Path(state_dir).expanduser() if state_dir else default_state_dir()).absolute()
        self.models = ModelStore(self.state_dir / "models")
        self.results = ResultStore(self.state_dir)
        self.workdir = self.state_dir / "work"
        self.worker = MeasureWorker(self.workdir, self.limits.worker())
        self._private = _private_paths(self.state_dir)
        devices = builtin_devices()
        if devices_file is not None:
            devices.update(load_devices(devices_file))
        self.devices = {n: d for n, d in devices.items() if not d.is_remote}
        self.device_status = [{"name": d.name, "backend": d.backend, "options": d.summary(),
                               "spec": d.model_dump(mode="json", exclude={"description", "host", "port",
                                                                           "token_file", "tls_fingerprint"}),
                               "available": _unservable(make_backend(d))}
                              for d in self.devices.values()]
        self.lock = threading.Lock()  # one measurement at a time
        self.stopping = threading.Event()
        self.in_flight: str | None = None
        self.replayed = 0
        self.started_at = time.time()
        self._admitted = 0  # requests past the pre-body checks: the one measured + those waiting
        self._admit_lock = threading.Lock()
        self._typical_s = 5.0  # a request's usual duration, for Retry-After

    # -- checks --------------------------------------------------------------------------
    def check_token(self, authorization: str | None) -> None:
        import hmac

        scheme, _, given = (authorization or "").partition(" ")
        if scheme != "Bearer" or not hmac.compare_digest(given.strip().encode(), self._token):
            raise Refusal(401, "unauthorized", "the agent refused the token (missing or wrong "
                          "Authorization: Bearer header)")

    def check_length(self, content_length: str | None) -> int:
        if content_length is None:
            raise Refusal(411, "length_required", "send a Content-Length header (no chunked "
                          "bodies)")
        text = content_length.strip()
        # digits only: int() also takes "-1", "+5", "1_000"; a negative length would make
        # rfile.read() read until the client closes (an unbounded body)
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            raise Refusal(400, "bad_request", f"bad Content-Length {content_length[:40]!r}: "
                          "send the body's size in bytes")
        n = int(text)
        if n > self.max_request_bytes:
            raise Refusal(413, "payload_too_large", f"the request has {n} bytes, more than this "
                          f"agent's limit of {self.max_request_bytes}; send fewer or smaller "
                          "models per request or start the agent with a larger "
                          "--max-request-bytes", limit=self.max_request_bytes, size=n)
        return n

    # -- endpoints -----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        from hwnas import __version__
        from hwnas.extras import dist_version

        versions = {d: v for d in ("onnx", "onnxruntime", "onnxruntime-gpu", "numpy", "torch",
                                   "openvino", "tensorrt") if (v := dist_version(d))}
        return {"agent": "hwnas", "api": API_VERSION, "version": __version__,
                "hostname": socket.gethostname(), "platform": platform.platform(),
                "python": platform.python_version(), "versions": versions,
                "devices": self.device_status, "max_request_bytes": self.max_request_bytes,
                "limits": asdict(self.limits), "queued": max(0, self._admitted - 1),
                "busy": self.in_flight, "pid": os.getpid(), "started_at": self.started_at,
                "counters": {"requests_measured": self.results.requests_measured,
                             "models_measured": self.results.models_measured,
                             "replayed": self.replayed}}

    def handle(self, endpoint: str, body: bytes) -> dict[str, Any]:
        """Answer one measurement request (a stored result when its id is already done)."""
        req, blobs = decode_frames(body)
        self._check_request(endpoint, req, blobs)
        digest = req.digest(endpoint)
        if (done := self._replay(req, digest)) is not None:
            return done
        with self.lock:
            if self.stopping.is_set():
                raise Refusal(503, "stopping", "the agent is stopping; retry when it is back")
            if (done := self._replay(req, digest)) is not None:  # finished while we queued
                return done
            self.in_flight = req.request_id
            try:
                for sha, data in blobs.items():
                    self.models.add(sha, data)
                missing = sorted(s for s in req.shas() if not self.models.has(s))
                if missing:
                    raise Refusal(409, "missing_models", f"the agent does not hold {len(missing)} "
                                  "of the request's models; send their bytes", missing=missing)
                start = time.perf_counter()
                results = self._measure(endpoint, req)
                elapsed = time.perf_counter() - start
                record = {"request_id": req.request_id, "endpoint": endpoint, "digest": digest,
                          "finished_at": time.time(), "elapsed_s": round(elapsed, 3),
                          "results": results}
                self.results.put(req.request_id, record)
                self.models.evict(keep=req.shas())
                self._typical_s = 0.7 * self._typical_s + 0.3 * elapsed
            finally:
                self.in_flight = None
        return {**record, "replayed": False}

    @contextmanager
    def admission(self) -> Iterator[None]:
        """A place among the requests that may read their body and wait for the device (the
        one measured + `max_queue`); 503 busy with a Retry-After beyond that, before any body
        is read, so waiting requests hold bounded memory."""
        with self._admit_lock:
            if self._admitted > self.limits.max_queue:
                after = min(60, max(1, math.ceil(self._typical_s * self._admitted)))
                raise Refusal(503, "busy", f"the agent is busy: {self._admitted - 1} requests "
                              f"already wait for its device; retry after {after} s",
                              retry_after=after)
            self._admitted += 1
        try:
            yield
        finally:
            with self._admit_lock:
                self._admitted -= 1

    def stop(self) -> None:
        """Refuse new measurements; the one in progress may finish (and be stored) for
        `stop_grace_s`, then it is cancelled: its client gets 503 and retries the restarted
        agent, which measures it then."""
        self.stopping.set()
        if not self.lock.acquire(timeout=self.limits.stop_grace_s):
            self.worker.cancel("the agent is stopping; retry when it is back")
            if not self.lock.acquire(timeout=2.0):
                return
        self.lock.release()

    def close(self) -> None:
        """End the measuring process (a later request would start a new one)."""
        self.worker.close()

    def public(self, text: str) -> str:
        """`text` without the agent's own paths: a refusal tells a client nothing about the
        agent's disk (a runtime's error names the model file under the state directory)."""
        for path, name in self._private:
            text = text.replace(path, name)
        return text

    # -- internals -----------------------------------------------------------------------
    @staticmethod
    def _check_request(endpoint: str, req: MeasureRequest, blobs: dict[str, bytes]) -> None:
        if stray := set(blobs) - req.shas():
            raise Refusal(400, "bad_request", f"{len(stray)} blob(s) belong to no model")
        if endpoint == "measure":
            extra = set(req.protocol.kwargs()) - ProtocolOptions.SINGLE
            if len(req.models) != 1 or extra:
                raise Refusal(400, "bad_request", "/measure takes one model and the options "
                              f"{sorted(ProtocolOptions.SINGLE)}; use /measure_many for more")
        elif req.reference is None:
            raise Refusal(400, "bad_request", "/measure_many needs a reference model")

    def _replay(self, req: MeasureRequest, digest: str) -> dict[str, Any] | None:
        record = self.results.get(req.request_id)
        if record is None:
            return None
        if record.get("digest") != digest:
            raise Refusal(409, "request_id_conflict", f"request id {req.request_id} was already "
                          "used for a different request; use a fresh id per request")
        self.replayed += 1
        return {**record, "replayed": True}

    def _device(self, req: MeasureRequest) -> Device:
        """One of the agent's own devices, by name: the allow-list. Nothing about how a model
        runs (runtime options, provider, paths, caches) comes from the request."""
        try:
            return self.devices[req.agent_device]
        except KeyError:
            raise Refusal(422, "unknown_device", f"the agent has no device "
                          f"'{req.agent_device}'; it has {', '.join(self.devices)}") from None

    def _measure(self, endpoint: str, req: MeasureRequest) -> dict[str, Any]:
        """The stats (as dicts) by model id, measured by the worker process under the limits."""
        device = self._device(req)
        backend = make_backend(device)
        if reason := _unservable(backend):
            raise Refusal(422, "device_unavailable", f"device '{device.name}' cannot be used on "
                          f"the agent: {reason}")
        order = sorted(req.shas())
        job = {"endpoint": endpoint, "device": device.model_dump(mode="json"), "order": order,
               "inputs": {sha: self._input(device, sha) for sha in order},
               "models": req.models, "reference": req.reference,
               "protocol": req.protocol.kwargs(), "workdir": str(self.workdir)}
        answer = self.worker.run(job, _labels(req, order), self.limits.compile_limit(backend))
        if "error" in answer:
            raise Refusal(422, "measurement_failed", answer["error"])
        return answer["results"]

    def _input(self, device: Device, sha: str) -> dict[str, Any]:
        """What the worker needs to load a stored model, once it fits the device."""
        spec = self.models.input(sha)
        if (spec.dtype == "float16") != (device.precision == "fp16"):
            raise Refusal(422, "measurement_failed", f"model {sha[:12]} is {spec.dtype} but "
                          f"device '{device.name}' runs {device.precision}")
        if spec.shape[0] != device.batch:
            raise Refusal(422, "measurement_failed", f"model {sha[:12]} has batch {spec.shape[0]} "
                          f"but device '{device.name}' runs batch {device.batch}")
        return {"path": str(self.models.path(sha)), "shape": list(spec.shape),
                "dtype": spec.dtype}


def _labels(req: MeasureRequest, order: list[str]) -> list[str]:
    """How a time-limit refusal names each model of `order` (the client's ids)."""
    names = {sha: [f"model '{mid}'" for mid, s in req.models.items() if s == sha]
             for sha in order}
    if req.reference:
        names[req.reference].append("the reference model")
    return [" / ".join(names[sha][:3]) for sha in order]


def _private_paths(state_dir: Path) -> list[tuple[str, str]]:
    """The agent's own paths and what a client sees instead, longest first."""
    pairs = {str(state_dir.resolve()): "<agent-state>", str(state_dir.absolute()): "<agent-state>",
             os.getcwd(): "<agent-dir>", str(Path.home()): "~"}
    return sorted(((p, n) for p, n in pairs.items() if len(p) > 1), key=lambda pn: -len(pn[0]))


def _unservable(backend: Backend) -> str | None:
    """Why the agent cannot measure ONNX models on this backend's device, or None."""
    if backend.artifact_format != "onnx" and not isinstance(backend, OnnxBuiltBackend):
        return (f"the {backend.name} backend cannot build from ONNX, so an agent cannot serve "
                "it; use an onnxruntime device")
    return backend.available()


class _Handler(BaseHTTPRequestHandler):
    """HTTP only: routing, the pre-body checks, JSON answers, lingering close on refusals."""

    server: _Server
    server_version = "hwnas-agent"

    def setup(self) -> None:
        # per read; `_Connections` enforces the deadline for the whole request
        self.timeout = self.server.agent.limits.receive_timeout_s
        super().setup()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None
                   ) -> None:
        """http.server's own refusals of malformed requests are 4xx too: an unknown method
        (501 there) is 405, an unsupported HTTP version (505) is 400."""
        if code >= 500:
            code = 405 if code == 501 else 400
        # a JSON refusal, as the wire format documents (http.server's own page is HTML)
        phrase = HTTPStatus(code).phrase
        body = json.dumps({"error": phrase.lower().replace(" ", "_"),
                           "message": f"{phrase}: {message or explain or 'malformed request'}"}).encode()
        self.close_connection = True
        try:
            self.send_response(code, message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and code >= 200 and code not in (204, 304):
                self.wfile.write(body)
        except OSError:
            pass

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket) and not self._handshake():
            return
        super().handle()

    def _handshake(self) -> bool:
        try:
            self.connection.do_handshake()
            return True
        except OSError as err:
            if getattr(err, "reason", None) == "HTTP_REQUEST":  # plain HTTP: say so, in plain
                _send_raw(self.connection, Refusal(
                    400, "tls_required", "this agent speaks TLS only: pin its certificate with "
                    "tls_fingerprint in the device's entry"))
                _linger(self.connection)
            self.log_message("TLS handshake failed: %s", one_line(err))
            return False

    def do_GET(self) -> None:
        self._answer(lambda agent: self._get(agent))

    def do_POST(self) -> None:
        self._answer(lambda agent: self._post(agent))

    def _get(self, agent: Agent) -> dict[str, Any]:
        agent.check_token(self.headers.get("Authorization"))
        self.server.connections.advance(self.connection, _Connections.WORKING)
        if self.path.split("?")[0] != "/health":
            raise Refusal(404, "not_found", f"no endpoint GET {self.path}; see GET /health")
        return agent.health()

    def _post(self, agent: Agent) -> dict[str, Any]:
        agent.check_token(self.headers.get("Authorization"))
        self.server.connections.advance(self.connection, _Connections.BODY)
        endpoint = _ENDPOINTS.get(self.path.split("?")[0])
        if endpoint is None:
            raise Refusal(404, "not_found", f"no endpoint POST {self.path}; use /measure or "
                          "/measure_many")
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            raise Refusal(400, "bad_request", "the request has several Content-Length headers")
        n = agent.check_length(self.headers.get("Content-Length"))
        if self.headers.get_content_type() != CONTENT_TYPE:
            raise Refusal(415, "unsupported_media_type", f"the agent takes {CONTENT_TYPE} "
                          "bodies (ONNX models framed by the hwnas client), nothing else")
        with agent.admission():
            body = self.rfile.read(n)
            self._body_read = True
            self.server.connections.advance(self.connection, _Connections.WORKING)
            if len(body) != n:
                raise Refusal(400, "bad_request", f"the body ended after {len(body)} of {n} "
                              "bytes")
            return agent.handle(endpoint, body)

    def _answer(self, fn: Callable[[Agent], dict[str, Any]]) -> None:
        self._body_read = False
        agent = self.server.agent
        headers: dict[str, str] = {}
        try:
            status, body = 200, fn(agent)
        except Refusal as refusal:
            status, body, headers = refusal.status, refusal.body(), refusal.headers()
        except Exception as err:  # a bug or a runtime crash: say so, keep serving
            traceback.print_exc()
            status, body = 500, {"error": "internal", "message": f"the agent failed: "
                                 f"{one_line(err)}"}
        if status != 200:
            body["message"] = agent.public(str(body.get("message", "")))
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (timed out); its retry gets the stored result
            return
        if not self._body_read and self.command == "POST":
            _linger(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.log_date_time_string()} agent {self.address_string()} "
                         f"{format % args}\n")


@dataclass
class _Conn:
    accepted: float
    phase: str
    deadline: float


class _Connections:
    """Open connections: a cap, and a deadline for each one still sending its request.

    A per-read timeout alone lets a client trickle one byte at a time forever, so a reaper
    thread shuts down every connection that has not sent its headers (with the token) within
    `header_timeout_s` or its whole request within `receive_timeout_s` of connecting. At
    `max_connections` a new connection displaces the oldest one still sending headers: a client
    without the token cannot keep token holders out. Only when every connection belongs to a
    token holder is a new one answered 503 busy."""

    HEADERS, BODY, WORKING = "headers", "body", "working"

    def __init__(self, limits: AgentLimits):
        self.limits = limits
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Conn] = {}
        self._closed = threading.Event()
        threading.Thread(target=self._reap, daemon=True, name="hwnas-agent-reaper").start()

    def admit(self, sock: socket.socket) -> bool:
        """Take a new connection (displacing the oldest unauthenticated one at the cap);
        False when there is no room."""
        now = time.monotonic()
        with self._lock:
            if len(self._open) >= self.limits.max_connections:
                waiting = [(c.accepted, id(s), s) for s, c in self._open.items()
                           if c.phase == self.HEADERS]
                if not waiting:
                    return False
                self._drop(min(waiting)[2])
            self._open[sock] = _Conn(now, self.HEADERS, now + self.limits.header_timeout_s)
        return True

    def advance(self, sock: socket.socket, phase: str) -> None:
        """BODY: authenticated, the body is due by `receive_timeout_s`; WORKING: no deadline
        (the measurement has its own limits)."""
        with self._lock:
            if (conn := self._open.get(sock)) is not None:
                conn.phase = phase
                conn.deadline = (conn.accepted + self.limits.receive_timeout_s
                                 if phase == self.BODY else math.inf)

    def release(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.pop(sock, None)

    def close(self) -> None:
        self._closed.set()

    def _drop(self, sock: socket.socket) -> None:
        """Forget a connection and wake its handler (its blocked read returns)."""
        self._open.pop(sock, None)
        try:  # the socket's own shutdown: a TLS socket's would drop its TLS state under the reader
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def _reap(self) -> None:
        while not self._closed.wait(0.25):
            now = time.monotonic()
            with self._lock:
                for sock in [s for s, c in self._open.items() if c.deadline < now]:
                    self._drop(sock)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never blocks exit; `wait_idle` bounds the wait
    allow_reuse_address = True
    request_queue_size = 128  # listen backlog: a burst of connects waits in the kernel

    def __init__(self, address: tuple[str, int], agent: Agent,
                 tls: ssl.SSLContext | None = None):
        self.address_family = socket.getaddrinfo(address[0], address[1])[0][0]
        self.agent, self.tls = agent, tls
        self.active = 0
        self.idle = threading.Condition()
        self.connections = _Connections(agent.limits)
        try:
            super().__init__(address, _Handler)
        except BaseException:
            self.connections.close()
            raise

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            sock, address = super().get_request()
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                # out of descriptors: the listener stays readable, so back off, not spin
                time.sleep(0.1)
            raise
        if self.tls is None:
            return sock, address
        try:  # no I/O here: the handshake happens in the connection's thread (`_Handler.handle`)
            return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address
        except OSError:
            sock.close()
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.connections.admit(request):
            _refuse_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.connections.release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.idle:
            self.active += 1
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release(request)
            with self.idle:
                self.active -= 1
                self.idle.notify_all()

    def wait_idle(self, timeout_s: float) -> None:
        """Let answers in progress reach their clients before the process exits."""
        with self.idle:
            self.idle.wait_for(lambda: self.active == 0, timeout_s)

    def server_bind(self) -> None:
        """HTTPServer's own bind also resolves the host's FQDN, which can hang without DNS."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def server_close(self) -> None:
        super().server_close()
        self.connections.close()
        self.agent.close()


def _refuse_busy(sock: socket.socket) -> None:
    """A one-shot 503 on a connection there is no room for (never blocks the accept loop). A TLS
    connection is just closed (no handshake here): its client retries as after a lost connection."""
    if isinstance(sock, ssl.SSLSocket):
        return
    try:
        sock.setblocking(False)
    except OSError:
        return
    _send_raw(sock, Refusal(503, "busy", "the agent has no room for another connection; retry "
                            "after 5 s", retry_after=5))


def _send_raw(sock: socket.socket, refusal: Refusal) -> None:
    """A refusal written on the bare socket, outside http.server (and outside TLS)."""
    body = json.dumps(refusal.body()).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in refusal.headers().items())
    head = (f"HTTP/1.0 {refusal.status} {HTTPStatus(refusal.status).phrase}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
            "Connection: close\r\n\r\n")
    try:
        socket.socket.send(sock, head.encode() + body)
    except OSError:
        pass


def _linger(sock: socket.socket) -> None:
    """After a refusal sent before the request was read: discard what the client still sends (at
    most ~2 s) so that closing does not reset the connection before it has read the refusal.
    The socket's own calls, also under TLS: the bytes are thrown away unread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_WR)
        sock.settimeout(0.5)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and socket.socket.recv(sock, 1 << 16):
            pass
    except OSError:
        pass


def make_server(agent: Agent, host: str, port: int, tls: ssl.SSLContext | None = None) -> _Server:
    """Bind (port 0 picks a free one: see `server.server_address`); AgentError when it cannot.
    With `tls` (`agent_tls.server_context`) every connection speaks TLS."""
    try:
        return _Server((host, port), agent, tls)
    except OSError as err:
        raise AgentError(f"the agent cannot listen on {host}:{port}: {err.strerror or err}; "
                         "pick another --port or stop what uses it") from None


def _fit_descriptors(limits: AgentLimits, echo: Callable[[str], None]) -> AgentLimits:
    """Connections the file-descriptor limit can hold (raised to its hard limit first), with
    room left for models, logs and the worker's pipes."""
    try:
        import resource
    except ImportError:  # not POSIX
        return limits
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > soft):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    room = soft - 64 if soft != resource.RLIM_INFINITY else limits.max_connections
    if limits.max_connections <= room:
        return limits
    fitted = max(1, room)
    echo(f"warning: --max-connections {limits.max_connections} does not fit the limit of "
         f"{soft} open files; using {fitted}")
    return AgentLimits(**{**asdict(limits), "max_connections": fitted})


def serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT, token_file: str | Path | None = None,
          devices_file: str | Path | None = None, state_dir: str | Path | None = None,
          max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, *,
          limits: AgentLimits | None = None, tls: bool = False,
          echo: Callable[[str], None] = print) -> None:
    """Run the agent until SIGTERM/SIGINT. The token is read from `token_file` (never given on
    the command line). With `tls` it speaks TLS with the certificate beside the token file (made
    on first use) and prints its fingerprint. On a stop signal it stops accepting, lets the
    measurement in progress finish and store its result for up to `limits.stop_grace_s`, cancels
    it after that, and returns within a few seconds; a second signal exits at once."""
    token = read_token(token_file)
    assert token_file is not None  # read_token refuses None
    if os.name == "posix" and Path(token_file).expanduser().stat().st_mode & 0o077:
        echo(f"warning: token file {token_file} is readable by other users; chmod 600 it")
    context = None
    if tls:
        cert, key, fingerprint = agent_tls.ensure_certificate(token_file)
        if os.name == "posix" and key.stat().st_mode & 0o077:
            echo(f"warning: TLS key {key} is readable by other users; chmod 600 it")
        context = agent_tls.server_context(cert, key)
    limits = _fit_descriptors(limits or AgentLimits(), echo)
    agent = Agent(token, devices_file=devices_file, state_dir=state_dir,
                  max_request_bytes=max_request_bytes, limits=limits)
    httpd = make_server(agent, host, port, context)
    bound_host, bound_port = httpd.server_address[:2]
    usable = [s["name"] for s in agent.device_status if s["available"] is None]
    echo(f"hwnas agent listening on {'https' if tls else 'http'}://{bound_host}:{bound_port} "
         f"(state {agent.state_dir}, max request {agent.max_request_bytes} bytes)")
    if tls:
        echo(f"TLS certificate {cert} (key {key}); pin it in each client's device entry: "
             f'tls_fingerprint: "{fingerprint}"')
    build = "45/900" if limits.compile_timeout_s is None else f"{limits.compile_timeout_s:g}"
    echo(f"limits: {limits.run_timeout_s:g} s per inference, {build} s per build, "
         f"{limits.request_timeout_s:g} s per request, {limits.max_queue} queued, "
         f"{limits.max_connections} connections")
    echo(f"devices usable here: {', '.join(usable) or 'none'}; stop with Ctrl-C or SIGTERM")

    def on_signal(signum: int, frame: Any) -> None:
        if agent.stopping.is_set():
            agent.close()  # never leave a measuring child behind
            os._exit(128 + signum)
        agent.stopping.set()
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        agent.stop()  # requests still queued are answered 503: their client retries
        httpd.wait_idle(timeout_s=2.0)
        httpd.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        echo("hwnas agent stopped")


def main(argv: list[str] | None = None) -> None:
    """`python -m hwnas.devices.agent`: the same as `hwnas agent serve`."""
    p = argparse.ArgumentParser(prog="python -m hwnas.devices.agent",
                                description="Serve this machine's devices to hwnas clients.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: all)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: pick a free one)")
    p.add_argument("--token-file", required=True, help="file holding the shared token")
    p.add_argument("--devices", default=None, help="YAML file of extra devices")
    p.add_argument("--state-dir", default=None, help=f"results and models (default "
                   f"{default_state_dir()})")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    p.add_argument("--tls", action="store_true", help="speak TLS with a self-signed certificate "
                   "kept beside the token file (made once with openssl); prints its fingerprint")
    defaults = AgentLimits()
    for f in fields(AgentLimits):
        flag, text = LIMIT_OPTIONS[f.name]
        default = getattr(defaults, f.name)
        p.add_argument(flag, dest=f.name, type=int if f.type in ("int", int) else float,
                       default=default, help=text if default is None else
                       f"{text} (default {default:g})")
    args = p.parse_args(argv)
    try:
        limits = AgentLimits(**{f.name: getattr(args, f.name) for f in fields(AgentLimits)})
        serve(args.host, args.port, args.token_file, args.devices, args.state_dir,
              args.max_request_bytes, limits=limits, tls=args.tls,
              echo=lambda line: print(line, flush=True))
    except HwnasError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(err.exit_code)
