"""The CLI as a user runs it: real processes, real exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hwnas.space import FLAT_COLUMNS, Arch, SearchSpace, read_arch_table


def hwnas(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "hwnas", *args], capture_output=True, text=True,
                          timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_version():
    assert hwnas("--version", check=True).stdout.startswith("hwnas ")


def test_space_info_json():
    info = json.loads(hwnas("space", "info", "--format", "json", check=True).stdout)
    assert int(info["size_per_resolution"]) == 7371**5
    assert Arch.from_ofa_dict(info["max_arch"]) == SearchSpace().max_arch()


def test_sample_1000_csv_round_trips_through_flat_and_ofa_formats(tmp_path):
    out = tmp_path / "s.csv"
    hwnas("space", "sample", "--samples", "1000", "--format", "csv", "--seed", "5", "--out", str(out), check=True)
    lines = out.read_text().splitlines()
    assert lines[0].split(",") == list(FLAT_COLUMNS) and len(lines) == 1001
    archs, _ = read_arch_table(out, SearchSpace())
    for line, arch in zip(lines[1:], archs):
        row = tuple(int(v) for v in line.split(","))
        assert arch.to_row() == row
        assert Arch.from_ofa_dict(json.loads(json.dumps(arch.to_ofa_dict()))).to_row() == row
    assert len({a.id for a in archs}) == 1000


def test_sample_json_matches_csv_for_the_same_seed():
    js = json.loads(hwnas("space", "sample", "-n", "20", "--seed", "2", check=True).stdout)
    csv = hwnas("space", "sample", "-n", "20", "--seed", "2", "--format", "csv", check=True).stdout
    rows = [tuple(int(v) for v in line.split(",")) for line in csv.splitlines()[1:]]
    assert [Arch.from_ofa_dict(d).to_row() for d in js] == rows


def test_custom_space_file(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text("r: '32:64:4'\nks: [3, 5]\n")
    js = json.loads(hwnas("space", "sample", "-n", "50", "--seed", "0", "--space", str(f), check=True).stdout)
    space = SearchSpace(ks_choices=(3, 5), r_choices=tuple(range(32, 65, 4)))
    assert all(Arch.from_ofa_dict(d) in space for d in js)


@pytest.mark.parametrize("args, message", [
    (["space", "sample", "--samples", "0"], "--samples must be at least 1"),
    (["space", "sample", "-n", "0"], "--samples must be at least 1"),  # the old name, hidden
    (["space", "sample", "--format", "xml"], "--format"),
    (["space", "sample", "-n", "many"], "-n"),
    (["space", "info", "--space", "/no/such.yaml"], "does not exist"),
    (["no-such-command"], "No such command"),
])
def test_bad_input_gives_one_line_and_exit_2(args, message):
    proc = hwnas(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]
    assert "Traceback" not in proc.stderr


def test_bad_yaml_space(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text("ks: [4]\n")
    proc = hwnas("space", "info", "--space", str(f))
    assert proc.returncode == 2 and "odd" in proc.stderr
    f.write_text("colour: blue\n")
    proc = hwnas("space", "info", "--space", str(f))
    assert proc.returncode == 2 and "unknown search-space keys" in proc.stderr


def test_debug_shows_traceback():
    proc = hwnas("--debug", "space", "info", "--space", "/no/such.yaml")
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_devices_list_and_show():
    rows = json.loads(hwnas("devices", "list", "--format", "json", check=True).stdout)
    by_name = {r["name"]: r for r in rows}
    assert by_name["cpu-ort"]["available"] is None
    assert "CUDA" in by_name["cuda-torch"]["available"]
    shown = json.loads(hwnas("devices", "show", "cpu-ort", check=True).stdout)
    assert shown["available"] and "onnxruntime" in shown["versions"]
    proc = hwnas("devices", "show", "no-such-device")
    assert proc.returncode == 2 and "unknown device 'no-such-device'" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["export", "--run", "nowhere", "--device", "cpu-ort"], "exactly one of --subnet ID or --pareto"),
    (["agent", "health", "cpu-ort"], "is local, not served by an agent"),
    (["dashboard", "--run", "/no/such/run"], "does not exist"),
    # flags, not the Python settings behind them
    (["export", "--run", "nowhere", "--device", "cpu-ort", "--subnet", "abcd", "--verify-images", "0"],
     "--verify-images must be at least 1, got 0"),
    (["export", "--run", "nowhere", "--device", "cpu-ort", "--subnet", "abcd", "--calib-batches", "0"],
     "--calib-batches must be at least 1, got 0"),
    (["latency", "eval", "--table", "t.csv", "--target", "ms", "--test-fraction", "1.5"],
     "--test-fraction must be in (0, 1), got 1.5"),
    (["latency", "eval", "--table", "t.csv", "--target", "ms", "--repeats", "0"], "--repeats must be at least 1"),
])
def test_more_bad_inputs(args, message):
    proc = hwnas(*args)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["profile", "--device", "no-such-device"], "unknown device 'no-such-device'"),
    (["profile", "--device", "cpu-ort", "--rounds", "0"], "--rounds must be at least 1, got 0"),
    (["profile", "--device", "cpu-ort", "--samples", "auto", "--time-budget", "-5"],
     "--time-budget is in minutes and must be positive, got -5.0"),
    (["quickstart", "--top-k", "0"], "--top-k must be at least 1, got 0"),
])
def test_bad_input_is_refused_before_the_run_folder_is_made(tmp_path, args, message):
    """Refused before minutes of profiling, and leaving no half-made run behind."""
    run = tmp_path / "run"
    proc = hwnas(*args, "--run", str(run))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not run.exists()


def test_agent_port_out_of_range(tmp_path):
    from hwnas.devices.agent import create_token_file

    token = tmp_path / "token"
    create_token_file(token)
    proc = hwnas("agent", "serve", "--port", "70000", "--token-file", str(token))
    assert proc.returncode == 2 and "--port must be within 0..65535 (0: any free port), got 70000" in proc.stderr


def test_an_error_quoting_colons_prints_them_as_given():
    """Rich's emoji codes are off: ':ab:' in a user's value stays ':ab:'."""
    proc = hwnas("devices", "show", "sha256:AB:CD")
    assert proc.returncode == 2 and "sha256:AB:CD" in proc.stderr


@pytest.mark.network_attempt  # the address is looked up as a host name (refused here)
def test_dashboard_refuses_an_address_or_port_it_cannot_serve_on(tmp_path):
    import socket

    from hwnas.run import open_run

    open_run(tmp_path / "run")
    proc = hwnas("dashboard", "--run", str(tmp_path / "run"), "--address", "999.1.1.1")
    assert proc.returncode == 2 and "--address '999.1.1.1' is not an address" in proc.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = hwnas("dashboard", "--run", str(tmp_path / "run"), "--port", str(port))
    assert proc.returncode == 2 and f"--port {port} is already in use" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_latency_fit_on_a_handful_of_rows_warns(tmp_path):
    from pathlib import Path

    lines = (Path(__file__).parent / "latency" / "data" / "ofa_cpu_subnets.csv").read_text().splitlines()
    for n, warned in ((3, True), (10, False)):
        table = tmp_path / f"{n}.csv"
        table.write_text("\n".join(lines[:n + 1]) + "\n")
        proc = hwnas("latency", "fit", "--table", str(table), "--target", "ort_ms", "--out",
                     str(tmp_path / f"{n}.json"), check=True)
        assert (f"warning: {n} rows are too few" in proc.stderr) is warned, proc.stderr
        assert (tmp_path / f"{n}.json").exists()
