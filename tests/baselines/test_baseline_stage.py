"""`hwnas baseline`: a timm model trained alone on a run's data, stored in the run, timed on a device;
the shipped accuracies for the embedded default."""

from __future__ import annotations

import json

import pytest
from cli_calls import cli

pytest.importorskip("timm")


def test_a_baseline_trains_resumes_is_stored_and_timed(tmp_path, tiny_supernet, capsys):
    from hwnas.baselines import run_baselines
    from hwnas.profiling.store import read_measurements
    from hwnas.run import open_run

    run = open_run(tmp_path / "run", tiny_supernet)
    args = ["baseline", "--run", str(run.run_dir), "--model", "timm:lcnet_050", "--epochs", "1",
            "--resolution", "32"]
    code, text = cli(capsys, *args, "--device", "cpu-ort")
    assert code == 0, text
    record = json.loads((run.files.baselines / "lcnet_050-r32.json").read_text())
    assert record["epochs"] == 1 and record["n_test"] == 500 and 0 <= record["top1"] <= 100
    assert record["recipe"]["lr"] == 0.1 and record["train_images"] == 4000
    assert not list(run.files.baselines.glob(".*"))  # the training state is gone once published
    assert [r["name"] for r in run_baselines(run)] == ["lcnet_050"]  # a run of its own supernet: no shipped rows
    timed = read_measurements(run.run_dir, kind="model")
    assert list(timed["key"]) == ["timm:lcnet_050@r32"] and float(timed["corrected_ms"].iloc[0]) > 0
    assert "lcnet_050" in text and "cpu-ort" in text


@pytest.mark.parametrize("args,message", [
    (["--model", "resnet18"], "must look like timm:MODEL_NAME"),
    (["--model", "timm:not_a_model_at_all"], "timm has no model"),
    (["--model", "timm:lcnet_050", "--epochs", "0"], "--epochs"),
    (["--model", "timm:lcnet_050", "--device", "no-such-device"], "unknown device"),
])
def test_bad_baseline_input_is_one_line(tmp_path, tiny_supernet, capsys, args, message):
    from hwnas.run import open_run

    run = open_run(tmp_path / "run", tiny_supernet)
    code, text = cli(capsys, "baseline", "--run", str(run.run_dir), *args)
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and message in lines[0], text
    assert not run.files.baselines.exists()


def test_the_shipped_accuracies_stand_for_the_embedded_default(tmp_path):
    from hwnas.baselines import run_baselines, shipped_baselines
    from hwnas.run import open_run

    shipped = shipped_baselines()
    assert shipped, "hwnas/assets/baselines/fashion-mnist.json ships baseline accuracies"
    for row in shipped:
        assert row["n_test"] == 10_000 and row["epochs"] >= 30 and 50 < row["top1"] < 100
    run = open_run(tmp_path / "run")
    assert [(r["name"], r["resolution"]) for r in run_baselines(run)] == [(r["name"], r["resolution"]) for r in shipped]
