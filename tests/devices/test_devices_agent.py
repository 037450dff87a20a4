"""The remote agent as users run it: real agent processes on loopback, the client through a
remote device, refusals a user would hit, and a crash in the middle of a profile."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from agent_helpers import AgentProcess, remote

from hwnas.devices import Artifact
from hwnas.devices.agent import (
    AgentClient,
    AgentRefused,
    RemoteBackend,
    create_token_file,
    read_token,
)
from hwnas.devices.agent.wire import Refusal, check_onnx, encode_frames
from hwnas.errors import AgentError, DeviceError

LIMIT = 1_000_000  # the main agent's request size limit (the models are ~15 KB)
FAST = dict(runs=4, warmup_runs=1, warmup_s=0.0)
FAST_MANY = dict(rounds=2, ref_runs=2, ref_warmup_runs=1, **FAST)


@pytest.fixture(scope="module")
def agent(token_file, tmp_path_factory):
    proc = AgentProcess(token_file, tmp_path_factory.mktemp("agent") / "state",
                        max_request_bytes=LIMIT)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def onnx_models(make_net, token_file, tmp_path_factory) -> dict[str, Artifact]:
    """Six small models and a reference, exported by the client (no agent needed)."""
    device = remote("exporter", 9, token_file)
    backend = RemoteBackend(device)
    backend.available = lambda: None  # export only: the port is a dummy
    root = tmp_path_factory.mktemp("onnx")
    x = torch.zeros(1, 3, 32, 32)
    widths = {"ref": 16, **{f"m{i}": w for i, w in enumerate((8, 12, 16, 24, 32, 48))}}
    return {mid: backend.compile(make_net(w), x, root / mid) for mid, w in widths.items()}


def frame(payload: bytes, request_id: str = "req-not-onnx") -> bytes:
    sha = hashlib.sha256(payload).hexdigest()
    return encode_frames({"request_id": request_id,
                          "agent_device": "cpu-ort",
                          "models": {"m": sha}}, [payload])


# -- measuring through the agent ----------------------------------------------------------
def test_measure_many_and_measure_through_the_agent(agent, token_file, onnx_models):
    device = remote("rpi-ort", agent.port, token_file)
    backend = device.backend_impl()
    assert isinstance(backend, RemoteBackend) and backend.available() is None
    health = backend.client.health()
    usable = {d["name"] for d in health["devices"] if d["available"] is None}
    assert "cpu-ort" in usable and health["max_request_bytes"] == LIMIT
    before = health["counters"]["requests_measured"]

    models = {k: onnx_models[k] for k in ("m0", "m3", "m5")}
    calls = []
    res = backend.measure_many(models, onnx_models["ref"], progress=lambda *a: calls.append(a),
                               **FAST_MANY)
    assert list(res) == ["m0", "m3", "m5"]
    assert calls == [(1, 3, "m0"), (2, 3, "m3"), (3, 3, "m5")]
    for s in res.values():
        assert s.n == 8 and s.rounds == 2 and len(s.ref_ms) == 2 * 2 * 2
        assert 0 < s.min_ms <= s.median_ms <= s.p90_ms <= s.p99_ms
        assert s.corrected_ms > 0 and s.ref_median_ms > 0 and s.ratio > 0
        assert s.device == "rpi-ort" and s.backend == "onnxruntime"
        assert (s.threads, s.batch, s.precision, s.resolution) == (1, 1, "fp32", 32)
        assert s.host == socket.gethostname() and "onnxruntime" in s.versions

    one = backend.measure(onnx_models["m1"], **FAST)
    assert one.n == 4 and one.ref_median_ms is None and one.corrected_ms == one.median_ms
    assert backend.client.health()["counters"]["requests_measured"] == before + 2

    with pytest.raises(DeviceError, match="is remote: its models run on the agent"):
        backend.load(onnx_models["m1"])


def test_agent_device_by_name_and_unknown_name(agent, token_file, onnx_models):
    backend = remote("via-name", agent.port, token_file, device="cpu-ort").backend_impl()
    assert backend.available() is None
    s = backend.measure(onnx_models["m2"], reference=onnx_models["ref"], **FAST)
    assert s.device == "via-name" and s.rounds == 1 and s.ref_median_ms > 0
    missing = remote("nope", agent.port, token_file, device="no-such-device").backend_impl()
    assert "has no device 'no-such-device'" in missing.available()
    with pytest.raises(AgentError, match="could not measure: the agent has no device"):
        missing.measure(onnx_models["m2"], **FAST)
    eager = remote("eager", agent.port, token_file, device="cpu-torch").backend_impl()
    assert "the torch backend cannot build from ONNX" in eager.available()
    with pytest.raises(AgentError, match="could not measure: device 'cpu-torch' cannot be used"):
        eager.measure(onnx_models["m2"], **FAST)


def test_agent_serves_openvino_by_converting_the_onnx(agent, token_file, onnx_models):
    """OpenVINO devices are served from the ONNX bytes a client sends (the agent converts them)."""
    from hwnas.devices import get_device

    if reason := get_device("cpu-openvino").available():
        pytest.skip(reason)
    backend = remote("ov", agent.port, token_file, device="cpu-openvino").backend_impl()
    assert backend.available() is None
    res = backend.measure_many({k: onnx_models[k] for k in ("m0", "m5")}, onnx_models["ref"], **FAST_MANY)
    assert set(res) == {"m0", "m5"}
    assert all(s.backend == "openvino" and s.n == 8 and s.ratio > 0 for s in res.values())
    assert "openvino" in res["m0"].versions


# -- refusals -------------------------------------------------------------------------------
def test_wrong_token_is_refused(agent, tmp_path, onnx_models):
    wrong = tmp_path / "wrong.token"
    create_token_file(wrong)
    backend = remote("bad-token", agent.port, wrong).backend_impl()
    assert "refused the token" in backend.available()
    with pytest.raises(AgentError, match="refused the token") as err:
        backend.measure(onnx_models["m0"], **FAST)
    assert "\n" not in str(err.value)
    assert "needs a token_file" in remote("none", agent.port, None).backend_impl().available()


def test_token_files(tmp_path):
    path = tmp_path / "t"
    token = create_token_file(path)
    assert read_token(path) == token and path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(AgentError, match="already exists"):
        create_token_file(path)
    path.write_text("short\n")
    with pytest.raises(AgentError, match="does not hold an hwnas agent token"):
        read_token(path)
    proc = subprocess.run([sys.executable, "-m", "hwnas.devices.agent", "--port", "0",
                           "--token-file", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: token file {tmp_path / 'missing'} does not exist "
        "(create one with `hwnas agent token FILE`)"]


class _Marker:
    """Unpickling this would create a file: the agent must never unpickle."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_non_onnx_payloads_are_refused_and_never_executed(agent, token_file, tmp_path):
    client = AgentClient("127.0.0.1", agent.port, token_file)
    before = client.health()["counters"]
    marker = tmp_path / "unpickled"
    for payload in (pickle.dumps(_Marker(marker)), os.urandom(4096), b"\x08\x07"):
        with pytest.raises(AgentRefused, match="refused the payload: the payload is not an "
                           "acceptable ONNX model") as err:
            client.request("POST", "/measure", frame(payload))
        assert err.value.status == 415 and err.value.code == "not_onnx"
    with pytest.raises(AgentRefused, match="bad magic") as err:  # no frame at all: a raw pickle
        client.request("POST", "/measure", pickle.dumps(_Marker(marker)))
    assert err.value.status == 400
    assert not marker.exists()
    assert client.health()["counters"] == before


