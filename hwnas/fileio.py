"""Atomic file writes: write a temporary file beside the target, then rename over it.

A crash (or Ctrl-C) mid-write leaves either the old file or the new one, never half of one.
Also the readers that need care: files a user hands over (`parse_yaml`, `read_npz`) and Parquet
tables another process may replace while they are read (`read_parquet`).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from hwnas.errors import HwnasError

__all__ = ["read_parquet", "atomic_path", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "read_npz",
           "parse_yaml", "state_dir", "file_lock", "sha256_file", "pid_alive", "remove_stale", "scratch_prefix",
           "file_stem"]


@contextmanager
def file_lock(path: str | os.PathLike[str], *, blocking: bool = True) -> Iterator[Path]:
    """An inter-process exclusive lock on `path` (created if missing), released on exit.

    fcntl locks belong to the process and vanish when it dies, so a killed writer never leaves a
    stale lock behind. `blocking=False` raises BlockingIOError when another process holds it.
    """
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        try:
            yield path
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextmanager
def atomic_path(target: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success it is renamed onto `target`.

    `suffix` lets writers that infer the format from the extension (pandas, safetensors) see it.
    """
    target = Path(target)
    if target.is_dir():
        from hwnas.errors import InputError

        raise InputError(f"{target} is a folder, so a file cannot be written there; give the "
                         "path of a file")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except OSError as err:
        if err.filename is None:  # a failed write (ENOSPC) names no file: name the one being written
            raise type(err)(err.errno, err.strerror, str(target)) from err
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def read_parquet(path: str | os.PathLike[str]):
    """A Parquet file as a DataFrame, read from one version of it even while a writer renames a
    new one over it (`atomic_path`).

    Given a path, pyarrow reads the file's size and opens it separately, so a rename in between
    reads the new file with the old size ("Unexpected end of stream"). An open handle pins one
    inode for the whole read.
    """
    import pandas as pd

    with open(path, "rb") as f:
        return pd.read_parquet(f)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def atomic_write_text(target: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(target, text.encode("utf-8"))


def json_safe(obj: Any) -> Any:
    """`obj` as plain JSON: numpy scalars and arrays to Python, non-finite floats to None (JSON
    has no NaN), paths to strings, dict keys to strings. The one sanitiser of every JSON hwnas
    writes (`atomic_write_json` applies it)."""
    import math

    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays and scalars
        return json_safe(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return obj


def atomic_write_json(target: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(target, json.dumps(json_safe(obj), indent=2, sort_keys=False) + "\n")


def read_npz(npz: str | os.PathLike[str], owner: str | os.PathLike[str]) -> dict[str, Any]:
    """The arrays of the .npz file beside a JSON document (`owner`), read without pickle.

    A missing or corrupt file is a one-line CheckpointError naming both files."""
    import zipfile
    import zlib

    import numpy as np

    from hwnas.errors import CheckpointError

    try:
        with np.load(npz, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise CheckpointError(f"{owner} needs its arrays file {npz}, which is missing; "
                              "copy both files together") from None
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as err:
        raise CheckpointError(f"arrays file {npz} of {owner} is corrupt or not an .npz "
                              f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None


def parse_yaml(text: str, source: str, error: type[HwnasError] | None = None) -> Any:
    """YAML a user supplies (`source` names it: "devices file d.yaml") as plain data.

    Safe types only, and no aliases (``*name``): a few nested aliases expand a 500-byte file into
    gigabytes ("billion laughs"), and no hwnas file needs them. Invalid YAML, an alias or absurd
    nesting is one line naming `source`, raised as `error` (default `ConfigError`)."""
    import yaml

    from hwnas.errors import ConfigError

    error = error or ConfigError
    try:
        return yaml.load(text, Loader=_no_alias_loader())  # a SafeLoader: plain types only
    except _AliasFound as found:
        raise error(f"{source} uses the YAML alias *{found.anchor}{_at(found.mark)}; hwnas accepts "
                    "no aliases (a few can expand to gigabytes): write the values out") from None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or " ".join(str(err).split())
        raise error(f"{source} is not valid YAML: {problem}{_at(getattr(err, 'problem_mark', None))}"
                    ) from None
    except RecursionError:  # the composer recurses once per nesting level
        raise error(f"{source} is not valid YAML: nested too deeply") from None


class _AliasFound(Exception):
    def __init__(self, anchor: str, mark: Any):
        super().__init__(anchor)
        self.anchor, self.mark = anchor, mark


def _at(mark: Any) -> str:
    return "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"


@functools.cache
def _no_alias_loader():
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):  # refused before anything is expanded
                event = self.peek_event()
                raise _AliasFound(event.anchor, event.start_mark)
            return super().compose_node(parent, index)

    return NoAliasLoader


def state_dir() -> Path:
    """hwnas's per-user state folder (device anchors, a device agent's models and results):
    ``$HWNAS_STATE_DIR``, else ``$XDG_STATE_HOME/hwnas``, else ``~/.local/state/hwnas``."""
    if os.environ.get("HWNAS_STATE_DIR"):
        return Path(os.environ["HWNAS_STATE_DIR"]).expanduser().absolute()
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return (Path(base).expanduser() / "hwnas").absolute()


def file_stem(path: str | os.PathLike[str], suffixes: tuple[str, ...]) -> str:
    """The stem of a set of files named STEM + suffix, given as the stem or as one of its files:
    `path` without the first of `suffixes` it ends with. Suffixes are appended to stems, not
    swapped in, so a stem like `soft.v2` keeps its dot."""
    stem = str(path)
    for ext in suffixes:
        if stem.endswith(ext):
            return stem[: -len(ext)]
    return stem


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (on this machine). A recycled id counts as alive:
    callers only ever skip a cleanup because of it."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale(folder: str | os.PathLike[str], pattern: str) -> list[Path]:
    """Remove the entries of `folder` matching the regex `pattern`, whose group "pid" names a
    process that no longer exists: what killed processes of hwnas left behind (staging folders,
    scratch folders). Entries of live processes are kept; errors are ignored. Returns the removed."""
    import re
    import shutil

    folder = Path(folder)
    regex = re.compile(pattern)
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = regex.fullmatch(entry.name)
        if match is None or pid_alive(int(match.group("pid"))):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry)
        except OSError:
            pass
    return removed


_SCRATCH = r"hwnas-.+-pid(?P<pid>\d+)-[A-Za-z0-9_]+"


def scratch_prefix(name: str) -> str:
    """The prefix of a scratch folder in the system temp dir (`tempfile.mkdtemp(prefix=...)`):
    ``hwnas-<name>-pid<pid>-``. A killed process cannot remove its scratch folder (compiled
    models: ~100 MB per profile), so this first removes those of processes that are gone."""
    remove_stale(tempfile.gettempdir(), _SCRATCH)
    return f"hwnas-{name}-pid{os.getpid()}-"
