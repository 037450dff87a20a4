"""Torch-free helpers of the agent tests: a real agent process on loopback, a remote device that
points at it, and a tiny ONNX model built with onnx's helper API (the slim agent's test has no
torch to export one with)."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from hwnas.devices import Device


class AgentProcess:
    """`python -m hwnas.devices.agent` (or, with `cli`, `python -m hwnas agent serve`) in a
    subprocess; `port` is read from its banner, which `banner` keeps whole. An option given as
    True is a bare flag (`tls=True`: --tls)."""

    def __init__(self, token_file: Path, state_dir: Path, port: int = 0, *, cli: bool = False,
                 env: Mapping[str, str] | None = None, **options: object):
        entry = ["hwnas", "agent", "serve"] if cli else ["hwnas.devices.agent"]
        cmd = [sys.executable, "-m", *entry, "--host", "127.0.0.1", "--port", str(port),
               "--token-file", str(token_file), "--state-dir", str(state_dir)]
        for key, value in options.items():
            cmd += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
        self.cli = cli  # the command prints its banner to stderr (the log), the module to stdout
        self.log = state_dir.parent / f"{state_dir.name}.log"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log.open("ab"),
                                     text=True, env=None if env is None else dict(env))
        self.banner = ""
        self.port = self._wait_listening()

    def _wait_listening(self, timeout_s: float = 40.0) -> int:
        deadline = time.monotonic() + timeout_s
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:  # raw reads: a buffered readline could hold the last line where select never sees it
                self.banner += os.read(fd, 65536).decode(errors="replace")
            text = self.log.read_text(errors="replace") if self.cli else self.banner
            match = re.search(r"listening on https?://127\.0\.0\.1:(\d+)", text)
            if match and re.search(r"devices usable here.*\n", text):  # the banner's last line
                self.banner = text
                return int(match.group(1))
            if self.proc.poll() is not None:
                break
        self.proc.kill()
        raise AssertionError(f"agent did not start: {self.banner}{self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=20)


def remote(name: str, port: int, token_file: Path, *, tls_fingerprint: str | None = None,
           **agent: object) -> Device:
    return Device(name=name, backend="onnxruntime", host="127.0.0.1", port=port,
                  token_file=token_file, tls_fingerprint=tls_fingerprint,
                  options={"agent": agent} if agent else {})


def tiny_onnx(path: Path, *, metadata: dict[str, str] | None = None) -> Path:
    """Conv + ReLU with one static input named `input` ([1, 3, 8, 8]): an ONNX model the agent
    accepts."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3))
                                .astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["output"])], "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path
