"""A pipe is not a terminal (issue 30): into a pipe, even with COLUMNS=80, the CLI prints every name
whole, list commands give --format json|csv for scripts, and progress is plain lines, never bars
whose fields are cut to the width ("0:0…", "100/…")."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from hwnas.progress import EventProgress, OutputConsole, PlainProgress, make_progress

CUT = ("…", "...")  # what a cell or field cut to a width ends with


def piped(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    """`hwnas ARGS | cat` at a terminal width of `columns`: stdout and stderr are pipes."""
    env = {**os.environ, "COLUMNS": str(columns), "OMP_NUM_THREADS": "1"}
    env.pop("FORCE_COLOR", None), env.pop("TTY_COMPATIBLE", None)
    return subprocess.run([sys.executable, "-m", "hwnas", *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.fixture(scope="module")
def device_rows():
    proc = piped("devices", "list", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_devices_list_names_every_device_in_full_at_80_columns(device_rows):
    proc = piped("devices", "list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for row in device_rows:  # each device on one line of its own, with its whole name and status
        mine = [line for line in lines if f" {row['name']} " in line]
        assert len(mine) == 1, row["name"]
        assert row["available"] is None or row["available"] in mine[0]
    assert not any(cut in proc.stdout for cut in CUT)
    assert {"cpu-openvino-int8", "mobile-xnnpack-int8"} <= {r["name"] for r in device_rows}


def test_devices_list_formats_for_scripts(device_rows):
    as_csv = list(csv.DictReader(io.StringIO(piped("devices", "list", "--format", "csv").stdout)))
    assert [r["name"] for r in as_csv] == [r["name"] for r in device_rows]
    assert [r["available"] or None for r in as_csv] == [r["available"] for r in device_rows]
    assert json.loads(piped("devices", "list", "--json").stdout) == device_rows  # the old flag still works
    bad = piped("devices", "list", "--format", "xml")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_help_in_a_pipe_is_wrapped_not_cut():
    proc = piped("search", "--help")
    assert proc.returncode == 0
    for option in ("--accuracy-samples", "--finetune-epochs", "--max-params", "--latency-margin"):
        assert option in proc.stdout
    assert "…" not in proc.stdout and "╭" not in proc.stdout  # plain text, not a panel cut to 80
    commands = piped("space").stdout + piped("space").stderr
    assert "Sample subnets (OFA-MobileNetV3: uniformly over distinct networks)." in " ".join(commands.split())


def test_accuracy_build_in_a_pipe_prints_plain_progress_lines(tiny_supernet, tmp_path):
    from hwnas.run import open_run

    run = open_run(tmp_path / "run", supernet=tiny_supernet)
    proc = piped("accuracy", "build", "--run", str(run.run_dir), "--samples", "2", "--bn-images", "16")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "accuracy table: 0/2 (0%) (0:00:00)" in lines
    assert any(line.startswith("accuracy table: 2/2 done (") for line in lines)
    assert not any(cut in proc.stderr for cut in CUT) and "━" not in proc.stderr


def _plain(interval: float = 10.0) -> tuple[PlainProgress, io.StringIO]:
    out = io.StringIO()
    bar = make_progress(Console(file=out, width=80))
    assert isinstance(bar, PlainProgress)  # not a terminal: plain lines
    bar.interval = interval
    return bar, out


def test_plain_progress_says_start_progress_and_end_once():
    bar, out = _plain()
    task = bar.add_task("profile cpu-ort", total=200, info="")
    for i in range(201):
        bar.update(task, completed=i, info=f"subnet {i}")
    bar.update(task, completed=200)  # reported again: said once
    lines = out.getvalue().splitlines()
    assert lines[0] == "profile cpu-ort: 0/200 (0%) subnet 0 (0:00:00)"
    assert lines[1] == "profile cpu-ort: 200/200 done subnet 200 (0:00:00)" and len(lines) == 2
    bar, out = _plain(interval=0.0)  # every update when the interval allows it
    task = bar.add_task("finetune", total=None, info="")
    bar.update(task, completed=3, info="loss 0.1")
    bar.update(task, completed=5, total=10)
    assert out.getvalue().splitlines() == ["finetune: 3 loss 0.1 (0:00:00)",
                                           "finetune: 5/10 (50%) loss 0.1 (0:00:00, eta 0:00:00)"]


def test_event_progress_off_a_terminal_prints_steps_and_notes_as_lines():
    out = io.StringIO()
    with EventProgress(Console(file=out, width=40)) as bar:
        bar("fit-accuracy")
        bar("accuracy-predictor", message="accuracy table: 12 subnets; predictor ridge[full]: " + "x" * 60)
        bar("accuracy-predictor", message="accuracy table: 12 subnets; predictor ridge[full]: " + "x" * 60)
        bar("verify", done=1, total=2, device="cpu-ort", key="abc")
    lines = out.getvalue().splitlines()
    assert lines[0] == "fit accuracy predictor: done (0:00:00)"
    assert lines[1] == "accuracy table: 12 subnets; predictor ridge[full]: " + "x" * 60  # whole, once
    assert lines[2].startswith("verify on device cpu-ort: 1/2 (50%) abc") and len(lines) == 3


def test_output_console_prints_tables_whole_off_a_terminal_and_fits_a_terminal(monkeypatch):
    from rich.table import Table

    monkeypatch.setenv("COLUMNS", "80")
    table = Table("device", "status")
    table.add_row("mobile-xnnpack-int8", "unavailable: " + "a long reason " * 10)
    out = io.StringIO()
    OutputConsole(file=out).print(table)
    assert "mobile-xnnpack-int8" in out.getvalue() and "a long reason " * 10 in out.getvalue()
    assert len(out.getvalue().splitlines()) == 5  # one line per row
    term = io.StringIO()
    OutputConsole(file=term, force_terminal=True, color_system=None).print(table)
    assert max(len(line) for line in term.getvalue().splitlines()) <= 80
