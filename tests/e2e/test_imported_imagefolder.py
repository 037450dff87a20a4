"""The whole pipeline on an imported Once-for-All supernet and an ImageNet-style image folder.

A checkpoint in Once-for-All's published format (``{"state_dict": ...}``, random weights) is imported
with `hwnas supernet import --from-ofa`; a tiny synthetic image folder (train/ and val/ with class
subfolders named as three of its 1000 classes) is the dataset. Then, exactly as a user would with
ImageNet: profile with ``--data imagefolder:PATH``, fit latency, build and fit accuracy, search
with verification (latency and accuracy measured), export with verification. The accuracy of random
weights means nothing; that every stage runs on this kind of run, and checks it, is the point.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

import imported_ofa
from cli_calls import cli, export_verified

pytestmark = pytest.mark.slow

CLASSES = ("3", "141", "977")  # a subset of the imported supernet's class names "0".."999"


def make_image_folder(root: Path, per_class: dict[str, int], seed: int = 0) -> Path:
    return imported_ofa.make_image_folder(root, per_class, CLASSES, seed)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """An OFA-MobileNetV3 w1.0 checkpoint in Once-for-All's format, imported into hwnas."""
    return imported_ofa.import_random_ofa(tmp_path_factory.mktemp("ofa"))


def test_pipeline_runs_on_an_imported_supernet_with_an_image_folder(imported, tmp_path, capsys):
    data = make_image_folder(tmp_path / "images", {"train": 12, "val": 4})
    run = tmp_path / "run"
    code, out = cli(capsys, "profile", "--run", str(run), "--supernet", str(imported), "--data",
                    f"imagefolder:{data}", "--device", "cpu-ort", "--samples", "10", "--rounds", "3",
                    "--runs", "3")
    assert code == 0, out
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["data"]["name"] == "imagefolder" and Path(config["data"]["root"]) == data.resolve()

    code, out = cli(capsys, "latency", "fit", "--run", str(run), "--device", "cpu-ort")
    assert code == 0, out
    code, out = cli(capsys, "accuracy", "build", "--run", str(run), "--samples", "20")
    assert code == 0, out
    table = pd.read_csv(run / "accuracy.csv")
    assert len(table) == 20 and table["top1"].between(0, 100).all()

    ms = pd.read_parquet(run / "measurements.parquet")
    budget = float(ms.loc[ms["kind"] == "subnet", "corrected_ms"].max()) * 2
    code, out = cli(capsys, "search", "--run", str(run), "--device", "cpu-ort", "--latency-ms",
                    f"{budget:.3f}", "--population", "16", "--generations", "3", "--top-k", "1",
                    "--accuracy-samples", "20")
    assert code == 0, out
    pareto = pd.read_csv(run / "pareto.csv")
    returned = pareto[pareto["selected"]]  # measured on the device, then evaluated on the test split
    assert len(returned) >= 1 and returned["measured_ms"].notna().all() and returned["measured_top1"].notna().all()
    # verification measured top-1 on the test split: val/ (3 classes x 4 images)
    test = pd.read_csv(run / "accuracy-test.csv")
    assert set(returned["id"]) <= set(test["id"])

    subnet = str(returned["id"].iloc[0])
    export_verified(capsys, run, subnet, tmp_path / "bundle")
    # every other backend this machine has (the imported subnet is 224-capable, full-size)
    from hwnas.devices import get_device

    for name in ("cpu-torch", "cpu-openvino", "mobile-xnnpack"):
        if get_device(name).available() is not None:
            continue
        export_verified(capsys, run, subnet, tmp_path / f"bundle-{name}", name, "--no-measure")


def test_a_folder_that_does_not_match_the_classifier_is_one_line(imported, tmp_path, capsys):
    """Folders named unlike the supernet's classes, and not 1000 of them: labels would not line up
    with the classifier's outputs, so it is refused before anything is evaluated."""
    root = tmp_path / "images"
    for split in ("train", "val"):
        for name in ("cat", "dog"):
            (root / split / name).mkdir(parents=True)
            from PIL import Image

            Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(root / split / name / "0.png")
    arch = json.dumps({"ks": [3] * 20, "e": [3] * 20, "d": [2] * 5, "r": [128]})
    code, out = cli(capsys, "supernet", "eval", "--checkpoint", str(imported), "--arch", arch,
                    "--data", f"imagefolder:{root}")
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "2 classes" in lines[0] and "1000" in lines[0], lines


@pytest.mark.parametrize("spec, expected", [
    ("imagenet:/x", "unknown dataset 'imagenet'"),
    ("imagefolder", "needs a folder"),
    ("imagefolder:/no/such/folder", "does not exist"),
])
def test_bad_data_specs_are_one_line(spec, expected, tmp_path, capsys):
    code, out = cli(capsys, "accuracy", "build", "--run", str(tmp_path / "run"), "--data", spec)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and expected in lines[0], lines
    assert not (tmp_path / "run").exists()
