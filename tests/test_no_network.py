"""The suite's network guard (tests/no_network/sitecustomize.py) is on in the processes tests start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.network_attempt
def test_a_started_process_cannot_reach_another_machine_and_is_logged():
    log = os.environ["HWNAS_TEST_NETWORK_LOG"]
    before = os.path.getsize(log) if os.path.exists(log) else 0  # the conftest empties it after each test
    code = "import socket; socket.create_connection(('192.0.2.1', 9), timeout=1)"  # TEST-NET-1
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "tests: no network" in proc.stderr, proc.stderr[-500:]
    with open(log) as f:
        f.seek(before)
        assert "192.0.2.1" in f.read()
