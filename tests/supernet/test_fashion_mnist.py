"""Fashion-MNIST: the embedded copy, the original idx files, and every way those files can be wrong."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hwnas.errors import InputError
from hwnas.supernet import fashion_mnist as fm
from hwnas.supernet.data import DataConfig, build_loaders

DEBIAN = Path("/usr/share/datasets/fashion-mnist")


def _write(path: Path, magic: int, dims: list[int], payload: bytes, raw: bool = False) -> None:
    data = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in dims) + payload
    path.write_bytes(data if raw else gzip.compress(data))


def _fake_release(root: Path, n_train: int = 600, n_test: int = 100, seed: int = 0) -> Path:
    """A small folder in the original release's layout (random images, balanced labels)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        _write(root / f"{split}-images-idx3-ubyte.gz", 2051, [n, 28, 28], images.tobytes())
        _write(root / f"{split}-labels-idx1-ubyte.gz", 2049, [n], labels.tobytes())
    return root


@pytest.fixture(scope="module")
def embedded():
    return build_loaders(DataConfig(batch_size=100))


def test_embedded_default_is_fashion_mnist_with_official_test_set_and_held_out_validation(embedded):
    assert embedded.dataset == "fashion-mnist" and embedded.class_names == fm.CLASS_NAMES
    assert (len(embedded.train.dataset), len(embedded.val.dataset), len(embedded.test.dataset)) \
        == (5000, fm.VAL_IMAGES, 10_000)
    assert np.bincount(embedded.val.dataset.labels.numpy()).tolist() == [500] * 10
    assert np.bincount(embedded.test.dataset.labels.numpy()).tolist() == [1000] * 10
    x, _ = next(iter(embedded.val))
    assert x.shape == (100, 3, 28, 28) and abs(float(x.mean())) < 0.2


def test_embedded_copy_ships_its_licence_and_stays_small():
    root = fm.embedded_root()
    assert "Zalando" in (root / "LICENSE").read_text()
    assert sum(p.stat().st_size for p in root.iterdir()) < 10e6


def test_folder_and_embedded_copy_built_from_it_give_the_same_validation_images(tmp_path):
    source = _fake_release(tmp_path / "release")
    fm.write_embedded(source, tmp_path / "embedded", train_images=100, val_images=60)
    full = build_loaders(DataConfig(name="fashion-mnist", root=source, val_images=60))
    arrays = fm.read_embedded(tmp_path / "embedded")
    assert len(arrays.train_images) == 160 and len(full.train.dataset) == 540
    rows = fm.val_rows(arrays.all_train_labels, 60, 0)
    position = np.searchsorted(arrays.train_rows, rows)
    assert np.array_equal(arrays.train_images[position], fm.read_folder(source).train_images[rows])
    assert np.array_equal(full.val.dataset.images[:, 0].numpy(), arrays.train_images[position])


@pytest.mark.skipif(not DEBIAN.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
def test_embedded_copy_matches_the_original_release():
    full = build_loaders(DataConfig.from_spec(f"fashion-mnist:{DEBIAN}"))
    mine = build_loaders(DataConfig.from_spec("fashion-mnist"))
    assert len(full.train.dataset) == 55_000
    for split in ("val", "test"):
        a, b = getattr(full, split).dataset, getattr(mine, split).dataset
        assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)


@pytest.mark.parametrize("damage, message", [
    ("missing", "is missing"),
    ("truncated", "is truncated"),
    ("magic", "not an idx file of images"),
    ("count", "60 labels"),
    ("folder", "is missing"),
    ("garbage", "is damaged"),
    ("label", "labels are 0..9"),
])
def test_a_damaged_release_file_is_one_line_naming_it(tmp_path, damage, message):
    root = _fake_release(tmp_path / "release", n_train=50)
    images = root / fm.FILES["train_images"]
    if damage == "missing":
        images.unlink()
    elif damage == "truncated":
        images.write_bytes(gzip.compress(gzip.decompress(images.read_bytes())[:-100]))
    elif damage == "magic":
        _write(images, 2049, [50, 28, 28], bytes(50 * 784))
    elif damage == "count":
        _write(root / fm.FILES["train_labels"], 2049, [60], bytes(60))
    elif damage == "folder":
        images.unlink()
        images.mkdir()
    elif damage == "garbage":
        images.write_bytes(b"\x1f\x8b" + b"not gzip at all")
    elif damage == "label":
        _write(root / fm.FILES["train_labels"], 2049, [50], bytes([12] * 50))
    with pytest.raises(InputError, match=message) as err:
        build_loaders(DataConfig(name="fashion-mnist", root=root, val_images=10))
    assert "\n" not in str(err.value)
    if damage != "count":
        assert fm.FILES["train_images" if damage not in ("label",) else "train_labels"] in str(err.value)


def test_the_cli_says_one_line_and_exits_2_for_a_folder_without_the_files(tmp_path):
    (tmp_path / "empty").mkdir()
    for spec, message in ((f"fashion-mnist:{tmp_path / 'empty'}", "train-images-idx3-ubyte.gz is missing"),
                          (f"fashion-mnist:{tmp_path / 'nowhere'}", "does not exist")):
        proc = subprocess.run([sys.executable, "-m", "hwnas", "supernet", "eval", "--data", spec,
                               "--arch", json.dumps({"ks": [3] * 20, "e": [3] * 20, "d": [2] * 5, "r": 32})],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr


def test_embedded_copy_refuses_a_split_it_does_not_hold():
    with pytest.raises(InputError, match="fashion-mnist:PATH"):
        build_loaders(DataConfig(seed=3))


def test_a_copy_of_the_embedded_folder_with_a_broken_manifest_is_one_line(tmp_path):
    shutil.copytree(fm.embedded_root(), tmp_path / "copy")
    (tmp_path / "copy" / "manifest.json").write_text("{")
    with pytest.raises(InputError, match="damaged"):
        fm.read_embedded(tmp_path / "copy")


def test_augmentation_is_the_training_loops_and_seeded(embedded):
    """Datasets yield clean images (calibration and evaluation see the same pixels each time);
    training batches are flipped and shifted from a seeded generator."""
    ds = embedded.train.dataset
    assert torch.equal(ds[0][0], ds[0][0])
    x = torch.stack([ds[i][0] for i in range(16)])
    a = embedded.augment(x, torch.Generator().manual_seed(1))
    b = embedded.augment(x, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, x) and a.shape == x.shape
    background = embedded.augment.background[0]
    shifted = embedded.augment(torch.full((4, 3, 28, 28), 5.0), torch.Generator().manual_seed(2))
    assert all(v == 5.0 or abs(v - background) < 1e-6 for v in shifted.unique().tolist())
    mnist = build_loaders(DataConfig(name="mnist-embedded"))
    assert not mnist.augment.flip and mnist.augment.shift == 2  # digits are shifted, never flipped
