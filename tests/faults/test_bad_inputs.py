"""Nonsense a user can type or hand over: one line (what is wrong, how to fix it) and exit 2,
never a traceback and never a silent default; a bug is one line, a --debug hint and exit 1."""

from __future__ import annotations

import csv
import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwnas.families import NetworkSpec
from hwnas.errors import CheckpointError, HwnasError, TableError
from hwnas.space import read_arch_table

DATA = Path(__file__).parents[1] / "latency" / "data" / "ofa_cpu_subnets.csv"


def cli(capsys, *args: str) -> tuple[int, list[str]]:
    """`hwnas ARGS` in this process: (exit code, the non-empty lines of stderr)."""
    from hwnas.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return done.value.code, lines


def one_line(capsys, *args: str, code: int = 2) -> str:
    got, lines = cli(capsys, *args)
    assert got == code and len(lines) == 1 and "Traceback" not in lines[0], (got, lines)
    return lines[0]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("HWNAS_NO_PROGRESS", "1")


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """30 real measured rows (r 32..64, OFA's kernel/expand choices) with an `ort_ms` column."""
    path = tmp_path_factory.mktemp("tables") / "t.csv"
    pd.read_csv(DATA).head(30).to_csv(path, index=False)
    return path


def edited(table: Path, tmp_path: Path, column: str, value: str) -> Path:
    rows = list(csv.reader(table.open()))
    rows[2][rows[0].index(column)] = value
    out = tmp_path / f"{column}={value}.csv"
    with out.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    return out


@pytest.fixture(scope="module")
def predictor(table, tmp_path_factory) -> Path:
    """A lookup-table predictor (JSON + .npz arrays) fitted on the table."""
    from hwnas.latency.api import fit_from_table

    path = tmp_path_factory.mktemp("pred") / "lut.json"
    fit_from_table(table, "ort_ms", path, kinds=["lut"], net=NetworkSpec("ofa-mbv3", 1.0, 10))
    assert (path.parent / "lut.npz").is_file()
    return path


# -- item 8: arch values outside the space, in every entry point ----------------------------------
NONSENSE = [("ks_0", "4"), ("ks_0", "9"), ("ks_0", "0"), ("ks_0", "-3"), ("e_0", "0"),
            ("e_0", "-6"), ("r", "1000"), ("d_1", "7"), ("ks_0", "1000000000000")]


@pytest.mark.parametrize("column,value", NONSENSE)
def test_nonsense_arch_values_are_refused_by_supernet_stats(capsys, table, tmp_path, column,
                                                            value):
    bad = edited(table, tmp_path, column, value)
    out = tmp_path / "stats.csv"
    line = one_line(capsys, "supernet", "stats", "--table", str(bad), "--out", str(out))
    assert "row 2" in line and f"column {column}" in line and value in line
    assert not out.exists()


@pytest.mark.parametrize("column,value", NONSENSE)
def test_nonsense_arch_values_are_refused_by_latency_fit_and_predict(capsys, table, predictor,
                                                                     tmp_path, column, value):
    bad = edited(table, tmp_path, column, value)
    line = one_line(capsys, "latency", "fit", "--table", str(bad), "--target", "ort_ms",
                    "--out", str(tmp_path / "p.json"), "--kind", "lut")
    assert f"column {column}" in line and not (tmp_path / "p.json").exists()
    line = one_line(capsys, "latency", "predict", "--predictor", str(predictor), "--table",
                    str(bad), "--out", str(tmp_path / "pred.csv"))
    assert f"column {column}" in line and not (tmp_path / "pred.csv").exists()


@pytest.mark.parametrize("column,value", NONSENSE)
def test_the_python_api_uses_the_same_check(table, tmp_path, column, value):
    from hwnas.latency.api import fit_from_table
    from hwnas.supernet.stats import stats_frame

    bad = edited(table, tmp_path, column, value)
    with pytest.raises(TableError, match=f"row 2.*column {column}") as err:
        read_arch_table(bad)
    message = str(err.value)
    with pytest.raises(TableError, match=f"column {column}") as err:
        fit_from_table(bad, "ort_ms", tmp_path / "p.json", kinds=["lut"], net=NetworkSpec("ofa-mbv3", 1.0, 10))
    assert str(err.value) == message
    frame = pd.read_csv(bad)
    if (column, value) not in (("ks_0", "9"), ("r", "1000")):  # a custom space may allow those
        with pytest.raises(TableError, match=f"row 2, column {column}"):
            stats_frame(frame)


def test_a_saved_predictor_with_nan_arrays_is_refused_at_load(capsys, table, predictor,
                                                              tmp_path):
    import shutil

    from hwnas.latency.base import load_predictor

    copy = tmp_path / "lut.json"
    shutil.copy(predictor, copy)
    with np.load(predictor.parent / "lut.npz") as data:
        arrays = {k: data[k] for k in data.files}
    name = next(k for k, a in arrays.items() if a.dtype.kind == "f")
    arrays[name] = np.full_like(arrays[name], np.nan)
    np.savez(tmp_path / "lut.npz", **arrays)
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        load_predictor(copy)
    line = one_line(capsys, "latency", "predict", "--predictor", str(copy), "--table", str(table),
                    "--out", str(tmp_path / "p.csv"))
    assert "NaN or infinite" in line and "refit" in line


