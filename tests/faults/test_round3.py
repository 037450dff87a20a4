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
        "accuracy": {"split": "test", "top1": 90.0, "n": 8},
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
def _start_agent(token_file: Path, cwd: Path, *args: str, env: dict | None = None):
    """(process, port) of `python -m hwnas.devices.agent` on loopback, run in `cwd`."""
    import re
    import select
    import subprocess
    import sys
    import time

    cmd = [sys.executable, "-m", "hwnas.devices.agent", "--host", "127.0.0.1", "--port", "0",
           "--token-file", str(token_file), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env)
    banner, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and "listening on" not in banner:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            banner += proc.stdout.readline()
    match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", banner)
    if match is None:
        proc.kill()
        raise AssertionError(f"agent did not start: {banner}")
    return proc, int(match.group(1))


@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_agent_with_a_relative_state_dir_measures(tmp_path, token_file, tiny_onnx, how):
    import hashlib
    import os

    from hwnas.devices.agent import AgentClient, AgentSettings
    from hwnas.devices.agent.wire import encode_frames

    env = dict(os.environ)
    if how == "env":
        env["HWNAS_STATE_DIR"] = "st"
    proc, port = _start_agent(token_file, tmp_path, *(["--state-dir", "st"] if how == "flag" else []), env=env)
    try:
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


# -- item 11: small things -----------------------------------------------------------------------
def test_the_agents_own_http_refusals_are_json(tmp_path, token_file):
    """A header line over http.server's 64 KiB limit: 431, answered in JSON like every refusal."""
    import socket

    proc, port = _start_agent(token_file, tmp_path, "--state-dir", str(tmp_path / "st"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
    finally:
        proc.kill()
        proc.wait(timeout=20)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 431") and b"application/json" in head, head
    assert json.loads(body)["error"] == "request_header_fields_too_large"


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    import errno
    import os

    from hwnas.fileio import atomic_write_bytes

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as err:
        atomic_write_bytes(tmp_path / "measurements.parquet", b"x")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "measurements.parquet")
    assert list(tmp_path.iterdir()) == []


# -- items 4, 5, 7, 9: image folders from someone else -------------------------------------------
def _images(folder: Path, classes=("cat", "dog"), n: int = 6, size: int = 20) -> Path:
    from PIL import Image

    for c, name in enumerate(classes):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            pixels = np.random.default_rng(10 * c + i).integers(0, 255, (size, size, 3)).astype(np.uint8)
            Image.fromarray(pixels).save(folder / name / f"{i}.png")
    return folder


def _loaders(root: Path, **cfg):
    from hwnas.supernet.data import DataConfig, build_loaders

    cfg = {"val_fraction": 0.34, "test_fraction": 0.34, **cfg}
    return build_loaders(DataConfig(name="imagefolder", root=root, image_size=16, batch_size=2, **cfg))


def _refused(root: Path, **cfg) -> str:
    from hwnas.errors import InputError

    with pytest.raises(InputError) as err:
        _loaders(root, **cfg)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_directory_symlink_loop_is_refused(tmp_path):
    import os

    root = _images(tmp_path / "loop")
    os.symlink("..", root / "cat" / "loop")
    assert "cat/loop is a symlink to a folder above it" in _refused(root)
    (root / "cat" / "loop").unlink()
    os.symlink(root / "dog", root / "dog" / "self")
    assert "dog/self" in _refused(root) and "loop" in _refused(root)


def test_the_same_file_under_two_classes_is_refused_and_links_count_once(tmp_path):
    import os

    root = _images(tmp_path / "dup")
    os.symlink(root / "dog" / "0.png", root / "dog" / "again.png")  # one image, one label: once
    loaders = _loaders(root)
    assert sum(len(s.dataset) for s in (loaders.train, loaders.val, loaders.test)) == 12
    os.symlink(root / "dog" / "1.png", root / "cat" / "stolen.png")
    assert "dog/1.png is the same file as one in cat/" in _refused(root)


def test_hidden_folders_are_not_classes(tmp_path):
    root = _images(tmp_path / "hidden")
    _images(root / ".ipynb_checkpoints", classes=("x",), n=6)
    with pytest.warns(UserWarning, match="skipped hidden folders .ipynb_checkpoints"):
        loaders = _loaders(root)
    assert loaders.class_names == ["cat", "dog"]


def _png_claiming(path: Path, width: int, height: int) -> None:
    """A small PNG whose header says width x height (the CRC fixed): a decompression bomb's header."""
    import struct
    import zlib

    from PIL import Image

    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(path)
    data = bytearray(path.read_bytes())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncated-png", "truncated-jpeg", "bomb-20000", "bomb-9500"])
def test_a_damaged_image_is_one_line_naming_it_before_training(tmp_path, damage):
    import subprocess
    import sys

    from PIL import Image

    root = _images(tmp_path / "imgs")
    if damage == "truncated-png":
        bad = root / "cat" / "bad.png"
        bad.write_bytes((root / "cat" / "0.png").read_bytes()[:120])
    elif damage == "truncated-jpeg":
        bad = root / "cat" / "x.jpg"
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3)).astype(np.uint8)).save(bad)
        bad.write_bytes(bad.read_bytes()[:400])
    else:
        bad = root / "dog" / "big.png"
        side = int(damage.split("-")[1])
        _png_claiming(bad, side, side)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "hwnas", "train", "--data", f"imagefolder:{root}", "--out", str(out),
                           "--set", "max_steps_per_epoch=1", "--set", "data.batch_size=2",
                           "--set", "data.image_size=20"], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert bad.relative_to(root).as_posix() in lines[0] and "data.bad_images=skip" in lines[0]
    with pytest.warns(UserWarning, match="skipped 1 image"):
        loaders = _loaders(root, bad_images="skip")
    assert sum(len(s.dataset) for s in (loaders.train, loaders.val, loaders.test)) == 12


