"""`hwnas profile`: stratified subnet choice, the measurement store, resume, bad inputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from hwnas.profiling.protocol import ProtocolSettings
from hwnas.profiling.stage import profile, select_subnets
from hwnas.profiling.store import read_measurements
from hwnas.run import open_run
from hwnas.space import SearchSpace
from hwnas.supernet.stats import stats_frame

FAST = ["--rounds", "1", "--runs", "3"]
#: the protocol at its cheapest: one short warm-up (the default's 0.2 s minimum warm-up per model was
#: 90 of the block profile's 93 s: ~500 lookup-table entries)
QUICK = ProtocolSettings(rounds=1, runs=3, warmup_runs=1, warmup_s=0.0, ref_runs=2)
ENV = {**os.environ, "HWNAS_NO_PROGRESS": "1"}


def hwnas(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hwnas", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def test_selection_covers_the_macs_range():
    space = SearchSpace()
    archs = select_subnets(space, 40, seed=1)
    assert len(set(archs)) == 40 and all(a in space for a in archs)
    assert space.min_arch() in archs and space.max_arch() in archs
    macs = np.sort(stats_frame(archs)["macs"].to_numpy())
    uniform = np.sort(stats_frame(space.sample(40, 1))["macs"].to_numpy())
    # evenly spread: no big hole, and the extremes a uniform sample misses are covered
    assert np.diff(macs).max() < 0.1 * (macs[-1] - macs[0])
    assert macs[0] < uniform[0] and macs[-1] > uniform[-1]


def test_profile_stores_and_resumes(tmp_path, tiny_supernet):
    run = open_run(tmp_path / "run", tiny_supernet)
    calls = []
    res = profile(run, ["cpu-ort"], 3, protocol=QUICK,
                  progress=lambda *a: calls.append(a))
    assert res[0]["measured"] == 3
    df = read_measurements(run.run_dir, device="cpu-ort", kind="subnet")
    assert len(df) == 3 and df["key"].is_unique
    assert (df["corrected_ms"] > 0).all() and (df["min_ms"] <= df["median_ms"]).all()
    assert (df["threads"] == 1).all() and set(df["r"]) <= {32, 36, 40}
    assert (df["macs"] > 0).all() and calls[-1][1:3] == (3, 3)
    again = profile(run, ["cpu-ort"], 3, protocol=QUICK)
    assert again[0]["measured"] == 0 and again[0]["skipped"] == 3
    every = read_measurements(run.run_dir)
    assert len(every) == 4 and list(every["kind"]).count("reference") == 1  # 3 subnets + the anchor


@pytest.mark.slow
def test_a_killed_profile_loses_at_most_the_subnet_in_flight(tmp_path, tiny_supernet):
    run = tmp_path / "run"
    args = [sys.executable, "-m", "hwnas", "profile", "--device", "cpu-ort", "--run", str(run),
            "--samples", "8", "--supernet", str(tiny_supernet), *FAST]
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if (run / "measurements.parquet").exists() and len(read_measurements(run, kind="subnet")) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_measurements(run)
    assert 2 <= len(before[before["kind"] == "subnet"]) < 8
    done = hwnas("profile", "--device", "cpu-ort", "--run", str(run), "--samples", "8", *FAST)
    assert done.returncode == 0, done.stderr
    after = read_measurements(run)
    assert len(after) == 9 and after["key"].is_unique and (after["kind"] == "subnet").sum() == 8
    # what was measured before the kill is kept as it was
    pd.testing.assert_frame_equal(after.iloc[: len(before)], before)


@pytest.mark.parametrize("args, message", [
    (["--device", "no-such-device"], "unknown device 'no-such-device'"),
    (["--device", "cuda-torch"], "not usable here"),
    (["--device", "cpu-ort", "--samples", "0"], "--samples must be at least 1"),
    (["--device", "cpu-ort", "--reference", "resnet50"], "timm:MODEL_NAME"),
])
def test_bad_profile_input_gives_one_line(tmp_path, tiny_supernet, args, message):
    proc = hwnas("profile", "--run", str(tmp_path / "run"), "--supernet", str(tiny_supernet), *args, *FAST)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_corrupt_store_is_reported_and_kept(tmp_path, tiny_supernet):
    run = tmp_path / "run"
    open_run(run, tiny_supernet)
    (run / "measurements.parquet").write_bytes(b"not parquet")
    proc = hwnas("profile", "--device", "cpu-ort", "--run", str(run), "--samples", "2", *FAST)
    assert proc.returncode == 2 and "measurement store" in proc.stderr
    assert (run / "measurements.parquet").read_bytes() == b"not parquet"


def test_a_run_keeps_its_supernet(tmp_path, tiny_supernet):
    open_run(tmp_path / "run", tiny_supernet)
    proc = hwnas("profile", "--device", "cpu-ort", "--run", str(tmp_path / "run"), "--samples", "1",
                 "--supernet", str(tmp_path / "other"), *FAST)
    assert proc.returncode == 2 and "was made with supernet" in proc.stderr


@pytest.mark.slow
def test_profile_through_a_remote_agent(tmp_path, tiny_supernet):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = tmp_path / "token"
    assert hwnas("agent", "token", str(token)).returncode == 0
    agent = subprocess.Popen([sys.executable, "-m", "hwnas", "agent", "serve", "--port", str(port),
                              "--token-file", str(token), "--state-dir", str(tmp_path / "state")],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        devices = tmp_path / "devices.yaml"
        devices.write_text(f"devices:\n  - name: pi\n    backend: onnxruntime\n    host: 127.0.0.1\n"
                           f"    port: {port}\n    token_file: {token}\n")
        deadline = time.time() + 60
        while hwnas("agent", "health", "pi", "--devices", str(devices)).returncode != 0:
            assert time.time() < deadline and agent.poll() is None, "agent did not come up"
            time.sleep(0.5)
        proc = hwnas("profile", "--device", "pi", "--devices", str(devices), "--run", str(tmp_path / "run"),
                     "--samples", "2", "--supernet", str(tiny_supernet), *FAST)
        assert proc.returncode == 0, proc.stderr
        df = read_measurements(tmp_path / "run", device="pi", kind="subnet")
        assert len(df) == 2 and (df["corrected_ms"] > 0).all() and (df["backend"] == "onnxruntime").all()
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    # the agent is gone: one clear line, nothing lost
    proc = hwnas("profile", "--device", "pi", "--devices", str(devices), "--run", str(tmp_path / "run"),
                 "--samples", "3", *FAST)
    assert proc.returncode == 2 and "unreachable" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert len(read_measurements(tmp_path / "run", device="pi", kind="subnet")) == 2


@pytest.mark.slow
def test_block_profile_feeds_a_lookup_table(tmp_path, tiny_supernet):
    from hwnas.latency.api import fit_from_run

    run = open_run(tmp_path / "run", tiny_supernet)
    profile(run, ["cpu-ort"], 6, protocol=QUICK, blocks=True)
    blocks = read_measurements(run.run_dir, device="cpu-ort", kind="block")
    # 3 resolutions x (5 stages x 2 positions x 9 kernel/expand + stem + head), minus shared shapes
    assert len(blocks) > 200 and blocks["key"].is_unique and (blocks["corrected_ms"] > 0).all()
    assert set(blocks["key"].str.split("/").str[0]) == {"block:stem", "block:block", "block:head"}
    pred, report = fit_from_run(run.run_dir, "cpu-ort", n_classes=10)
    assert pred.meta.notes.block_entries == len(blocks)
    assert any(c["name"].startswith("lut(mode=entries)") for c in report["candidates"])
    again = profile(run, ["cpu-ort"], 6, protocol=QUICK, blocks=True)
    assert again[0]["measured"] == 0


def test_runs_share_the_hosts_anchor_and_keep_their_own(tmp_path, tiny_supernet, monkeypatch):
    """Corrected latency = ratio x anchor, one anchor per device and run; a new run on this host
    takes the host's anchor, --recalibrate measures a fresh one, and a resumed run keeps its own."""
    from hwnas.profiling.anchors import AnchorBook, run_anchor

    monkeypatch.setenv("HWNAS_STATE_DIR", str(tmp_path / "state"))
    fast = ProtocolSettings(rounds=2, runs=3, warmup_runs=1, warmup_s=0.0)
    book = AnchorBook()
    assert book._read() == {}
    a = open_run(tmp_path / "a", tiny_supernet)
    profile(a, ["cpu-ort"], 2, protocol=fast)
    anchor = run_anchor(a.run_dir, "cpu-ort", a.space)
    rows = read_measurements(a.run_dir, device="cpu-ort", kind="subnet")
    assert anchor > 0 and (rows["ref_median_ms"] == anchor).all()
    ratio = rows["corrected_ms"] / anchor
    assert ((ratio > 0.2) & (ratio < 50)).all()  # bigger or smaller than the reference, not garbage
    ref_row = read_measurements(a.run_dir, kind="reference").iloc[0]
    assert ref_row["median_ms"] == anchor and ref_row["d_0"] == 2  # the reference is the min subnet

    b = open_run(tmp_path / "b", tiny_supernet)
    profile(b, ["cpu-ort"], 1, protocol=fast)
    assert run_anchor(b.run_dir, "cpu-ort", b.space) == anchor  # same host, device, runtime
    assert len(book._read()) == 1

    c = open_run(tmp_path / "c", tiny_supernet)
    profile(c, ["cpu-ort"], 1, protocol=fast, recalibrate=True)
    fresh = run_anchor(c.run_dir, "cpu-ort", c.space)
    assert fresh != anchor and [e["anchor_ms"] for e in book._read().values()] == [fresh]

    profile(a, ["cpu-ort"], 3, protocol=fast)  # resume run a after the host recalibrated
    rows = read_measurements(a.run_dir, device="cpu-ort", kind="subnet")
    assert len(rows) == 3 and (rows["ref_median_ms"] == anchor).all()

    import json

    shown = subprocess.run([sys.executable, "-m", "hwnas", "devices", "show", "cpu-ort"], capture_output=True,
                           text=True, timeout=120, env={**ENV, "HWNAS_STATE_DIR": str(tmp_path / "state")})
    entries = json.loads(shown.stdout)["anchors"]["entries"]
    assert [e["anchor_ms"] for e in entries] == [fresh] and entries[0]["calibrated_at"]
    assert entries[0]["threads"] == 1 and entries[0]["n_classes"] == 10


