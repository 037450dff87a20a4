"""The agent: an HTTP server on the target machine that times ONNX models with its backends.

    GET  /health        versions, the agent's devices and why any is unusable, the limit on
                        request size, measurement counters, the request being measured
    POST /measure       one model (+ optional reference: R C R)   -> protocol.measure
    POST /measure_many  models + a reference (drift-corrected)    -> protocol.measure_many

Bodies are `wire` frames; answers are JSON (`{"results": {id: LatencyStats}, ...}` or a refusal
`{"error", "message"}`). Checks run cheapest first and before the body is read: the token
(`Authorization: Bearer`, constant-time compare), the size (Content-Length against
`max_request_bytes`), the content type. Then each blob must be self-contained ONNX.

The agent serves only its own devices (built-ins and its --devices file): a request names one
(`agent_device`) and carries no device spec, runtime option, execution provider, path or cache
setting (`wire.decode_frames` refuses such fields with 400). A token therefore allows timing an
ONNX model on those devices and nothing else: no file on the agent is named by a client.

The reference model is the client's: it is sent like any model and kept by sha256, so after the
first request of a session only its hash travels. (A built-in reference would make ratios
incomparable with the client's other devices, which normalise by the client's reference.)

Backends whose artifact is ONNX (onnxruntime) run the received file as is. Another backend is
served when it offers `compile_onnx(artifact, workdir) -> Artifact`: OpenVINO converts the ONNX to
IR, TensorRT builds an engine from it (a Jetson's agent serves `trt`). Backends without that hook
(PyTorch eager, ExecuTorch, LiteRT: they compile from the PyTorch module) are refused with the reason.

One measurement at a time: requests queue on one lock, because two timings on the same cores
ruin both. Validating and loading models happen under the lock too (they are CPU work).
Finished requests are stored by request id (`store.ResultStore`), so a retried id is answered
from disk, also after a restart, and never measured twice.

Run it with `hwnas agent serve` or `python -m hwnas.devices.agent` (same options).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

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
from hwnas.devices.base import Artifact, Backend, OnnxBuiltBackend, Runner, one_line
from hwnas.devices.device import Device
from hwnas.devices.protocol import measure, measure_many
from hwnas.devices.registry import builtin_devices, load_devices, make_backend
from hwnas.devices.stats import LatencyStats
from hwnas.errors import AgentError, DeviceError, HwnasError

__all__ = ["Agent", "make_server", "serve", "main"]

_ENDPOINTS = {"/measure": "measure", "/measure_many": "measure_many"}


class Agent:
    """The agent's state and its measurements, apart from HTTP (so it is testable alone)."""

    def __init__(self, token: str, *, devices_file: str | Path | None = None,
                 state_dir: str | Path | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        if max_request_bytes < 1024:
            raise AgentError(f"max_request_bytes must be at least 1024, got {max_request_bytes}")
        self._token = token.encode()
        self.max_request_bytes = int(max_request_bytes)
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self.models = ModelStore(self.state_dir / "models")
        self.results = ResultStore(self.state_dir)
        self.workdir = self.state_dir / "work"
        devices = builtin_devices()
        if devices_file is not None:
            devices.update(load_devices(devices_file))
        self.devices = {n: d for n, d in devices.items() if not d.is_remote}
        self.device_status = [{"name": d.name, "backend": d.backend, "options": d.summary(),
                               "spec": d.model_dump(mode="json", exclude={"description", "host",
                                                                           "port", "token_file"}),
                               "available": _unservable(make_backend(d))}
                              for d in self.devices.values()]
        self.lock = threading.Lock()  # one measurement at a time
        self.stopping = threading.Event()
        self.in_flight: str | None = None
        self.replayed = 0
        self.started_at = time.time()

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
        from hwnas.devices._imports import dist_version

        versions = {d: v for d in ("onnx", "onnxruntime", "onnxruntime-gpu", "numpy", "torch",
                                   "openvino", "tensorrt") if (v := dist_version(d))}
        return {"agent": "hwnas", "api": API_VERSION, "version": __version__,
                "hostname": socket.gethostname(), "platform": platform.platform(),
                "python": platform.python_version(), "versions": versions,
                "devices": self.device_status, "max_request_bytes": self.max_request_bytes,
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
                stats = self._measure(endpoint, req)
                record = {"request_id": req.request_id, "endpoint": endpoint, "digest": digest,
                          "finished_at": time.time(),
                          "elapsed_s": round(time.perf_counter() - start, 3),
                          "results": {mid: s.to_dict() for mid, s in stats.items()}}
                self.results.put(req.request_id, record)
                self.models.evict(keep=req.shas())
            finally:
                self.in_flight = None
        return {**record, "replayed": False}

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

    def _measure(self, endpoint: str, req: MeasureRequest) -> dict[str, LatencyStats]:
        device = self._device(req)
        backend = make_backend(device)
        if reason := _unservable(backend):
            raise Refusal(422, "device_unavailable", f"device '{device.name}' cannot be used on "
                          f"the agent: {reason}")
        runners: dict[str, Runner] = {}
        try:
            for sha in req.shas():
                runners[sha] = self._load(backend, device, sha)
            candidates = {mid: runners[sha] for mid, sha in req.models.items()}
            reference = runners[req.reference] if req.reference else None
            kw = req.protocol.kwargs()
            if endpoint == "measure":
                (mid, runner), = candidates.items()
                return {mid: measure(runner, reference=reference, **kw)}
            return measure_many(candidates, reference, **kw)
        except HwnasError as err:
            raise Refusal(422, "measurement_failed", str(err)) from None
        finally:
            for runner in runners.values():
                runner.close()

    def _load(self, backend: Backend, device: Device, sha: str) -> Runner:
        """A runner for a stored model: the ONNX file itself for ONNX backends, else what a
        backend built from ONNX makes of it (`OnnxBuiltBackend.compile_onnx`)."""
        spec = self.models.input(sha)
        if (spec.dtype == "float16") != (device.precision == "fp16"):
            raise Refusal(422, "measurement_failed", f"model {sha[:12]} is {spec.dtype} but "
                          f"device '{device.name}' runs {device.precision}")
        if spec.shape[0] != device.batch:
            raise Refusal(422, "measurement_failed", f"model {sha[:12]} has batch {spec.shape[0]} "
                          f"but device '{device.name}' runs batch {device.batch}")
        artifact = Artifact(format="onnx", path=self.models.path(sha), input_shape=spec.shape,
                            input_dtype=spec.dtype, device=device.name, backend=backend.name,
                            precision=device.precision, metadata={"sha256": sha})
        if isinstance(backend, OnnxBuiltBackend):
            try:
                artifact = backend.compile_onnx(artifact, self.workdir / f"{sha}-{device.name}")
            except HwnasError:
                raise
            except Exception as err:
                raise DeviceError(f"device '{device.name}': building from ONNX failed: "
                                  f"{one_line(err)}") from err
        return backend.load(artifact)


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
    timeout = 120  # seconds a client may take to send its request

    def do_GET(self) -> None:
        self._answer(lambda agent: self._get(agent))

    def do_POST(self) -> None:
        self._answer(lambda agent: self._post(agent))

    def _get(self, agent: Agent) -> dict[str, Any]:
        agent.check_token(self.headers.get("Authorization"))
        if self.path.split("?")[0] != "/health":
            raise Refusal(404, "not_found", f"no endpoint GET {self.path}; see GET /health")
        return agent.health()

    def _post(self, agent: Agent) -> dict[str, Any]:
        agent.check_token(self.headers.get("Authorization"))
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
        body = self.rfile.read(n)
        self._body_read = True
        if len(body) != n:
            raise Refusal(400, "bad_request", f"the body ended after {len(body)} of {n} bytes")
        return agent.handle(endpoint, body)

    def _answer(self, fn: Callable[[Agent], dict[str, Any]]) -> None:
        self._body_read = False
        try:
            status, body = 200, fn(self.server.agent)
        except Refusal as refusal:
            status, body = refusal.status, refusal.body()
        except Exception as err:  # a bug or a runtime crash: say so, keep serving
            traceback.print_exc()
            status, body = 500, {"error": "internal", "message": f"the agent failed: "
                                 f"{one_line(err)}"}
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (timed out); its retry gets the stored result
            return
        if not self._body_read and self.command == "POST":
            self._drain()

    def _drain(self) -> None:
        """Refused before reading: discard what the client still sends (at most ~2 s) so that
        closing does not reset the connection before the client has read the refusal."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.5)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and self.connection.recv(1 << 16):
                pass
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.log_date_time_string()} agent {self.address_string()} "
                         f"{format % args}\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never blocks exit; `wait_idle` bounds the wait
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], agent: Agent):
        self.address_family = socket.getaddrinfo(address[0], address[1])[0][0]
        self.agent = agent
        self.active = 0
        self.idle = threading.Condition()
        super().__init__(address, _Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.idle:
            self.active += 1
        try:
            super().process_request_thread(request, client_address)
        finally:
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


def make_server(agent: Agent, host: str, port: int) -> _Server:
    """Bind (port 0 picks a free one: see `server.server_address`); AgentError when it cannot."""
    try:
        return _Server((host, port), agent)
    except OSError as err:
        raise AgentError(f"the agent cannot listen on {host}:{port}: {err.strerror or err}; "
                         "pick another --port or stop what uses it") from None


def serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT, token_file: str | Path | None = None,
          devices_file: str | Path | None = None, state_dir: str | Path | None = None,
          max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, *,
          echo: Callable[[str], None] = print, grace_s: float = 600.0) -> None:
    """Run the agent until SIGTERM/SIGINT. The token is read from `token_file` (never given on
    the command line). On a stop signal it stops accepting, lets the measurement in progress
    finish and store its result (up to `grace_s`), then returns; a second signal exits now."""
    token = read_token(token_file)
    assert token_file is not None  # read_token refuses None
    if os.name == "posix" and Path(token_file).expanduser().stat().st_mode & 0o077:
        echo(f"warning: token file {token_file} is readable by other users; chmod 600 it")
    agent = Agent(token, devices_file=devices_file, state_dir=state_dir,
                  max_request_bytes=max_request_bytes)
    httpd = make_server(agent, host, port)
    bound_host, bound_port = httpd.server_address[:2]
    usable = [s["name"] for s in agent.device_status if s["available"] is None]
    echo(f"hwnas agent listening on http://{bound_host}:{bound_port} "
         f"(state {agent.state_dir}, max request {agent.max_request_bytes} bytes)")
    echo(f"devices usable here: {', '.join(usable) or 'none'}; stop with Ctrl-C or SIGTERM")

    def on_signal(signum: int, frame: Any) -> None:
        if agent.stopping.is_set():
            os._exit(128 + signum)
        agent.stopping.set()
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        agent.stopping.set()  # requests still queued are answered 503: their client retries
        if agent.lock.acquire(timeout=grace_s):  # the measurement in progress ends and is stored
            agent.lock.release()
        httpd.wait_idle(timeout_s=10.0)
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
    args = p.parse_args(argv)
    try:
        serve(args.host, args.port, args.token_file, args.devices, args.state_dir,
              args.max_request_bytes, echo=lambda line: print(line, flush=True))
    except HwnasError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(err.exit_code)

