"""The agent client: `RemoteBackend` is the backend of every device with a `host`.

Compiling happens here (ONNX export, as for onnxruntime); timing happens on the agent, with the
same protocol (`hwnas.devices.protocol`), so a remote device has no local `Runner` and profiling
branches once on `device.is_remote` (`measure_artifacts` serves remote and local devices alike).
Models are packed into requests that fit the agent's size limit, each one drift-corrected session,
so `ratio` is comparable across requests. A request's retries reuse its id, so a retry gets the
stored result, never a second measurement. An agent's answer is not trusted: it is read within time
and size limits and checked against a schema before use. Every failure is one `AgentError` line.

Device entry, agent device choice, retries, TLS pinning: docs/devices.md, 'The agent, in detail'.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import ssl
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hwnas.devices.agent import tls
from hwnas.devices.agent.wire import (
    CONTENT_TYPE,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_PORT,
    ProtocolOptions,
    encode_frames,
    read_token,
    sha256,
)
from hwnas.devices.base import Artifact, Backend, Runner
from hwnas.devices.onnx_export import export_onnx
from hwnas.devices.stats import LatencyStats
from hwnas.errors import AgentError, DeviceError, InputError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.devices.device import Device
    from hwnas.devices.protocol import ProgressFn

__all__ = ["AgentSettings", "AgentClient", "AgentRefused", "RemoteBackend", "measure_artifacts"]

_MAX_BACKOFF_S = 8.0
_HEADER_ALLOWANCE = 64 * 1024  # bytes of a request that are not model bytes (generous)
#: the device fields a remote device and the agent's device it runs on must agree on
_MATCHED = ("backend", "threads", "batch", "precision", "provider", "options")


class AgentSettings(BaseModel):
    """Client settings, from the device's `options["agent"]` (none are sent to the agent)."""

    model_config = ConfigDict(extra="forbid")
    device: str | None = Field(None, description="an agent device by name instead of this "
                               "device's own backend/threads/precision")
    connect_timeout_s: float = Field(3.0, gt=0)
    read_timeout_s: float = Field(900.0, gt=0, description="per request: a batch of models")
    health_timeout_s: float = Field(2.0, gt=0, description="for available()")
    retries: int = Field(5, ge=0, le=50)
    backoff_s: float = Field(0.5, ge=0)
    busy_wait_s: float = Field(900.0, ge=0, description="how long to keep coming back to an "
                               "agent that answers 503 busy")
    max_models_per_request: int = Field(8, ge=1, le=1000)
    max_response_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="the largest answer "
                                    "read from an agent")


_Ms = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _StatsAnswer(BaseModel):
    """One model's `LatencyStats` as an agent must send them: finite, positive latencies."""

    model_config = ConfigDict(strict=True, extra="ignore")
    median_ms: _Ms
    mean_ms: _Ms
    p90_ms: _Ms
    p99_ms: _Ms
    corrected_ms: _Ms
    min_ms: _NonNegative
    std_ms: _NonNegative
    cv: _NonNegative
    n: int = Field(ge=1)
    warmup: int = Field(ge=0)
    rounds: int = Field(1, ge=1)
    rel_se: _NonNegative = 0.0
    ref_median_ms: _Ms | None = None
    ref_ms: list[_NonNegative] = Field(default_factory=list)
    device: str = ""
    backend: str = ""
    threads: int = Field(1, ge=1)
    batch: int = Field(1, ge=1)
    precision: str = "fp32"
    resolution: int | None = Field(None, gt=0)
    host: str = ""
    timer: str = "perf_counter_ns"
    versions: dict[str, str] = Field(default_factory=dict)