def test_onnx_with_external_data_is_refused(onnx_models):
    import onnx

    data = onnx_models["m0"].path.read_bytes()
    assert check_onnx(data).shape == (1, 3, 32, 32)
    model = onnx.load_model_from_string(data)
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="/etc/passwd")
    with pytest.raises(Refusal, match="references external data files"):
        check_onnx(model.SerializeToString())


def test_oversized_requests_are_refused_before_the_body(agent, token_file, onnx_models,
                                                        tmp_path):
    token = token_file.read_text().strip()
    with socket.create_connection(("127.0.0.1", agent.port), timeout=5) as sock:
        sock.sendall(f"POST /measure HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {token}\r\n"
                     f"Content-Type: application/x-hwnas-frames\r\nContent-Length: {10 * LIMIT}"
                     "\r\n\r\n".encode())  # headers only: the answer comes without any body
        answer = b""
        while chunk := sock.recv(65536):  # the agent closes after answering
            answer += chunk
    answer = answer.decode()
    assert answer.startswith("HTTP/1.0 413") and '"payload_too_large"' in answer

    client = AgentClient("127.0.0.1", agent.port, token_file)
    with pytest.raises(AgentRefused, match="payload too large") as err:
        client.request("POST", "/measure", frame(os.urandom(2 * LIMIT)))
    assert err.value.status == 413

    big = tmp_path / "big.onnx"
    big.write_bytes(os.urandom(2 * LIMIT))
    artifact = Artifact("onnx", big, (1, 3, 32, 32))
    backend = remote("big", agent.port, token_file).backend_impl()
    with pytest.raises(AgentError, match="payload too large"):
        backend.measure(artifact, **FAST)


