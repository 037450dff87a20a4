"""A bundle's integrity: sha256 of every file, checked before anything in it is loaded.

``model.json`` is the manifest: it lists every other file of the bundle with its size and sha256.
``SHA256SUMS`` (``sha256sum -c SHA256SUMS`` on the target) lists all files, ``model.json``
included, so a hand-edited manifest is caught as well; it is required: a bundle without it (or
whose lists disagree) is refused, so deleting it cannot switch the check off. A bundle is assembled in a hidden staging
folder beside its destination and renamed into place when complete, so a crash never leaves a
half-written bundle under the final name.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterator

from hwnas.errors import HwnasError, InputError
from hwnas.export.record import BundleRecord, checked_bundle, schema_problem
from hwnas.fileio import atomic_write_json, atomic_write_text, pid_alive, sha256_file

__all__ = ["FORMAT", "VERSION", "MODEL_JSON", "VERIFY_JSON", "SUMS", "BundleError", "sha256_file",
           "write_manifest", "read_meta", "check_files", "inside", "check_destination", "staging_dir",
           "publish", "discard"]

FORMAT = "hwnas-bundle"
VERSION = 1
MODEL_JSON = "model.json"
VERIFY_JSON = "verify.json"
SUMS = "SHA256SUMS"


class BundleError(HwnasError):
    """A bundle is missing, incomplete, tampered with, or failed its verification."""


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in (MODEL_JSON, SUMS):
            yield path


def write_manifest(root: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Record every file's size and sha256 in `meta`, write model.json and SHA256SUMS."""
    meta["files"] = {p.relative_to(root).as_posix(): {"bytes": p.stat().st_size,
                                                       "sha256": sha256_file(p)}
                     for p in _files(root)}
    atomic_write_json(root / MODEL_JSON, checked_bundle(meta))
    lines = [f"{rec['sha256']}  {name}" for name, rec in meta["files"].items()]
    lines.append(f"{sha256_file(root / MODEL_JSON)}  {MODEL_JSON}")
    atomic_write_text(root / SUMS, "\n".join(lines) + "\n")
    return meta


def read_meta(root: str | Path) -> dict[str, Any]:
    """The bundle's model.json, after checking it is an hwnas bundle of a known version."""
    root = Path(root)
    path = root / MODEL_JSON
    if root.exists() and not root.is_dir():
        raise BundleError(f"{root} is a file, not a bundle folder; give the folder `hwnas export` wrote")
    if not root.is_dir():
        raise BundleError(f"bundle {root} does not exist; export one with `hwnas export`")
    if not path.is_file():
        raise BundleError(f"{root} is not an hwnas bundle (no {MODEL_JSON})")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise BundleError(f"{path} is not valid JSON ({err}); the bundle is corrupt: "
                          "export it again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise BundleError(f"{path} is not an hwnas bundle manifest (format {meta.get('format')!r})"
                          if isinstance(meta, dict) else f"{path} is not an hwnas bundle manifest")
    if meta.get("version") != VERSION:
        raise BundleError(f"{path} has bundle version {meta.get('version')!r}; this hwnas reads "
                          f"version {VERSION}: export the bundle again")
    problem = schema_problem(BundleRecord, meta)
    if problem is not None:
        raise BundleError(f"{path} does not fit the bundle schema ({problem}); the bundle is damaged: "
                          "export it again")
    return meta


def _sums(root: Path) -> dict[str, str]:
    """SHA256SUMS as {name: sha256}; BundleError when it is missing or malformed (without it a
    hand-edited model.json could not be told from an exported one)."""
    path = root / SUMS
    if not path.is_file():
        raise BundleError(f"bundle {root} has no {SUMS}, so its files cannot be checked; "
                          "restore it or export the bundle again")
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise BundleError(f"bundle {root}: {SUMS} cannot be read ({err}); export the bundle "
                          "again") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest) \
                or not name or name in out:
            raise BundleError(f"bundle {root}: {SUMS} line {number} is not '<sha256>  <file>' "
                              "(or names a file twice); export the bundle again")
        out[name] = digest
    return out


def inside(root: Path, name: Any) -> Path:
    """`root / name` for a relative name that stays inside the bundle."""
    parts = Path(str(name)).parts
    if not isinstance(name, str) or not name or Path(name).is_absolute() or ".." in parts:
        raise BundleError(f"bundle {root}: file name {name!r} points outside the bundle; "
                          "export the bundle again")
    return root / name


def check_files(root: str | Path, meta: dict[str, Any]) -> None:
    """Raise BundleError naming the first file that is missing or whose sha256 differs.

    SHA256SUMS is required and must list model.json and exactly the files model.json lists,
    with the same sha256; every one of them is hashed."""
    root = Path(root)
    sums = _sums(root)
    recorded = sums.pop(MODEL_JSON, None)
    if recorded is None:
        raise BundleError(f"bundle {root}: {SUMS} does not list {MODEL_JSON}; export the bundle "
                          "again")
    if recorded != sha256_file(root / MODEL_JSON):
        raise BundleError(f"bundle {root}: {MODEL_JSON} was modified after export (sha256 differs "
                          f"from {SUMS}); export the bundle again")
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        raise BundleError(f"bundle {root}: {MODEL_JSON} lists no files; export the bundle again")
    if set(files) != set(sums):
        odd = sorted(set(files) ^ set(sums))[0]
        raise BundleError(f"bundle {root}: {MODEL_JSON} and {SUMS} disagree about {odd}; "
                          "export the bundle again")
    for name, rec in files.items():
        path = inside(root, name)
        if not isinstance(rec, dict) or rec.get("sha256") != sums[name]:
            raise BundleError(f"bundle {root}: the sha256 of {name} in {MODEL_JSON} differs from "
                              f"{SUMS}; export the bundle again")
        if not path.is_file():
            raise BundleError(f"bundle {root}: {name} is missing; restore it or export again")
        if path.stat().st_size != rec.get("bytes") or sha256_file(path) != rec.get("sha256"):
            raise BundleError(f"bundle {root}: {name} was modified after export (sha256 differs "
                              f"from {MODEL_JSON}); restore it or export the bundle again")