class _MeasureAnswer(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    results: dict[str, _StatsAnswer]


class _DeviceAnswer(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    name: str
    available: str | None = None
    spec: dict[str, Any] = Field(default_factory=dict)


class _HealthAnswer(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    agent: Literal["hwnas"]
    devices: list[_DeviceAnswer]
    max_request_bytes: int = Field(ge=1024)


class AgentRefused(AgentError):
    """The agent answered with a refusal (4xx): not retried. `code` is its machine-readable
    reason, `details` the whole JSON answer."""

    def __init__(self, message: str, *, status: int, code: str, details: dict[str, Any],
                 hint: str | None = None):
        super().__init__(message, hint)
        self.status, self.code, self.details = status, code, details


class _Transient(Exception):
    """A failure worth retrying, by `stage`: "connect" (no connection), "exchange" (lost or
    timed out), "agent" (a 5xx: the agent itself failed)."""

    def __init__(self, reason: str, stage: str):
        super().__init__(reason)
        self.reason, self.stage = reason, stage


class AgentClient:
    """HTTP (or TLS pinned to `tls_fingerprint`) to one agent: the token, timeouts, retries with
    backoff, errors as AgentError."""

    def __init__(self, host: str, port: int, token_file: str | Path | None,
                 settings: AgentSettings | None = None, *, tls_fingerprint: str | None = None):
        self.host, self.port, self.token_file = host, int(port), token_file
        self.settings = settings or AgentSettings()
        self.where = f"{host}:{port}"
        try:
            self.tls_fingerprint = None if tls_fingerprint is None else \
                tls.normalize_fingerprint(tls_fingerprint)
        except ValueError as err:
            raise InputError(f"tls_fingerprint of the agent at {self.where} {err}") from None
        self._tls = tls.client_context() if self.tls_fingerprint else None

    def health(self, *, timeout_s: float | None = None, retries: int | None = 0) -> dict[str, Any]:
        t = timeout_s or self.settings.health_timeout_s
        answer = self.request("GET", "/health", retries=retries, connect_timeout_s=t,
                              read_timeout_s=t)
        self.checked(_HealthAnswer, answer, "GET /health")
        return answer

    def checked(self, schema: type[BaseModel], answer: dict[str, Any], what: str) -> Any:
        """`answer` validated by `schema`; one AgentError line when it does not fit."""
        try:
            return schema.model_validate(answer)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "answer"
            raise AgentError(f"agent at {self.where} sent an answer to {what} that hwnas cannot "
                             f"use ({_line(where, 80)}: {_line(first['msg'], 120)}); nothing "
                             "was stored: check that an hwnas agent of this version runs there"
                             ) from None

    def request(self, method: str, path: str, body: bytes | None = None, *,
                retries: int | None = None, connect_timeout_s: float | None = None,
                read_timeout_s: float | None = None) -> dict[str, Any]:
        """One request, retried on connection errors and 5xx; the JSON answer."""
        token = read_token(self.token_file)
        retries = self.settings.retries if retries is None else retries
        busy_until = time.monotonic() + self.settings.busy_wait_s
        attempt, wait = 0, 0.0
        while True:
            time.sleep(wait)
            try:
                status, answer = self._exchange(
                    method, path, body, token, connect_timeout_s or self.settings.connect_timeout_s,
                    read_timeout_s or self.settings.read_timeout_s)
            except _Transient as err:
                last = err
            else:
                if status < 400:
                    return answer
                if status < 500:
                    raise self._refused(status, answer)
                last = _Transient(_line(answer.get("message", f"HTTP {status}")), "agent")
                after = _retry_after(answer) if status == 503 else None
                if after is not None and time.monotonic() + after <= busy_until:
                    wait = after  # busy: come back when it says, not a failed attempt
                    continue
            attempt += 1
            if attempt > retries:
                raise self._gave_up(last, attempt)
            wait = min(self.settings.backoff_s * 2 ** (attempt - 1), _MAX_BACKOFF_S)

    def _exchange(self, method: str, path: str, body: bytes | None, token: str,
                  connect_timeout_s: float, read_timeout_s: float) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout_s)
        try:
            try:
                conn.connect()
            except ConnectionRefusedError:
                raise _Transient("connection refused", "connect") from None
            except socket.gaierror as err:
                raise _Transient(f"cannot resolve {self.host} ({err.strerror})",
                                 "connect") from None
            except TimeoutError:
                raise _Transient(f"no connection within {connect_timeout_s:g} s",
                                 "connect") from None
            except OSError as err:
                raise _Transient(err.strerror or type(err).__name__, "connect") from None
            if self._tls is not None:
                self._secure(conn, connect_timeout_s)
            assert conn.sock is not None
            conn.sock.settimeout(read_timeout_s)
            with _deadline(conn.sock, read_timeout_s) as expired:
                try:
                    status, data = self._send(conn, method, path, body, token)
                except TimeoutError:
                    raise _Transient(f"no answer within {read_timeout_s:g} s",
                                     "exchange") from None
                except (http.client.HTTPException, OSError) as err:
                    if expired.is_set():
                        raise _Transient(f"no complete answer within {read_timeout_s:g} s",
                                         "exchange") from None
                    raise _Transient(f"connection lost ({type(err).__name__})",
                                     "exchange") from None
        finally:
            conn.close()
        if expired.is_set():
            raise _Transient(f"no complete answer within {read_timeout_s:g} s", "exchange")
        try:
            answer = json.loads(data)
            if not isinstance(answer, dict):
                raise ValueError
        except (ValueError, RecursionError):
            raise AgentError(f"{self.where} answered HTTP {status} with something that is not "
                             "an hwnas agent's JSON; check --host/--port") from None
        return status, answer

    def _secure(self, conn: http.client.HTTPConnection, timeout_s: float) -> None:
        """TLS over the connected socket, then the pin, before the token is sent. A closed
        connection or a slow handshake is retried like a failed connect; a handshake the agent
        cannot do (it speaks plain HTTP) and a certificate other than the pinned one are final."""
        assert self._tls is not None and self.tls_fingerprint is not None and conn.sock is not None
        try:
            conn.sock = self._tls.wrap_socket(conn.sock)
        except TimeoutError:
            raise _Transient(f"no TLS handshake within {timeout_s:g} s", "connect") from None
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError):
            raise _Transient("the connection closed during the TLS handshake", "connect") from None
        except ssl.SSLError as err:
            raise AgentError(f"agent at {self.where} does not speak TLS (handshake failed: "
                             f"{_line(err.reason or err, 80)}); start it with `hwnas agent serve "
                             "--tls` or remove tls_fingerprint from the device") from None
        except OSError as err:
            raise _Transient(err.strerror or type(err).__name__, "connect") from None
        tls.check_pin(conn.sock, self.tls_fingerprint, self.where)

    def _send(self, conn: http.client.HTTPConnection, method: str, path: str,
              body: bytes | None, token: str) -> tuple[int, bytes]:
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {token}")
        if body is not None:
            conn.putheader("Content-Type", CONTENT_TYPE)
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            try:
                conn.send(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused before the body was read: the answer says why
        response = conn.getresponse()
        return response.status, self._body(response)

    def _body(self, response: http.client.HTTPResponse) -> bytes:
        """The answer's bytes, at most `max_response_bytes` (a hostile agent's endless body
        would otherwise take all memory)."""
        limit = self.settings.max_response_bytes
        if response.length is not None and response.length > limit:
            raise self._too_large(limit)
        chunks, size = [], 0
        while chunk := response.read1(1 << 16):
            size += len(chunk)
            if size > limit:
                raise self._too_large(limit)
            chunks.append(chunk)
        if response.length:
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        return b"".join(chunks)

    def _too_large(self, limit: int) -> AgentError:
        return AgentError(f"agent at {self.where} sent an answer larger than {limit} bytes; "
                          "nothing was stored: check that an hwnas agent runs there (or raise "
                          "options.agent.max_response_bytes)")

    def _refused(self, status: int, answer: dict[str, Any]) -> AgentRefused:
        code = _line(answer.get("error", "refused"), 40)
        message = _line(answer.get("message", f"HTTP {status}"))
        hint = None
        if status == 401:
            text = f"agent at {self.where} refused the token from {self.token_file}"
            hint = "the file must hold the token of the agent's --token-file"
        elif status == 413:
            text = f"agent at {self.where} refused the request: payload too large: {message}"
        elif code == "tls_required":
            text = (f"agent at {self.where} speaks TLS only: set the device's tls_fingerprint to "
                    "the fingerprint `hwnas agent serve --tls` printed on the agent's machine")
        elif code == "not_onnx":
            text = f"agent at {self.where} refused the payload: {message}"
        elif status == 422:
            text = f"agent at {self.where} could not measure: {message}"
        else:
            text = f"agent at {self.where} refused the request (HTTP {status}, {code}): {message}"
        return AgentRefused(text, status=status, code=code, details=answer, hint=hint)

    def _gave_up(self, err: _Transient, attempts: int) -> AgentError:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if err.stage == "connect":
            return AgentError(f"agent at {self.where} is unreachable: {err.reason}{tries}; start "
                              f"it with `hwnas agent serve --host {self.host} --port {self.port} "
                              f"--token-file FILE{' --tls' if self._tls else ''}` or check "
                              "--host/--port")
        if err.stage == "agent":
            return AgentError(f"agent at {self.where} failed: {err.reason}{tries}; see the "
                              "agent's log")
        return AgentError(f"agent at {self.where} did not complete the request: "
                          f"{err.reason}{tries}; check that the agent is still running")


class RemoteBackend(Backend):
    """Compiles to ONNX here and has the agent on `device.host` time it (see the module doc)."""

    name = "remote"
    artifact_format = "onnx"
    dists = ("onnx",)

    def __init__(self, device: Device):
        super().__init__(device)
        try:
            self.settings = AgentSettings.model_validate(device.options.get("agent") or {})
        except ValidationError as err:
            first = err.errors()[0]
            raise DeviceError(f"device '{device.name}': options.agent."
                              f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        assert device.host is not None
        self.client = AgentClient(device.host, device.port or DEFAULT_PORT, device.token_file,
                                  self.settings, tls_fingerprint=device.tls_fingerprint)
        self._health: dict[str, Any] | None = None
        self._health_at = 0.0
        self._held: set[str] = set()  # sha256 of the models the agent is known to hold
        self._target_name: str | None = None  # the agent device it runs on, once resolved

    # -- availability --------------------------------------------------------------------
    def health(self, max_age_s: float = 30.0, retries: int | None = 0) -> dict[str, Any]:
        """The agent's /health (a successful answer is reused for `max_age_s`); `retries=None`
        retries like a measurement does."""
        if self._health is None or time.monotonic() - self._health_at > max_age_s:
            self._health = self.client.health(retries=retries)
            self._health_at = time.monotonic()
        return self._health

    def available(self) -> str | None:
        """None when the agent answers and accepts the token (and has the named agent device
        usable), else why not; takes at most `health_timeout_s`."""
        if self.device.token_file is None:
            return (f"remote device at {self.client.where} needs a token_file for the agent "
                    "client: a file holding the agent's token (see `hwnas agent serve "
                    "--token-file`)")
        try:
            health = self.health()
        except AgentError as err:
            return str(err)
        name = self._agent_device(health)
        if name is None:
            return self._no_match()
        status = {d["name"]: d for d in health.get("devices", [])}.get(name)
        if status is None:
            return f"agent at {self.client.where} has no device '{name}'"
        if status.get("available"):
            return f"device '{name}' on the agent at {self.client.where}: {status['available']}"
        return None

    # -- compile here, run there ---------------------------------------------------------
    def _compile(self, module: nn.Module, x: torch.Tensor, workdir: Path) -> Artifact:
        path = export_onnx(module, x, workdir / "model.onnx", precision=self.device.precision)
        dtype = "float16" if self.device.precision == "fp16" else "float32"
        return self._artifact(path, x, input_dtype=dtype, agent=self.client.where)

    def _load(self, artifact: Artifact) -> Runner:
        raise DeviceError(f"device '{self.device.name}' is remote: its models run on the agent "
                          f"at {self.client.where}, not here; time them with "
                          "RemoteBackend.measure / measure_many (or measure_artifacts)")

    def measure(self, artifact: Artifact, *, reference: Artifact | None = None,
                request_id: str | None = None, **protocol: Any) -> LatencyStats:
        """`protocol.measure` on the agent (same keyword arguments)."""
        options = _options(protocol)
        if extra := set(options.kwargs()) - ProtocolOptions.SINGLE:
            raise InputError(f"measure takes {sorted(ProtocolOptions.SINGLE)}, not "
                             f"{sorted(extra)}; use measure_many")
        return self._post("/measure", {"model": artifact}, reference, options,
                          request_id)["model"]

    def measure_many(self, artifacts: Mapping[str, Artifact], reference: Artifact, *,
                     progress: ProgressFn | None = None, **protocol: Any
                     ) -> dict[str, LatencyStats]:
        """`protocol.measure_many` on the agent (same keyword arguments), in as many requests
        as the agent's size limit and `max_models_per_request` need."""
        options = _options(protocol)
        out: dict[str, LatencyStats] = {}
        done = 0
        for chunk in self._chunks(artifacts, reference):
            out.update(self._post("/measure_many", chunk, reference, options))
            for mid in chunk:
                done += 1
                if progress is not None:
                    progress(done, len(artifacts), mid)
        return {mid: out[mid] for mid in artifacts}

    # -- internals -----------------------------------------------------------------------
    def _limit(self) -> int:
        """The agent's request size limit (fixed while it runs: any answer ever seen will do)."""
        health = self._health or self.health(retries=None)
        return int(health.get("max_request_bytes", DEFAULT_MAX_REQUEST_BYTES))

    def _chunks(self, artifacts: Mapping[str, Artifact], reference: Artifact
                ) -> Iterator[dict[str, Artifact]]:
        """Consecutive groups that fit the agent's size limit (a too-big model goes alone and
        is refused with the size in the message)."""
        budget = self._limit() - _HEADER_ALLOWANCE - _size(reference, self.device.name)
        chunk: dict[str, Artifact] = {}
        used = 0
        for mid, artifact in artifacts.items():
            size = _size(artifact, self.device.name)
            if chunk and (len(chunk) >= self.settings.max_models_per_request
                          or used + size > budget):
                yield chunk
                chunk, used = {}, 0
            chunk[mid] = artifact
            used += size
        if chunk:
            yield chunk

    def _spec(self) -> dict[str, Any]:
        """What of this device the agent's device must match (the client's side of it left out:
        name, host, port, token_file, tls_fingerprint, description, resolution and options.agent)."""
        spec = self.device.model_dump(mode="json", include=set(_MATCHED))
        spec["options"] = {k: v for k, v in spec["options"].items() if k != "agent"}
        return spec

    def _agent_device(self, health: dict[str, Any]) -> str | None:
        """The agent device this device runs on: `options.agent.device`, else the agent's
        device whose settings equal this device's (its own name first), else None."""
        if self.settings.device is not None:
            return self.settings.device
        want = self._spec()
        matches = [d["name"] for d in health.get("devices", [])
                   if {k: (d.get("spec") or {}).get(k, {} if k == "options" else None)
                       for k in _MATCHED} == want]
        if self.device.name in matches:
            return self.device.name
        return matches[0] if matches else None

    def _no_match(self) -> str:
        spec = self._spec()
        what = " ".join(f"{k}={v}" for k, v in spec.items() if v not in (None, {}))
        return (f"agent at {self.client.where} has no device with this device's settings "
                f"({what}); the agent runs only its own devices: name one with "
                "options.agent.device or add one to the agent's --devices file")

    def _target(self) -> dict[str, Any]:
        """The agent device to use, by name (the agent takes no device spec from a client)."""
        if self._target_name is None:
            name = self._agent_device(self._health or self.health(retries=None))
            if name is None:
                raise AgentError(self._no_match())
            self._target_name = name
        return {"agent_device": self._target_name}

    def _post(self, path: str, chunk: Mapping[str, Artifact], reference: Artifact | None,
              options: ProtocolOptions, request_id: str | None = None
              ) -> dict[str, LatencyStats]:
        data = {mid: _read(a, self.device.name) for mid, a in chunk.items()}
        ref = _read(reference, self.device.name) if reference is not None else None
        by_sha = {sha256(b): b for b in [*data.values(), *([ref] if ref else [])]}
        header = {"request_id": request_id or uuid.uuid4().hex, **self._target(),
                  "protocol": options.kwargs(),
                  "models": {mid: sha256(b) for mid, b in data.items()},
                  "reference": sha256(ref) if ref else None}

        def send(shas: list[str]) -> dict[str, Any]:
            body = encode_frames(header, [by_sha[s] for s in shas])
            if len(body) > (limit := self._limit()):
                raise AgentError(f"agent at {self.client.where} refused the request: payload "
                                 f"too large: {len(body)} bytes, more than its limit of {limit}; "
                                 "start the agent with a larger --max-request-bytes")
            return self.client.request("POST", path, body)

        try:
            answer = send([s for s in by_sha if s not in self._held])
        except AgentRefused as err:
            if err.code != "missing_models":
                raise
            answer = send(list(by_sha))  # the agent lost some (evicted, state wiped): resend
        self._held |= set(by_sha)
        return self._results(path, answer, list(data))

    def _results(self, path: str, answer: dict[str, Any], ids: list[str]
                 ) -> dict[str, LatencyStats]:
        """The stats of exactly the models asked for, checked before anything is stored."""
        checked = self.client.checked(_MeasureAnswer, answer, f"POST {path}")
        if set(checked.results) != set(ids):
            raise AgentError(f"agent at {self.client.where} answered POST {path} for other "
                             f"models than it was sent ({len(checked.results)} results for "
                             f"{len(ids)} models); nothing was stored")
        results = {mid: LatencyStats.from_dict(checked.results[mid].model_dump()) for mid in ids}
        for stats in results.values():
            stats.device = self.device.name  # stored under this device's name
        return results


def _line(value: Any, limit: int = 300) -> str:
    """An agent's text as one short printable line (it may be anything, escapes included)."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _retry_after(answer: dict[str, Any]) -> float | None:
    """The seconds a 503 answer says to wait (at most a minute), or None."""
    after = answer.get("retry_after")
    if isinstance(after, bool) or not isinstance(after, (int, float)) or \
            not math.isfinite(after) or after < 0:
        return None
    return min(float(after), 60.0)


@contextmanager
def _deadline(sock: socket.socket, seconds: float) -> Iterator[threading.Event]:
    """Shut `sock` down after `seconds` in all: a per-read timeout alone lets an agent that
    trickles its answer byte by byte hold the client forever. The event tells it happened."""
    expired = threading.Event()

    def fire() -> None:
        expired.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield expired
    finally:
        timer.cancel()


def _options(protocol: Mapping[str, Any]) -> ProtocolOptions:
    try:
        return ProtocolOptions(**protocol)
    except ValidationError as err:
        first = err.errors()[0]
        raise InputError(f"measurement option {'.'.join(map(str, first['loc']))}: "
                         f"{first['msg']}") from None


def _checked(artifact: Artifact, device: str) -> Path:
    if artifact.format != "onnx" or artifact.path is None or not Path(artifact.path).is_file():
        raise DeviceError(f"device '{device}' sends ONNX files to its agent; got a "
                          f"{artifact.format} artifact at {artifact.path}; compile the model "
                          "for this device")
    return Path(artifact.path)


def _read(artifact: Artifact, device: str) -> bytes:
    return _checked(artifact, device).read_bytes()


def _size(artifact: Artifact, device: str) -> int:
    return _checked(artifact, device).stat().st_size


def measure_artifacts(backend: Backend, artifacts: Mapping[str, Artifact], reference: Artifact,
                      **protocol: Any) -> dict[str, LatencyStats]:
    """Drift-corrected timings of compiled artifacts on any device: the agent of a remote
    device times them; a local device loads runners and runs `protocol.measure_many`."""
    if isinstance(backend, RemoteBackend):
        return backend.measure_many(artifacts, reference, **protocol)
    from hwnas.devices.protocol import measure_many

    runners = {mid: backend.load(a) for mid, a in artifacts.items()}
    ref = backend.load(reference)
    try:
        return measure_many(runners, ref, **protocol)
    finally:
        for runner in [*runners.values(), ref]:
            runner.close()
