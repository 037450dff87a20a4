"""A bundle's integrity: sha256 of every file, checked before anything in it is loaded.

``model.json`` is the manifest: it lists every other file of the bundle with its size and sha256.
``SHA256SUMS`` (``sha256sum -c SHA256SUMS`` on the target) lists all files, ``model.json``
included, so a hand-edited manifest is caught as well; it is required: a bundle without it (or
whose lists disagree) is refused, so deleting it cannot switch the check off. A bundle is assembled in a hidden staging
folder beside its destination and renamed into place when complete, so a crash never leaves a
half-written bundle under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from hwnas.errors import HwnasError, InputError
from hwnas.fileio import atomic_write_json, atomic_write_text, pid_alive, remove_stale, sha256_file

__all__ = ["FORMAT", "VERSION", "MODEL_JSON", "VERIFY_JSON", "SUMS", "BundleError", "sha256_file",
           "write_manifest", "read_meta", "check_files", "check_destination", "staging_dir",
           "publish"]

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
    atomic_write_json(root / MODEL_JSON, meta)
    lines = [f"{rec['sha256']}  {name}" for name, rec in meta["files"].items()]
    lines.append(f"{sha256_file(root / MODEL_JSON)}  {MODEL_JSON}")
    atomic_write_text(root / SUMS, "\n".join(lines) + "\n")
    return meta


def read_meta(root: str | Path) -> dict[str, Any]:
    """The bundle's model.json, after checking it is an hwnas bundle of a known version."""
    root = Path(root)
    path = root / MODEL_JSON
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


def _inside(root: Path, name: Any) -> Path:
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
        path = _inside(root, name)
        if not isinstance(rec, dict) or rec.get("sha256") != sums[name]:
            raise BundleError(f"bundle {root}: the sha256 of {name} in {MODEL_JSON} differs from "
                              f"{SUMS}; export the bundle again")
        if not path.is_file():
            raise BundleError(f"bundle {root}: {name} is missing; restore it or export again")
        if path.stat().st_size != rec.get("bytes") or sha256_file(path) != rec.get("sha256"):
            raise BundleError(f"bundle {root}: {name} was modified after export (sha256 differs "
                              f"from {MODEL_JSON}); restore it or export the bundle again")


def check_destination(out: Path) -> None:
    """Refuse to replace an existing folder that is not an hwnas bundle (it may hold user files)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                               and not (out / MODEL_JSON).is_file())):
        raise InputError(f"{out} exists and is not an hwnas bundle; choose a new or empty "
                         "--out folder")


def clean_stale(parent: Path) -> None:
    """Remove what killed exports left in `parent`: staging folders `.ID.partial-PID` (tens of
    MB each) of processes that no longer exist. A previous bundle moved aside by a publish that
    was killed half-way (`.ID.old-PID`, dead PID) goes back to its name when that is free."""
    import re

    for entry in parent.glob(".*.old-*"):
        match = re.fullmatch(r"\.(?P<name>.+)\.old-(?P<pid>\d+)", entry.name)
        if match is None or pid_alive(int(match["pid"])):
            continue
        target = parent / match["name"]
        try:
            if target.exists():
                shutil.rmtree(entry)
            else:
                entry.rename(target)
        except OSError:
            pass
    remove_stale(parent, r"\..+\.partial-(?P<pid>\d+)")


def staging_dir(out: Path) -> Path:
    """A fresh hidden folder beside `out` to assemble the bundle in (after clearing what killed
    exports left beside it)."""
    check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out.parent)
    stage = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    return stage


def publish(stage: Path, out: Path) -> Path:
    """Move the finished staging folder onto `out`, replacing a previous bundle there."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    try:
        stage.rename(out)
    except OSError:
        if old.exists():
            old.rename(out)  # put the previous bundle back
        raise
    shutil.rmtree(old, ignore_errors=True)
    return out
