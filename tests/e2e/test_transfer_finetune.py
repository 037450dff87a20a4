"""Own data, end to end: an imported official Once-for-All checkpoint (random weights) transferred to a
generated image folder with another number of classes (`hwnas train --init-from`), then profiled,
searched, one subnet fine-tuned (`hwnas finetune`) and exported: the bundle ships the fine-tuned
weights and says so. Bad inputs of the new commands are one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import imported_ofa
from cli_calls import cli, export_verified

pytestmark = pytest.mark.slow

CLASSES = ("bolt", "nut", "gear", "spring")  # 4 classes: not the source's 1000
TINY = ["--set", "max_steps_per_epoch=2", "--set", "phases.full.epochs=1", "--set", "phases.elastic.epochs=1",
        "--set", "space.r=32:40:8", "--set", "data.batch_size=8", "--set", "data.image_size=40",
        "--set", "eval_batches=1", "--set", "bn_batches=1", "--set", "threads=1"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    return imported_ofa.import_random_ofa(tmp_path_factory.mktemp("ofa"))


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    return imported_ofa.make_image_folder(tmp_path_factory.mktemp("images"), {"train": 10, "val": 4}, CLASSES)


def test_imported_supernet_transferred_searched_finetuned_and_exported(imported, images, tmp_path, capsys):
    out = tmp_path / "transfer"
    code, text = cli(capsys, "train", "--init-from", str(imported), "--data", f"imagefolder:{images}",
                     "--out", str(out), *TINY)
    assert code == 0, text
    meta = json.loads((out / "supernet.json").read_text())
    source = json.loads(Path(f"{imported}.json").read_text())
    transfer = meta["extra"]["transfer"]
    assert meta["n_classes"] == 4 and meta["class_names"] == sorted(CLASSES)
    assert transfer["source_sha256"] == source["weights"]["sha256"] and transfer["classifier"] == "new"
    assert transfer["source_classes"] == 1000 and meta["dataset"] == "imagefolder"
    assert meta["space"]["r"] == [32, 40] and meta["space"]["ks"] == [3, 5, 7]

    run = tmp_path / "run"
    code, text = cli(capsys, "profile", "--run", str(run), "--supernet", str(out / "supernet"),
                     "--device", "cpu-ort", "--samples", "6", "--rounds", "3", "--runs", "3")
    assert code == 0, text
    assert cli(capsys, "latency", "fit", "--run", str(run), "--device", "cpu-ort")[0] == 0
    assert cli(capsys, "accuracy", "build", "--run", str(run), "--samples", "20")[0] == 0
    ms = pd.read_parquet(run / "measurements.parquet")
    budget = float(ms.loc[ms["kind"] == "subnet", "corrected_ms"].max()) * 2
    code, text = cli(capsys, "search", "--run", str(run), "--device", "cpu-ort", "--latency-ms",
                     f"{budget:.3f}", "--population", "8", "--generations", "2", "--top-k", "1",
                     "--accuracy-samples", "20")
    assert code == 0, text
    subnet = str(pd.read_csv(run / "pareto.csv").dropna(subset=["measured_ms"])["id"].iloc[0])

    code, text = cli(capsys, "finetune", "--run", str(run), "--subnet", subnet, "--epochs", "1")
    assert code == 0, text
    record = json.loads((run / "finetuned" / subnet / "subnet.json").read_text())["extra"]["finetune"]
    assert record["epochs"] == 1 and set(record["top1_after"]) == {"val", "test"}

    meta = export_verified(capsys, run, subnet, tmp_path / "bundle")
    assert meta["finetuned"]["epochs"] == 1
    assert meta["finetuned"]["top1_after"]["test"] == pytest.approx(meta["accuracy"]["top1"], abs=1e-6)
    verify = json.loads((tmp_path / "bundle" / "verify.json").read_text())
    assert verify["weights"]["source"] == "finetuned"

    # weights edited after fine-tuning are refused by their checksum, in one line
    weights = run / "finetuned" / subnet / "subnet.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    code, text = cli(capsys, "export", "--run", str(run), "--device", "cpu-ort", "--subnet", subnet,
                     "--out", str(tmp_path / "bundle2"), "--no-measure")
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2 and "sha256" in lines[-1], text
    assert not (tmp_path / "bundle2").exists()


def _one_line(capsys, *args: str) -> str:
    code, text = cli(capsys, *args)
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, text
    return lines[0]


def test_bad_transfer_and_finetune_inputs_are_one_line(imported, images, family_supernet, tmp_path, capsys):
    proxyless = family_supernet("ofa-proxyless")
    line = _one_line(capsys, "train", "--init-from", str(proxyless), "--family", "ofa-mbv3", "--data",
                     f"imagefolder:{images}", "--out", str(tmp_path / "a"), *TINY)
    assert "ofa-proxyless" in line
    empty = tmp_path / "empty"
    for name in CLASSES:
        (empty / "train" / name).mkdir(parents=True)
    line = _one_line(capsys, "train", "--init-from", str(imported), "--data", f"imagefolder:{empty}",
                     "--out", str(tmp_path / "b"), *TINY)
    assert "no usable images" in line or "no training images" in line
    one = imported_ofa.make_image_folder(tmp_path / "one", {"train": 4}, ("only",))
    line = _one_line(capsys, "train", "--init-from", str(imported), "--data", f"imagefolder:{one}",
                     "--out", str(tmp_path / "c"), *TINY)
    assert "at least 2" in line
    line = _one_line(capsys, "train", "--init-from", str(tmp_path / "nowhere"), "--out", str(tmp_path / "d"))
    assert "does not exist" in line

    run = tmp_path / "run"
    from hwnas.run import open_run

    open_run(run, supernet=imported)
    arch = json.dumps({"ks": [3] * 20, "e": [3] * 20, "d": [2] * 5, "r": 128})
    assert "at least 1 epoch" in _one_line(capsys, "finetune", "--run", str(run), "--subnet", arch,
                                           "--epochs", "0")
    assert "not in run" in _one_line(capsys, "finetune", "--run", str(run), "--subnet", "abcdef123456")
