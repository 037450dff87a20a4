"""Reliability round 3: bundles and devices files from someone else, relative state dirs, and the
own-data paths (image folders, idx files)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hwnas.devices import get_device
from hwnas.export import BundleError, load
from hwnas.export.manifest import FORMAT, VERSION, write_manifest


def _hostile_bundle(root: Path, tiny_onnx, target: Path, **device_changes) -> Path:
    """A cpu-ort bundle whose model.json asks ONNX Runtime to write its memory statistics over
    `target`, re-signed (model.json and SHA256SUMS recomputed) as whoever edits a bundle can."""
    root.mkdir(parents=True)
    tiny_onnx(root / "model.onnx")
    device = get_device("cpu-ort").model_dump(mode="json")
    device["options"] = {"session_config": {"session.collect_node_memory_stats_to_file": str(target)}}
    device.update(device_changes)
    write_manifest(root, {
        "format": FORMAT, "version": VERSION, "id": "abc", "status": "verified",
        "classes": [str(i) for i in range(4)],
        "preprocess": {"size": 8, "mean": [0.0] * 3, "std": [1.0] * 3},
        "onnx": {"file": "model.onnx", "input_shape": [1, 3, 8, 8], "input_dtype": "float32"},
        "device": device,
        "artifact": {"format": "onnx", "path": "model.onnx", "input_shape": [1, 3, 8, 8],
                     "device": "cpu-ort", "backend": "onnxruntime", "files": ["model.onnx"]}})
    return root


def test_a_re_signed_bundle_cannot_make_load_write_a_file(tmp_path, tiny_onnx):
    target = tmp_path / "home" / ".bashrc"
    target.parent.mkdir()
    target.write_text("export PATH=$PATH:~/bin\n")
    with load(_hostile_bundle(tmp_path / "b", tiny_onnx, target)) as bundle:
        assert bundle.runtime.startswith("cpu-ort")
        assert not bundle.runner.device.options  # this machine's cpu-ort, not the bundle's
        bundle.logits(np.zeros((8, 8), np.uint8))
    assert target.read_text() == "export PATH=$PATH:~/bin\n"


def test_a_bundle_never_makes_load_contact_a_host(tmp_path, tiny_onnx):
    """A bundle naming an unknown device with a host runs locally on a fixed configuration."""
    root = _hostile_bundle(tmp_path / "b", tiny_onnx, tmp_path / "x.csv", name="their-phone",
                           host="192.0.2.1", port=8123)
    with load(root) as bundle:
        device = bundle.runner.device
        assert (device.host, device.options, device.name) == (None, {}, "their-phone")
        bundle.logits(np.zeros((8, 8), np.uint8))
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("where", ["/etc/hostname", "../outside.onnx", "unlisted.onnx"])
def test_an_artifact_path_outside_the_listed_files_is_refused(tmp_path, tiny_onnx, where):
    root = _hostile_bundle(tmp_path / "b", tiny_onnx, tmp_path / "x.csv")
    tiny_onnx(tmp_path / "outside.onnx")
    meta = json.loads((root / "model.json").read_text())
    meta["artifact"]["path"] = where
    meta.pop("files")
    if where == "unlisted.onnx":
        tiny_onnx(root / "unlisted.onnx")
        meta["files"] = {}
    write_manifest(root, meta) if where != "unlisted.onnx" else _write_without(root, meta, "unlisted.onnx")
    with pytest.raises(BundleError) as err:
        load(root, runtime="device")
    assert "\n" not in str(err.value)


def _write_without(root: Path, meta: dict, name: str) -> None:
    """write_manifest, then drop `name` from the listed files (re-signing both lists)."""
    from hwnas.export.manifest import SUMS, sha256_file

    (root / name).rename(root.parent / name)
    write_manifest(root, meta)
    (root.parent / name).rename(root / name)
    sums = (root / SUMS).read_text()
    assert name not in sums and sha256_file(root / "model.json")


def test_an_onnx_model_with_session_options_is_refused(tmp_path, tiny_onnx):
    root = _hostile_bundle(tmp_path / "b", tiny_onnx, tmp_path / "x.csv")
    tiny_onnx(root / "model.onnx", metadata={"ort_config": json.dumps(
        {"session_options": {"optimized_model_filepath": str(tmp_path / "w.onnx")}})})
    meta = json.loads((root / "model.json").read_text())
    meta.pop("files")
    write_manifest(root, meta)
    for runtime in ("device", "onnx"):
        with pytest.raises(BundleError, match="ort_config"):
            load(root, runtime=runtime)


def test_a_fingerprint_tells_a_re_signed_bundle_from_the_exported_one(tmp_path, tiny_onnx):
    from hwnas.export.bundle import bundle_fingerprint

    root = _hostile_bundle(tmp_path / "b", tiny_onnx, tmp_path / "x.csv")
    exported = bundle_fingerprint(root)
    with load(root, fingerprint=exported) as bundle:
        assert bundle.fingerprint == exported
    tiny_onnx(root / "model.onnx", metadata={"swapped": "yes"})  # another valid model, re-signed
    meta = json.loads((root / "model.json").read_text())
    meta.pop("files")
    write_manifest(root, meta)
    load(root).close()  # SHA256SUMS alone cannot tell
    with pytest.raises(BundleError, match="fingerprint"):
        load(root, fingerprint=exported)


# -- item 2: a shared devices file must not send a secret as a token ---------------------------
def _listener():
    """A loopback server that records whatever reaches it."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    received.append(conn.recv(65536))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, received, stop, thread