def check_destination(out: Path) -> None:
    """Refuse to replace anything but an empty folder or a provable hwnas bundle: a folder whose
    model.json is a bundle manifest, whose SHA256SUMS matches every file, and which holds nothing
    else. Anything a user may have put there stays untouched (one line, exit 2)."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise InputError(f"--out {out} exists and is not a folder; choose a new or empty --out folder")
    if not any(out.iterdir()):
        return
    try:
        meta = read_meta(out)
        check_files(out, meta)
    except BundleError as err:
        raise InputError(f"--out {out} exists and is not an intact hwnas bundle ({err}); nothing "
                         "was changed: choose a new or empty --out folder") from None
    listed = set(meta["files"]) | {MODEL_JSON, SUMS}
    extra = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                   if (p.is_file() or p.is_symlink()) and p.relative_to(out).as_posix() not in listed)
    if extra:
        raise InputError(f"--out {out} is an hwnas bundle but also holds {extra[0]}, which export "
                         "did not write; nothing was changed: move it out or choose another --out")


# Staging folders `.NAME.partial-TOKEN` (and a bundle moved aside while publishing, `.NAME.old-TOKEN`)
# belong to the process that holds the lock file `.NAME.TOKEN.lock` beside them. A kernel lock,
# unlike a PID, is released when its holder dies and means the same in every PID namespace that
# shares the folder (containers on one volume): only a folder whose lock nobody holds is stale.
_ENTRY = re.compile(r"\.(?P<name>.+)\.(?P<kind>partial|old)-(?P<token>[0-9a-f]{16}|\d+)")
_HELD: dict[Path, tuple[int, Path, str]] = {}  # stage -> (fd of its held lock, lock path, token)


def _lock_file(parent: Path, name: str, token: str) -> Path:
    return parent / f".{name}.{token}.lock"


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on `path`, or None when another process holds it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _owner_gone(parent: Path, name: str, token: str) -> int | None:
    """A held lock on the entry's lock file when its owner is gone (the caller releases it), or
    None when it is alive. Entries named by a PID (older hwnas) fall back to that PID."""
    if token.isdigit() and len(token) != 16:
        return -1 if not pid_alive(int(token)) else None
    lock = _lock_file(parent, name, token)
    if not lock.exists():
        return -1  # the owner removes its lock only after its folders are gone
    return _try_lock(lock)


def clean_stale(parent: Path) -> None:
    """Remove what killed exports left in `parent`: staging folders (tens of MB each) whose owner
    holds no lock any more. A previous bundle moved aside by a publish that was killed half-way goes
    back to its name when that is free."""
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = _ENTRY.fullmatch(entry.name)
        if match is None:
            continue
        fd = _owner_gone(parent, match["name"], match["token"])
        if fd is None:
            continue
        try:
            target = parent / match["name"]
            if match["kind"] == "old" and not target.exists():
                entry.rename(target)
            else:
                shutil.rmtree(entry)
            _lock_file(parent, match["name"], match["token"]).unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            if fd >= 0:
                os.close(fd)


def staging_dir(out: Path) -> Path:
    """A fresh hidden folder beside `out` to assemble the bundle in, owned through a held lock
    (after clearing what killed exports left beside it). `publish` or `discard` ends it."""
    check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out.parent)
    token = uuid.uuid4().hex[:16]
    lock = _lock_file(out.parent, out.name, token)
    # locked before it gets its name, so no cleaner ever sees it unlocked
    tmp = lock.with_name(lock.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(tmp, lock)
    stage = out.parent / f".{out.name}.partial-{token}"
    stage.mkdir()
    _HELD[stage] = (fd, lock, token)
    return stage


def _release(stage: Path) -> None:
    fd, lock, _ = _HELD.pop(stage, (None, None, None))
    if fd is not None:
        lock.unlink(missing_ok=True)
        os.close(fd)


def discard(stage: Path) -> None:
    """Remove an unfinished staging folder and give up its lock."""
    shutil.rmtree(stage, ignore_errors=True)
    _release(stage)


def publish(stage: Path, out: Path) -> Path:
    """Move the finished staging folder onto `out`, replacing a previous bundle there. Only a
    complete bundle is published: every file its manifest names, with its sha256."""
    try:
        check_files(stage, read_meta(stage))
        check_destination(out)  # it may have changed while this export ran
    except (BundleError, InputError):
        discard(stage)
        raise
    _, _, token = _HELD.get(stage, (None, None, uuid.uuid4().hex[:16]))
    old = out.parent / f".{out.name}.old-{token}"
    if out.exists():
        out.rename(old)
    try:
        stage.rename(out)
    except OSError:
        if old.exists():
            old.rename(out)  # put the previous bundle back
        discard(stage)
        raise
    shutil.rmtree(old, ignore_errors=True)
    _release(stage)
    return out
