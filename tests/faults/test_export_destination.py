"""Reliability round 2, export: a user's folder is never replaced, and a staging folder is owned
through a held lock (not a PID guess), so two exports that cannot see each other's processes never
delete each other's work, and only complete bundles are published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_calls import cli
from hwnas.errors import InputError
from hwnas.export import BundleError, load
from hwnas.export.manifest import check_destination, clean_stale, discard, publish, staging_dir, write_manifest


@pytest.fixture(scope="module")
def export_run(tmp_path_factory, tiny_supernet):
    """A run over the tiny supernet whose pareto.csv holds its smallest subnet."""
    from hwnas.run import open_run
    from hwnas.space import write_arch_table

    run = open_run(tmp_path_factory.mktemp("export") / "run", tiny_supernet)
    archs = [run.space.min_arch(r=32)]
    write_arch_table(run.run_dir / "pareto.csv", archs, extra={"id": [a.id for a in archs]})
    return run, archs


@pytest.fixture
def user_project(tmp_path) -> Path:
    """A user's folder that happens to hold a file called model.json."""
    root = tmp_path / "userproj"
    (root / "src").mkdir(parents=True)
    (root / "model.json").write_text(json.dumps({"name": "my web app"}))
    (root / "important.txt").write_text("work")
    (root / "src" / "app.py").write_text("print(1)")
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_export_into_a_user_folder_with_a_model_json_is_refused_and_leaves_it_untouched(
        export_run, user_project, capsys):
    run, archs = export_run
    before = _snapshot(user_project)
    code, text = cli(capsys, "export", "--run", str(run.run_dir), "--device", "cpu-ort", "--subnet",
                     archs[0].id, "--out", str(user_project), "--no-measure")
    lines = [line for line in text.splitlines() if line.strip() and "━" not in line]
    assert code == 2 and "not an intact hwnas bundle" in lines[-1], text
    assert _snapshot(user_project) == before
    assert not list(user_project.parent.glob(".userproj.*"))


def test_a_bundle_with_a_file_export_did_not_write_is_not_replaced(tmp_path, tiny_onnx):
    bundle = _bundle(tmp_path / "bundle", tiny_onnx)
    check_destination(bundle)  # an intact bundle may be replaced
    (bundle / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="notes.txt"):
        check_destination(bundle)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a folder"):
        check_destination(tmp_path / "file")


def _bundle(root: Path, tiny_onnx) -> Path:
    from hwnas.export.manifest import FORMAT, VERSION

    root.mkdir(parents=True)
    tiny_onnx(root / "model.onnx")
    (root / "verify.json").write_text(json.dumps({"status": "verified"}))
    write_manifest(root, {"format": FORMAT, "version": VERSION, "id": "abc", "status": "verified",
                          "accuracy": {"split": "test", "top1": 90.0, "n": 8},
                          "classes": ["a", "b", "c", "d"],
                          "preprocess": {"size": 8, "mean": [0.0] * 3, "std": [1.0] * 3},
                          "onnx": {"file": "model.onnx", "input_shape": [1, 3, 8, 8], "input_dtype": "float32"}})
    return root


_HOLDER = """
import sys, time
from pathlib import Path
from hwnas.export.manifest import staging_dir
stage = staging_dir(Path(sys.argv[1]))
print(stage, flush=True)
time.sleep(60)
"""


def test_a_live_staging_folder_survives_a_cleaner_that_cannot_see_its_process(tmp_path):
    """Export A (another process, as if in another PID namespace: its PID means nothing here) holds
    its staging folder; export B's cleanup must leave it alone, and take it once A is gone."""
    exports = tmp_path / "exports"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(exports / "a-cpu-ort")],
                              stdout=subprocess.PIPE, text=True)
    try:
        stage_a = Path(holder.stdout.readline().strip())
        assert stage_a.is_dir() and str(holder.pid) not in stage_a.name  # no PID in the name
        stage_b = staging_dir(exports / "b-cpu-ort")
        clean_stale(exports)
        assert stage_a.is_dir() and stage_b.is_dir()
    finally:
        holder.kill()
        holder.wait()
    clean_stale(exports)
    assert not stage_a.exists() and stage_b.is_dir()
    assert not list(exports.glob(".a-cpu-ort.*.lock"))
    discard(stage_b)
    assert not any(exports.iterdir())


def test_an_incomplete_staging_folder_is_never_published(tmp_path, tiny_onnx):
    from hwnas.export.manifest import FORMAT, VERSION

    out = tmp_path / "exports" / "x-cpu-ort"
    stage = staging_dir(out)
    tiny_onnx(stage / "model.onnx")
    write_manifest(stage, {"format": FORMAT, "version": VERSION, "id": "x", "status": "verified",
                           "accuracy": {"split": "test", "top1": 90.0, "n": 8}})
    (stage / "model.onnx").unlink()  # e.g. deleted by someone else's cleanup
    with pytest.raises(BundleError, match="model.onnx is missing"):
        publish(stage, out)
    assert not out.exists() and not stage.exists()


def test_load_of_a_file_says_it_is_not_a_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BundleError, match="is a file, not a bundle folder"):
        load(tmp_path / "f", runtime="onnx")


def test_killed_holder_leaves_nothing_after_the_next_cleanup(tmp_path):
    exports = tmp_path / "exports"
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(exports / "k-cpu-ort")],
                            stdout=subprocess.PIPE, text=True)
    stage = Path(proc.stdout.readline().strip())
    os.kill(proc.pid, 9)
    proc.wait()
    assert stage.is_dir()
    clean_stale(exports)
    assert not any(exports.iterdir())
