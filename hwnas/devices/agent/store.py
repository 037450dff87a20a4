"""The agent's state directory: received models and finished results, both crash-safe.

    <state_dir>/models/<sha256>.onnx    models received, content-addressed (validated first)
    <state_dir>/models/<sha256>.json    their input shape and dtype
    <state_dir>/results/<request_id>.json   one finished request: what it asked, its stats
    <state_dir>/measured.jsonl          one line per measurement actually made (an audit log)

Results make requests idempotent: a client that timed out resends the same request id and gets
the stored result instead of a second measurement, also from an agent restarted after a crash.
Every file is written atomically (temp file + rename), so a kill leaves a result or none.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from hwnas.devices.agent.wire import OnnxInput, Refusal, check_onnx, sha256
from hwnas.fileio import atomic_write_bytes, atomic_write_json, state_dir

__all__ = ["ModelStore", "ResultStore", "default_state_dir"]


def default_state_dir() -> Path:
    return state_dir() / "agent"


class ModelStore:
    """Validated ONNX models by sha256, evicted least-recently-used beyond `max_bytes`."""

    def __init__(self, root: Path, max_bytes: int = 4 << 30):
        self.root = root
        self.max_bytes = max_bytes
        root.mkdir(parents=True, exist_ok=True)

    def path(self, sha: str) -> Path:
        return self.root / f"{sha}.onnx"

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file() and (self.root / f"{sha}.json").is_file()

    def add(self, sha: str, data: bytes) -> None:
        """Keep `data` under `sha` if it hashes to it and is ONNX; raises `Refusal` otherwise.
        (Bytes for a model already held are ignored: they cannot change what is stored.)"""
        if self.has(sha):
            return
        if sha256(data) != sha:
            raise Refusal(400, "bad_request", f"blob {sha[:12]} does not match its sha256")
        spec = check_onnx(data)
        atomic_write_bytes(self.path(sha), data)
        atomic_write_json(self.root / f"{sha}.json", {"shape": list(spec.shape),
                                                      "dtype": spec.dtype})

    def input(self, sha: str) -> OnnxInput:
        """The model's input, and marks it recently used."""
        meta = json.loads((self.root / f"{sha}.json").read_text())
        os.utime(self.path(sha))
        return OnnxInput(tuple(meta["shape"]), meta["dtype"])

    def evict(self, keep: set[str]) -> None:
        """Remove least-recently-used models until the store fits `max_bytes` (never `keep`)."""
        files = sorted(self.root.glob("*.onnx"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        for path in files:
            if total <= self.max_bytes:
                break
            if path.stem in keep:
                continue
            total -= path.stat().st_size
            path.unlink(missing_ok=True)
            (self.root / f"{path.stem}.json").unlink(missing_ok=True)


class ResultStore:
    """Finished requests by id, kept `keep_s` seconds, and the count of measurements made."""

    def __init__(self, root: Path, keep_s: float = 7 * 86400):
        self.dir = root / "results"
        self.log = root / "measured.jsonl"
        self.keep_s = keep_s
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.requests_measured, self.models_measured = 0, 0
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a crash mid-append
                    continue
                self.requests_measured += 1
                self.models_measured += len(entry.get("models", []))
        self.prune()

    def get(self, request_id: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / f"{request_id}.json").read_text())
        except FileNotFoundError:
            return None

    def put(self, request_id: str, record: dict[str, Any]) -> None:
        """Store a finished request, then log the measurement (so a crash between the two can
        only under-count, never leave a measurement without its result)."""
        atomic_write_json(self.dir / f"{request_id}.json", record)
        line = json.dumps({"request_id": request_id, "endpoint": record.get("endpoint"),
                           "models": list(record.get("results", {})), "t": time.time()})
        with self._lock, open(self.log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
            self.requests_measured += 1
            self.models_measured += len(record.get("results", {}))

    def prune(self) -> None:
        cutoff = time.time() - self.keep_s
        for path in self.dir.glob("*.json"):
            if path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
