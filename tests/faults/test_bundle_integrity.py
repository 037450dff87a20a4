"""Export bundles that were edited, stripped of their checksums, or left half-written by a kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwnas.errors import HwnasError
from hwnas.export import BundleError, load
from hwnas.export.manifest import FORMAT, SUMS, VERSION, sha256_file, staging_dir, write_manifest


@pytest.fixture
def make_bundle(tiny_onnx):
    return lambda root, status="verified": _make_bundle(root, tiny_onnx, status)


def _make_bundle(root: Path, tiny_onnx, status: str = "verified") -> Path:
    """A minimal bundle (a tiny ONNX model + model.json + SHA256SUMS) as `write_manifest` makes it."""
    root.mkdir(parents=True)
    tiny_onnx(root / "model.onnx")
    (root / "verify.json").write_text(json.dumps({"status": status}))
    write_manifest(root, {"format": FORMAT, "version": VERSION, "id": "abc", "status": status,
                          "accuracy": {"split": "test", "top1": 90.0, "n": 8},
                          "classes": [str(i) for i in range(4)],
                          "preprocess": {"size": 8, "mean": [0.0] * 3, "std": [1.0] * 3},
                          "onnx": {"file": "model.onnx", "input_shape": [1, 3, 8, 8],
                                   "input_dtype": "float32"}})
    return root


def refused(root: Path) -> str:
    with pytest.raises(BundleError) as err:
        load(root, runtime="onnx")
    assert isinstance(err.value, HwnasError) and "\n" not in str(err.value)
    return str(err.value)


def edit_meta(root: Path, **changes) -> None:
    meta = json.loads((root / "model.json").read_text())
    meta.update(changes)
    (root / "model.json").write_text(json.dumps(meta))


def test_an_intact_bundle_loads(tmp_path, make_bundle):
    with load(make_bundle(tmp_path / "b"), runtime="onnx") as bundle:
        assert bundle.status == "verified" and bundle.runtime.startswith("onnxruntime")


def test_deleting_sha256sums_does_not_switch_the_check_off(tmp_path, make_bundle):
    """The attack: a bundle that failed verification, its status edited to 'verified' and the
    checksum file deleted, used to load."""
    root = make_bundle(tmp_path / "b", status="failed: outputs differ")
    edit_meta(root, status="verified")
    (root / SUMS).unlink()
    assert f"has no {SUMS}" in refused(root)


def test_deleting_sha256sums_alone_is_refused(tmp_path, make_bundle):
    root = make_bundle(tmp_path / "b")
    (root / SUMS).unlink()
    assert f"has no {SUMS}" in refused(root)


def test_an_edited_model_json_is_refused(tmp_path, make_bundle):
    root = make_bundle(tmp_path / "b")
    edit_meta(root, classes=["cat", "dog", "car", "man"])
    assert "model.json was modified after export" in refused(root)


@pytest.mark.parametrize("attack", ["drop-model-json-line", "garbage-line", "extra-file",
                                    "model-sha-only-in-model-json", "escape-path"])
def test_sha256sums_that_disagree_with_the_bundle_is_refused(tmp_path, make_bundle, attack):
    root = make_bundle(tmp_path / "b")
    sums = (root / SUMS).read_text().splitlines()
    if attack == "drop-model-json-line":
        sums = [line for line in sums if not line.endswith("  model.json")]
        expect = "does not list model.json"
    elif attack == "garbage-line":
        sums.append("not a checksum line")
        expect = "is not '<sha256>  <file>'"
    elif attack == "extra-file":
        (root / "extra.bin").write_bytes(b"x")
        sums.insert(0, f"{sha256_file(root / 'extra.bin')}  extra.bin")
        expect = "disagree about extra.bin"
    else:
        # the model swapped and model.json updated to match, SHA256SUMS's model.json line too
        # (not its model.onnx line), or a file name that leaves the bundle
        data = bytearray((root / "model.onnx").read_bytes())
        data[-1] ^= 1
        (root / "model.onnx").write_bytes(bytes(data))
        meta = json.loads((root / "model.json").read_text())
        rec = meta["files"].pop("model.onnx")
        name = "model.onnx" if attack == "model-sha-only-in-model-json" else "../model.onnx"
        meta["files"][name] = {"bytes": len(data), "sha256": sha256_file(root / "model.onnx")}
        (root / "model.json").write_text(json.dumps(meta))
        sums = [f"{sha256_file(root / 'model.json')}  model.json" if line.endswith("model.json")
                else line.replace("  model.onnx", f"  {name}") for line in sums]
        assert rec["sha256"] in "\n".join(sums)
        expect = ("differs from SHA256SUMS" if attack == "model-sha-only-in-model-json"
                  else "points outside the bundle")
    (root / SUMS).write_text("\n".join(sums) + "\n")
    assert expect in refused(root)


# -- item 9: what killed exports leave behind ---------------------------------------------------
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_export_removes_partials_of_killed_exports(tmp_path):
    exports = tmp_path / "exports"
    dead = dead_pid()
    stale = exports / f".abc-cpu-ort.partial-{dead}"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "model.onnx").write_bytes(b"x" * 1000)
    live = exports / f".other-cpu-ort.partial-{os.getppid()}"  # a live export elsewhere: kept
    live.mkdir()
    moved_aside = exports / f".prev-cpu-ort.old-{dead}"  # killed between publish's two renames
    moved_aside.mkdir()
    (moved_aside / "model.json").write_text("{}")
    mine = exports / "new-cpu-ort"
    stage = staging_dir(mine)
    assert stage.is_dir() and stage.name.startswith(".new-cpu-ort.partial-")
    assert not stale.exists() and live.is_dir()
    assert (exports / "prev-cpu-ort" / "model.json").is_file() and not moved_aside.exists()