@pytest.mark.parametrize("check", [False, True])
def test_a_devices_file_naming_another_secret_sends_nothing(tmp_path, check):
    import os
    import subprocess
    import sys

    secret = tmp_path / ".git-credentials"
    secret.write_text("https://alice:ghp_0123456789abcdefghijklmnopqrstuvwxyzAB@example.org\n")
    os.chmod(secret, 0o600)
    server, received, stop, thread = _listener()
    devices = tmp_path / "evil.yaml"
    devices.write_text(f"devices:\n  - name: phone\n    backend: onnxruntime\n    host: 127.0.0.1\n"
                       f"    port: {server.getsockname()[1]}\n    token_file: {secret}\n")
    try:
        proc = subprocess.run([sys.executable, "-m", "hwnas", "devices", "list", "--devices", str(devices),
                               "--format", "json", *(["--check"] if check else [])],
                              capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert not any(b"ghp_" in data for data in received) and "ghp_" not in proc.stdout + proc.stderr
    row = {r["name"]: r for r in json.loads(proc.stdout)}["phone"]
    if check:
        assert "does not hold an hwnas agent token" in row["available"]
    else:
        assert row["available"].startswith("not checked") and not received


def test_a_token_file_others_can_read_is_refused(tmp_path):
    import os

    from hwnas.devices.agent import create_token_file, read_token
    from hwnas.errors import AgentError

    path = tmp_path / "t"
    token = create_token_file(path)
    assert token.startswith("hwnas-agent-token-v1:") and read_token(path) == token
    os.chmod(path, 0o644)
    with pytest.raises(AgentError, match="can be read by other users"):
        read_token(path)


# -- item 3: a relative agent state dir ---------------------------------------------------------
@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_agent_with_a_relative_state_dir_measures(tmp_path, token_file, tiny_onnx, how):
    import hashlib
    import os
    import re
    import select
    import subprocess
    import sys
    import time

    from hwnas.devices.agent import AgentClient, AgentSettings
    from hwnas.devices.agent.wire import encode_frames

    cmd = [sys.executable, "-m", "hwnas.devices.agent", "--host", "127.0.0.1", "--port", "0",
           "--token-file", str(token_file)]
    env = dict(os.environ)
    if how == "flag":
        cmd += ["--state-dir", "st"]
    else:
        env["HWNAS_STATE_DIR"] = "st"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                            env=env)
    try:
        banner, deadline = "", time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and "listening on" not in banner:
            if select.select([proc.stdout], [], [], 0.2)[0]:
                banner += proc.stdout.readline()
        port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", banner).group(1))
        blob = tiny_onnx(tmp_path / "tiny.onnx").read_bytes()
        head = {"request_id": os.urandom(8).hex(), "agent_device": "cpu-ort",
                "models": {"m": hashlib.sha256(blob).hexdigest()},
                "protocol": {"runs": 2, "warmup_runs": 0, "warmup_s": 0.0}}
        answer = AgentClient("127.0.0.1", port, token_file, AgentSettings(retries=0, busy_wait_s=0)).request(
            "POST", "/measure", encode_frames(head, [blob]))
        assert answer["results"]["m"]["n"] == 2
        assert (tmp_path / "st" / ("work" if how == "flag" else "agent/work")).is_dir()
    finally:
        proc.kill()
        proc.wait(timeout=20)