def test_a_damaged_anchor_book_is_one_line_and_kept(tmp_path, tiny_supernet):
    state = tmp_path / "state"
    state.mkdir()
    (state / "anchors.json").write_text("{not json")
    env = {**ENV, "HWNAS_STATE_DIR": str(state)}
    proc = subprocess.run([sys.executable, "-m", "hwnas", "profile", "--device", "cpu-ort", "--run",
                           str(tmp_path / "run"), "--samples", "1", "--supernet", str(tiny_supernet), *FAST],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "anchor book" in lines[0] and "delete it" in lines[0]
    assert (state / "anchors.json").read_text() == "{not json"


def test_an_unwritable_anchor_book_is_one_line(tmp_path, tiny_supernet):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the state folder should be")
    env = {**ENV, "HWNAS_STATE_DIR": str(blocker / "state")}
    proc = subprocess.run([sys.executable, "-m", "hwnas", "profile", "--device", "cpu-ort", "--run",
                           str(tmp_path / "run"), "--samples", "1", "--supernet", str(tiny_supernet), *FAST],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write the anchor book" in lines[0] and "HWNAS_STATE_DIR" in lines[0]


def test_a_resnet50_run_profiles_fits_and_predicts_from_the_cli(tmp_path):
    """Issue 16: profile and latency fit/predict on another family's run (its own columns)."""
    import torch

    from hwnas.families import get_family
    from hwnas.supernet.checkpoint import save_checkpoint

    fam = get_family("ofa-resnet50")
    space = fam.space_from_dict({"r": [32, 36, 40]})
    torch.manual_seed(0)
    stem = tmp_path / "supernet"
    save_checkpoint(stem, fam.supernet_for(space, 10), {"family": fam.name, "space": space.to_dict(),
                    "n_classes": 10, "dataset": "mnist-embedded",
                    "class_names": [str(i) for i in range(10)]}, rng=False)
    run = tmp_path / "run"
    got = hwnas("profile", "--run", str(run), "--supernet", str(stem), "--device", "cpu-ort",
                "--samples", "5", *FAST)
    assert got.returncode == 0, got.stderr
    df = read_measurements(run, device="cpu-ort", kind="subnet")
    assert len(df) == 5 and "w_5" in df.columns and "ks_0" not in df.columns
    got = hwnas("latency", "fit", "--run", str(run), "--device", "cpu-ort")
    assert got.returncode == 0, got.stderr
    table, out = tmp_path / "subnets.csv", tmp_path / "predicted.csv"
    df.to_csv(table, index=False)
    got = hwnas("latency", "predict", "--predictor", str(run / "predictors" / "latency-cpu-ort.json"),
                "--table", str(table), "--out", str(out))
    assert got.returncode == 0, got.stderr
    assert (pd.read_csv(out)["predicted_ms"] > 0).all()