def test_classes_too_small_for_a_validation_split_are_refused_before_training(tmp_path):
    """3 images a class at 10 %: no validation image. `hwnas train` says so before its first epoch
    (it trained a whole one before); evaluating the test split alone still works."""
    import subprocess
    import sys

    root = _images(tmp_path / "small", classes=("a", "b", "c"), n=3)
    proc = subprocess.run([sys.executable, "-m", "hwnas", "train", "--data", f"imagefolder:{root}", "--out",
                           str(tmp_path / "out"), "--set", "data.batch_size=2", "--set", "data.image_size=20",
                           "--set", "max_steps_per_epoch=1"], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "no images left for the validation split" in lines[0] and "has 3 image(s)" in lines[0]
    assert not list((tmp_path / "out").glob("*.safetensors"))  # no epoch was trained
    loaders = _loaders(root, val_fraction=0.1, test_fraction=0.4)
    assert len(loaders.test.dataset) and "val" in loaders.empty


# -- item 10: a gzip bomb as an idx file ---------------------------------------------------------
def test_a_gzip_bomb_idx_file_is_refused_without_decompressing_it(tmp_path):
    """A labels file announcing 60,000 labels followed by 400 MB of zeros (~0.4 MB gzipped): refused
    after reading what the header announces, not after decompressing everything."""
    import gzip
    import subprocess
    import sys

    bomb = tmp_path / "train-labels-idx1-ubyte.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as f:
        f.write((0x00000801).to_bytes(4, "big") + (60_000).to_bytes(4, "big"))
        chunk = bytes(1 << 20)
        for _ in range(400):
            f.write(chunk)
    code = ("import resource, sys; from hwnas.supernet.fashion_mnist import read_idx; from hwnas.errors import InputError\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n    read_idx(sys.argv[1], 1)\nexcept InputError as e:\n    print(e)\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)")
    proc = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True, timeout=120)
    message, grew_mb = proc.stdout.strip().splitlines()
    assert "is truncated or padded: more than 60008 bytes" in message and int(grew_mb) < 50, proc.stdout


# -- item 6: strings from run files in the dashboard's Markdown ---------------------------------
def test_run_file_strings_cannot_break_out_of_the_dashboards_markdown(tmp_path):
    import re

    from hwnas.dashboard import data
    from hwnas.dashboard.views.common import md, md_code
    from hwnas.run import RunFiles

    hostile = "0123456789ab` ![x](http://192.0.2.1/p.png) [click](http://192.0.2.1) `"
    (tmp_path / "search.json").write_text(json.dumps({"best": [{"id": hostile}, {"id": "0123456789ab"}]}))
    search = data.load_search(RunFiles(tmp_path))
    assert [b.id for b in search.best] == ["0123456789ab"]
    code = md_code(hostile)
    assert code.count("`") == 2 and code.startswith("`") and code.endswith("`")
    text = md(hostile + "\n<img src=x> :red[alarm]")
    assert not re.search(r"(?<!\\)[\[\]()<>`:!]", text), text


# -- item 8: two fine-tunings of one subnet; a killed one -----------------------------------------
def test_a_second_finetune_of_one_subnet_is_refused_and_a_killed_one_resumes(tmp_path, tiny_supernet):
    from hwnas.errors import InputError
    from hwnas.fileio import file_lock
    from hwnas.run import open_run
    from hwnas.supernet.finetune import FinetuneSettings, finetune_subnet

    run = open_run(tmp_path / "run", tiny_supernet)
    arch = run.space.min_arch(r=32)
    settings = FinetuneSettings(epochs=2, lr=0.01, batch_size=256, kd_ratio=0.0)
    with file_lock(run.files.root / ".locks" / f"finetune-{arch.id}.lock"):  # another process's run
        with pytest.raises(InputError, match="is being fine-tuned .* by another process"):
            finetune_subnet(run, arch, settings)

    class Killed(Exception):
        pass

    def kill_in_epoch_2(step: int, steps: int, text: str) -> None:
        if text.startswith("epoch 2/"):
            raise Killed
    with pytest.raises(Killed):
        finetune_subnet(run, arch, settings, progress=kill_in_epoch_2)
    assert (run.files.finetuned(arch.id).parent / f".{arch.id}.training").is_dir()
    epochs: set[str] = set()
    record = finetune_subnet(run, arch, settings, progress=lambda s, n, text: epochs.add(text.split()[1]))
    assert epochs == {"2/2"} and record["epochs"] == 2  # continued from the saved epoch
    assert not (run.files.finetuned(arch.id).parent / f".{arch.id}.training").exists()