def test_unreachable_agent_is_one_quick_line(token_file, onnx_models):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    backend = remote("gone", port, token_file, retries=2, backoff_s=0.1,
                     connect_timeout_s=1).backend_impl()
    start = time.monotonic()
    reason = backend.available()
    with pytest.raises(AgentError) as err:
        backend.measure(onnx_models["m0"], **FAST)
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert message.startswith(f"agent at 127.0.0.1:{port} is unreachable: connection refused")
    assert "hwnas agent serve" in message and "\n" not in message
    assert reason.startswith(f"agent at 127.0.0.1:{port} is unreachable")


# -- TLS --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tls_agent(tmp_path_factory):
    """An agent started with --tls; its certificate is made beside its own token file."""
    root = tmp_path_factory.mktemp("tls")
    create_token_file(root / "agent.token")
    proc = AgentProcess(root / "agent.token", root / "state", tls=True)
    proc.token_file = root / "agent.token"
    yield proc
    proc.stop()


def test_tls_measures_on_loopback_with_the_pinned_certificate(tls_agent, onnx_models):
    from hwnas.devices.agent.tls import certificate_paths, ensure_certificate

    cert, key = certificate_paths(tls_agent.token_file)
    assert cert.is_file() and key.stat().st_mode & 0o777 == 0o600
    openssl = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"],
                             capture_output=True, text=True, check=True).stdout
    _, _, pin = ensure_certificate(tls_agent.token_file)  # the same pair on the next start
    assert pin == "sha256:" + openssl.strip().split("=", 1)[1]
    assert f'tls_fingerprint: "{pin}"' in tls_agent.banner and "https://127.0.0.1" in tls_agent.banner
    typed = pin.removeprefix("sha256:").replace(":", "").lower()  # as someone might type it
    backend = remote("tls-ort", tls_agent.port, tls_agent.token_file, tls_fingerprint=typed).backend_impl()
    assert backend.available() is None
    res = backend.measure_many({k: onnx_models[k] for k in ("m0", "m2")}, onnx_models["ref"], **FAST_MANY)
    assert set(res) == {"m0", "m2"} and all(s.corrected_ms > 0 for s in res.values())


