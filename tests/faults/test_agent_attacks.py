"""A token holder attacking the agent: it may time ONNX models on the agent's own devices, and
nothing else. A real agent runs in this process on 127.0.0.1 with a free port."""

from __future__ import annotations

import hashlib
import json
import socket
import threading

import pytest

from hwnas.devices import Artifact, Device
from hwnas.devices.agent import Agent, AgentClient, AgentRefused, create_token_file, make_server
from hwnas.devices.agent.wire import encode_frames
from hwnas.errors import AgentError

FAST = dict(runs=2, warmup_runs=0, warmup_s=0.0)


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_onnx):
    """An agent with one device of its own (`cpu-ort-owner`, options chosen by its owner)."""
    root = tmp_path_factory.mktemp("agent")
    token_file = root / "token"
    create_token_file(token_file)
    devices = root / "devices.yaml"
    devices.write_text("devices:\n  - name: cpu-ort-owner\n    backend: onnxruntime\n"
                       "    options:\n      session_config:\n"
                       "        session.intra_op.allow_spinning: '0'\n")
    agent = Agent(token_file.read_text().strip(), devices_file=devices, state_dir=root / "state",
                  max_request_bytes=1_000_000)
    server = make_server(agent, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield {"port": server.server_address[1], "token_file": token_file, "root": root,
           "model": tiny_onnx(root / "tiny.onnx")}
    server.shutdown()
    server.server_close()


def remote(served, name: str, **fields) -> Device:
    return Device(name=name, host="127.0.0.1", port=served["port"],
                  token_file=served["token_file"], **{"backend": "onnxruntime", **fields})


def post(served, header: dict, blob: bytes) -> AgentRefused | dict:
    header = {"request_id": hashlib.sha256(json.dumps(header, sort_keys=True).encode())
              .hexdigest()[:32], "models": {"m": hashlib.sha256(blob).hexdigest()}, **header}
    client = AgentClient("127.0.0.1", served["port"], served["token_file"])
    try:
        return client.request("POST", "/measure", encode_frames(header, [blob]), retries=0)
    except AgentRefused as err:
        return err


# -- item 1: nothing about how a model runs comes from the client --------------------------------
@pytest.mark.parametrize("field,value", [
    ("device", {"name": "x", "backend": "onnxruntime", "options": {"session_config": {
        "session.collect_node_memory_stats_to_file": "{target}"}}}),
    ("device", {"name": "x", "backend": "openvino", "options": {"config": {"CACHE_DIR": "{dir}"}}}),
    ("device", {"name": "x", "backend": "onnxruntime", "provider": "CUDAExecutionProvider"}),
    ("options", {"session_config": {"session.collect_node_memory_stats_to_file": "{target}"}}),
    ("provider", "CPUExecutionProvider"),
    ("providers", ["CPUExecutionProvider"]),
    ("cache_dir", "{dir}"),
    ("path", "{target}"),
])
def test_a_request_carrying_a_device_spec_or_runtime_option_is_refused(served, tmp_path, field,
                                                                        value):
    target, cache = tmp_path / "overwritten.txt", tmp_path / "cache"
    value = json.loads(json.dumps(value).replace("{target}", str(target))
                       .replace("{dir}", str(cache)))
    header = {field: value} if field == "device" else {"agent_device": "cpu-ort", field: value}
    answer = post(served, header, served["model"].read_bytes())
    assert isinstance(answer, AgentRefused), answer
    assert answer.status == 400 and answer.code == "device_spec_refused"
    assert field in str(answer) and "agent_device" in str(answer) and "\n" not in str(answer)
    assert not target.exists() and not cache.exists()


def test_a_client_cannot_name_a_device_the_agent_does_not_have(served):
    answer = post(served, {"agent_device": "../../etc"}, served["model"].read_bytes())
    assert isinstance(answer, AgentRefused) and answer.status == 400
    answer = post(served, {"agent_device": "cpu-ort-evil"}, served["model"].read_bytes())
    assert isinstance(answer, AgentRefused) and answer.status == 422
    assert "has no device 'cpu-ort-evil'" in str(answer)


def test_onnx_carrying_runtime_session_options_is_refused(served, tmp_path, tiny_onnx):
    evil = tiny_onnx(tmp_path / "evil.onnx", metadata={"ort_config": json.dumps(
        {"session_options": {"optimized_model_filepath": str(tmp_path / "written.onnx")}})})
    answer = post(served, {"agent_device": "cpu-ort"}, evil.read_bytes())
    assert isinstance(answer, AgentRefused) and answer.status == 415 and answer.code == "not_onnx"
    assert not (tmp_path / "written.onnx").exists()


def test_client_runs_on_the_agent_device_with_its_settings(served):
    """`hwnas profile` through an agent keeps working: the client sends the name of the agent
    device whose settings equal its own; a device matching none is unavailable, not injected."""
    artifact = Artifact("onnx", served["model"], (1, 3, 8, 8))
    plain = remote(served, "pi").backend_impl()
    assert plain.available() is None
    assert plain.measure(artifact, **FAST).n == 2 and plain._target_name == "cpu-ort"

    owner = remote(served, "pi-owner", options={"session_config": {
        "session.intra_op.allow_spinning": "0"}}).backend_impl()
    assert owner.available() is None
    assert owner.measure(artifact, **FAST).n == 2 and owner._target_name == "cpu-ort-owner"

    target = served["root"] / "overwritten.txt"
    evil = remote(served, "pi-evil", options={"session_config": {
        "session.collect_node_memory_stats_to_file": str(target)}}).backend_impl()
    assert "has no device with this device's settings" in evil.available()
    with pytest.raises(AgentError, match="the agent runs only its own devices"):
        evil.measure(artifact, **FAST)
    assert not target.exists()


# -- item 4: Content-Length -------------------------------------------------------------------
def raw_post(served, headers: str) -> str:
    """Headers only, the connection left open: the agent must answer without reading a body
    (the socket timeout only guards the test against a hang)."""
    token = served["token_file"].read_text().strip()
    with socket.create_connection(("127.0.0.1", served["port"]), timeout=15) as sock:
        sock.sendall(f"POST /measure HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {token}\r\n"
                     f"Content-Type: application/x-hwnas-frames\r\n{headers}\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.decode()


@pytest.mark.parametrize("length", ["-1", "-100000000", "+5", "1_000", "abc", " ", "0x10"])
def test_bad_content_length_is_refused_without_reading_the_body(served, length):
    answer = raw_post(served, f"Content-Length: {length}\r\n")
    assert answer.startswith("HTTP/1.0 400") and "Content-Length" in answer


def test_missing_or_repeated_content_length_is_refused(served):
    assert raw_post(served, "Transfer-Encoding: chunked\r\n").startswith("HTTP/1.0 411")
    answer = raw_post(served, "Content-Length: 10\r\nContent-Length: 99999\r\n")
    assert answer.startswith("HTTP/1.0 400") and "several Content-Length" in answer