@pytest.mark.parametrize("damage", ["truncated", "byte-flipped", "empty", "not-a-zip"])
def test_a_damaged_predictor_npz_is_one_line(capsys, table, predictor, tmp_path, damage):
    import shutil

    copy = tmp_path / "lut.json"
    shutil.copy(predictor, copy)
    data = bytearray((predictor.parent / "lut.npz").read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "byte-flipped":
        for i in range(len(data) // 3, len(data) // 3 + 8):
            data[i] ^= 0xFF
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"PK\x03\x04" + b"\x00" * 100)
    (tmp_path / "lut.npz").write_bytes(bytes(data))
    line = one_line(capsys, "latency", "predict", "--predictor", str(copy), "--table", str(table),
                    "--out", str(tmp_path / "p.csv"))
    assert "lut.npz" in line and "corrupt" in line


# -- item 7: paths -------------------------------------------------------------------------------
def test_a_run_dir_that_is_a_file(capsys, tmp_path):
    run = tmp_path / "run"
    run.write_text("not a folder")
    for args in (["latency", "fit", "--run", str(run), "--device", "cpu-ort"],
                 ["search", "--run", str(run), "--device", "cpu-ort", "--latency-ms", "1"]):
        assert "is a file" in one_line(capsys, *args)
    assert run.read_text() == "not a folder"


def test_out_that_is_a_folder(capsys, table, predictor, tmp_path):
    for args in (["supernet", "stats", "--table", str(table), "--out", str(tmp_path)],
                 ["latency", "predict", "--predictor", str(predictor), "--table", str(table),
                  "--out", str(tmp_path)],
                 ["latency", "fit", "--table", str(table), "--target", "ort_ms", "--out",
                  str(tmp_path)]):
        assert "is a folder" in one_line(capsys, *args)
    from hwnas.fileio import atomic_write_text

    with pytest.raises(HwnasError, match="is a folder"):  # the Python API too
        atomic_write_text(tmp_path, "x")


def test_a_read_only_output_folder(capsys, table, tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() == 0:  # root writes anyway: make the write fail as it would for a user
        real = tempfile.mkstemp

        def mkstemp(*args, dir=None, **kw):
            if dir is not None and Path(dir) == ro:
                raise PermissionError(errno.EACCES, "Permission denied", str(ro / "x.tmp"))
            return real(*args, dir=dir, **kw)

        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    try:
        line = one_line(capsys, "supernet", "stats", "--table", str(table), "--out",
                        str(ro / "stats.csv"))
    finally:
        ro.chmod(0o755)
    assert line.startswith("error: cannot use") and "permission denied" in line
    assert str(ro) in line


def test_an_unexpected_error_is_one_line_with_a_debug_hint(capsys, table, tmp_path,
                                                           monkeypatch):
    import hwnas.families.tables as tables

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(tables, "stats_frame", broken)
    args = ["supernet", "stats", "--table", str(table), "--out", str(tmp_path / "s.csv")]
    line = one_line(capsys, *args, code=1)
    assert "ZeroDivisionError: division by zero" in line and "--debug" in line
    from hwnas.cli import _state, main

    try:
        with pytest.raises(ZeroDivisionError):  # --debug: the traceback
            main(["--debug", *args])
    finally:
        _state["debug"] = False


def test_a_truncated_npz_through_the_real_cli(table, predictor, tmp_path):
    """The same as a user sees it: a real process, stderr one line, exit 2."""
    import shutil

    copy = tmp_path / "lut.json"
    shutil.copy(predictor, copy)
    data = (predictor.parent / "lut.npz").read_bytes()
    (tmp_path / "lut.npz").write_bytes(data[: len(data) - 40])
    proc = subprocess.run([sys.executable, "-m", "hwnas", "latency", "predict", "--predictor",
                           str(copy), "--table", str(table), "--out", str(tmp_path / "p.csv")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HWNAS_NO_PROGRESS": "1"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "corrupt" in lines[0], proc.stderr


# -- item 8: options that were ignored or silently replaced ---------------------------------------
@pytest.mark.parametrize("flag,value,message", [
    ("--max-macs", "-5", "--max-macs must be a positive count"),
    ("--max-macs", "0", "--max-macs must be a positive count"),
    ("--max-params", "-1", "--max-params must be a positive count"),
    ("--max-params", "0", "--max-params must be a positive count"),
    ("--trials", "0", "--trials must be at least 1"),
    ("--population", "0", "--population must be at least 1"),
    ("--generations", "0", "--generations must be at least 1"),
    ("--top-k", "0", "--top-k must be at least 1"),
    ("--latency-ms", "nan", "--latency-ms must be a positive"),
])
def test_search_options_out_of_range_are_refused_before_any_work(capsys, tmp_path, flag, value,
                                                                  message):
    args = ["search", "--run", str(tmp_path / "run"), "--device", "cpu-ort"]
    args += [flag, value] if flag == "--latency-ms" else ["--latency-ms", "1", flag, value]
    assert message in one_line(capsys, *args)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args,message", [
    (["--classes", "0"], "--classes must be at least 1"),
    (["--width-mult", "-1"], "--width-mult must be positive"),
])
def test_latency_and_stats_options_out_of_range(capsys, table, tmp_path, args, message):
    assert message in one_line(capsys, "latency", "fit", "--table", str(table), "--target",
                               "ort_ms", "--out", str(tmp_path / "p.json"), *args)
    assert message in one_line(capsys, "supernet", "stats", "--table", str(table), "--out",
                               str(tmp_path / "s.csv"), *args)