def test_a_wrong_fingerprint_is_one_final_line_and_exit_2(tls_agent, onnx_models, tmp_path):
    wrong = "sha256:" + ":".join(["0F"] * 32)
    backend = remote("tls-wrong", tls_agent.port, tls_agent.token_file, tls_fingerprint=wrong,
                     retries=3).backend_impl()
    start = time.monotonic()
    with pytest.raises(AgentError) as err:
        backend.measure(onnx_models["m0"], **FAST)
    message = str(err.value)
    assert "not the pinned tls_fingerprint " + wrong in message and "\n" not in message, message
    assert time.monotonic() - start < 5  # refused at once, not retried
    assert "not the pinned tls_fingerprint" in backend.available()
    devices = tmp_path / "devices.yaml"
    devices.write_text(f"devices:\n  - name: tls-wrong\n    backend: onnxruntime\n    host: 127.0.0.1\n"
                       f"    port: {tls_agent.port}\n    token_file: {tls_agent.token_file}\n"
                       f'    tls_fingerprint: "{wrong}"\n')
    proc = subprocess.run([sys.executable, "-m", "hwnas", "agent", "health", "tls-wrong",
                           "--devices", str(devices)], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "not the pinned" in lines[0], proc.stderr


def test_a_client_without_a_fingerprint_is_told_to_pin_the_tls_agent(tls_agent):
    backend = remote("tls-missing", tls_agent.port, tls_agent.token_file, retries=3).backend_impl()
    reason = backend.available()
    assert "speaks TLS only: set the device's tls_fingerprint" in reason and "\n" not in reason, reason
    with pytest.raises(AgentRefused) as err:
        backend.client.request("GET", "/health")
    assert err.value.status == 400 and err.value.code == "tls_required"


def test_a_pinned_client_does_not_talk_to_a_plain_agent(agent, token_file):
    """An agent without --tls either answers the TLS hello with plain text (the handshake fails)
    or waits for a request line that never comes: either way one line naming --tls."""
    backend = remote("tls-to-plain", agent.port, token_file, tls_fingerprint="ab" * 32, retries=0,
                     connect_timeout_s=1, health_timeout_s=1).backend_impl()
    with pytest.raises(AgentError) as err:
        backend.client.health(timeout_s=1)
    message = str(err.value)
    assert ("does not speak TLS" in message or "no TLS handshake within 1 s" in message) and \
        "--tls" in message and "\n" not in message, message


@pytest.mark.parametrize("entry, expected", [
    ({"host": "h", "tls_fingerprint": "sha1:AB"}, "tls_fingerprint: must be a SHA-256 fingerprint"),
    ({"tls_fingerprint": "ab" * 32}, "give the device its agent's host too"),
])
def test_a_bad_tls_fingerprint_in_a_devices_file_is_one_line(tmp_path, entry, expected):
    from hwnas.devices.registry import load_devices

    path = tmp_path / "devices.yaml"
    path.write_text(json.dumps({"devices": [{"name": "pi", "backend": "onnxruntime", **entry}]}))
    with pytest.raises(DeviceError, match=expected) as err:
        load_devices(path)
    assert "\n" not in str(err.value)


# -- idempotency and crashes ------------------------------------------------------------------
def test_retry_after_a_client_timeout_gets_the_stored_result(agent, token_file, onnx_models):
    """The client gives up on its first attempt long before the agent is done; the retries
    (same request id) wait for that measurement and get its result: one measurement."""
    backend = remote("impatient", agent.port, token_file, read_timeout_s=0.3, retries=20,
                     backoff_s=0.1).backend_impl()
    probe = AgentClient("127.0.0.1", agent.port, token_file)
    before = probe.health()["counters"]
    stats = backend.measure(onnx_models["m4"], runs=4, warmup_runs=1, warmup_s=1.0)
    after = probe.health()["counters"]
    assert stats.n == 4
    assert after["requests_measured"] == before["requests_measured"] + 1
    assert after["replayed"] > before["replayed"]


def _measured(state_dir: Path) -> list[str]:
    """Model ids of every measurement the agent made (its audit log), duplicates kept."""
    lines = (state_dir / "measured.jsonl").read_text().splitlines()
    return [mid for line in lines for mid in json.loads(line)["models"]]


def test_agent_killed_mid_profile_loses_nothing_and_measures_nothing_twice(
        token_file, onnx_models, tmp_path):
    state = tmp_path / "state"
    first = AgentProcess(token_file, state)
    port = first.port
    device = remote("fault", port, token_file, retries=12, backoff_s=0.2,
                    max_models_per_request=1)
    backend = device.backend_impl()

    # a finished request, to be answered again after the crash
    done = backend.measure(onnx_models["m0"], request_id="finished-before-crash", **FAST)

    models = {k: onnx_models[k] for k in ("m0", "m1", "m2", "m3", "m4", "m5")}
    out: dict = {}
    errors: list[BaseException] = []

    def profile() -> None:
        try:
            out.update(backend.measure_many(models, onnx_models["ref"], rounds=2, runs=4,
                                            warmup_runs=1, warmup_s=0.1, ref_runs=2))
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    thread = threading.Thread(target=profile)
    thread.start()
    probe = AgentClient("127.0.0.1", port, token_file)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # kill while a request of the profile is in flight
        health = probe.health(timeout_s=2)
        if health["counters"]["requests_measured"] >= 3 and (busy := health["busy"]):
            break
        time.sleep(0.02)
    else:
        pytest.fail("the profile never got going")
    first.proc.kill()
    first.proc.wait()
    killed_after = len(_measured(state))
    assert 2 <= killed_after - 1 < 6  # some done (besides the first request), some not

    second = AgentProcess(token_file, state, port=port)
    try:
        thread.join(timeout=40)
        assert not thread.is_alive() and not errors, errors
        assert set(out) == set(models)
        assert all(s.n == 8 and s.device == "fault" for s in out.values())
        log = _measured(state)
        assert sorted(log[1:]) == sorted(models)  # each model measured exactly once
        results = {p.stem: json.loads(p.read_text()) for p in (state / "results").glob("*.json")}
        assert len(results) == 1 + len(models)
        assert busy in results  # the request in flight at the kill was finished after it

        counters = probe.health()["counters"]
        assert counters["requests_measured"] == 1 + len(models)  # persisted over the restart
        again = backend.measure(onnx_models["m0"], request_id="finished-before-crash", **FAST)
        assert again == done  # answered from disk, not measured again
        health = probe.health()["counters"]
        assert health["requests_measured"] == 1 + len(models) and health["replayed"] >= 1
        with pytest.raises(AgentRefused, match="already used for a different request"):
            backend.measure(onnx_models["m1"], request_id="finished-before-crash", **FAST)

        # SIGTERM during a measurement: it finishes, its answer arrives, the agent exits 0
        once = remote("once", port, token_file, retries=0).backend_impl()
        assert once.available() is None
        slow: dict = {}
        worker = threading.Thread(target=lambda: slow.update(stats=once.measure(
            onnx_models["m5"], runs=4, warmup_runs=1, warmup_s=1.0)))
        worker.start()
        while not probe.health()["busy"]:
            time.sleep(0.02)
        assert second.stop(signal.SIGTERM) == 0
        worker.join(timeout=20)
        assert slow["stats"].n == 4
        assert "hwnas agent stopped" in second.proc.stdout.read()
    finally:
        second.stop(signal.SIGKILL)
