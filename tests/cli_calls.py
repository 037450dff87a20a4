"""`hwnas ...` called in the test's own process, for the end-to-end tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def cli(capsys, *args: str) -> tuple[int, str]:
    """(exit code, everything printed) of `hwnas ARGS`."""
    from hwnas.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    captured = capsys.readouterr()
    return done.value.code, captured.out + captured.err


def export_verified(capsys, run: Path, subnet: str, out: Path, device: str = "cpu-ort", *extra: str) -> dict:
    """Export `subnet` of `run` for `device` into `out`; the bundle must pass verification.
    Returns its model.json."""
    code, text = cli(capsys, "export", "--run", str(run), "--device", device, "--subnet", subnet,
                     "--out", str(out), "--verify-images", "8", *extra)
    assert code == 0, text
    meta = json.loads((Path(out) / "model.json").read_text())
    assert meta["status"] == "verified", meta
    return meta
