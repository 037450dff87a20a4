"""Stored soft labels (`distill: stored`): the pair's checks, and training distils from the
logits of the very images in each batch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hwnas.errors import CheckpointError, ConfigError, InputError
from hwnas.supernet import train as train_mod
from hwnas.supernet.data import build_loaders
from hwnas.supernet.soft_labels import load_soft_labels, save_soft_labels
from hwnas.supernet.train import load_train_config, train_supernet

TINY = ["phases.full.epochs=1", "phases.elastic={epochs: 1, lr: 0.01}", "max_steps_per_epoch=3",
        "data.batch_size=16", "eval_batches=1", "bn_batches=1", "threads=1", "space.r=32:40:4"]


def _pair(tmp_path, indices=(5, 2, 9), labels=(1, 0, 3), dataset="mnist-embedded"):
    logits = torch.arange(len(indices) * 4, dtype=torch.float32).view(len(indices), 4)
    save_soft_labels(tmp_path / "soft", logits, np.array(indices), torch.tensor(labels), dataset, "test")
    return logits


def test_round_trip_looks_logits_up_by_original_position(tmp_path):
    logits = _pair(tmp_path)
    soft = load_soft_labels(tmp_path / "soft", "mnist-embedded", np.array([2, 9]), [0, 3], n_classes=4)
    assert torch.equal(soft.for_indices([9, 2, 5]), logits[[2, 1, 0]])
    assert soft.source == "test"
    # the JSON or the safetensors path names the same pair
    assert torch.equal(load_soft_labels(tmp_path / "soft.json", "mnist-embedded", np.array([5]), [1], 4)
                       .for_indices([5]), logits[:1])


def test_a_stem_with_a_dot_keeps_it(tmp_path):
    logits = torch.ones(1, 4)
    save_soft_labels(tmp_path / "soft.v2", logits, np.array([0]), torch.tensor([1]), "mnist-embedded", "test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["soft.v2.json", "soft.v2.safetensors"]
    assert torch.equal(load_soft_labels(tmp_path / "soft.v2", "mnist-embedded", np.array([0]), [1], 4)
                       .for_indices([0]), logits)


@pytest.mark.parametrize("change, message", [
    (lambda p: (p / "soft.json").unlink(), "does not exist"),
    (lambda p: (p / "soft.safetensors").write_bytes(b"x" + (p / "soft.safetensors").read_bytes()), "sha256"),
    (lambda p: (p / "soft.json").write_text("{"), "is not JSON"),
    (lambda p: (p / "soft.json").write_text(json.dumps({"format": "other"})), "not a soft-label file"),
])
def test_a_missing_or_damaged_pair_is_one_line(tmp_path, change, message):
    _pair(tmp_path)
    change(tmp_path)
    with pytest.raises(InputError, match=message) as err:
        load_soft_labels(tmp_path / "soft", "mnist-embedded", np.array([2]), [0], 4)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"dataset": "fashion-mnist"}, "dataset 'mnist-embedded'"),
    ({"n_classes": 10}, "4 classes"),
    ({"train_indices": np.array([2, 7])}, "no logits for 1 of the 2"),
    ({"train_labels": [1, 3]}, "labels .* differ"),
])
def test_soft_labels_of_another_split_are_refused(tmp_path, kwargs, message):
    _pair(tmp_path)
    args = {"dataset": "mnist-embedded", "train_indices": np.array([2, 9]), "train_labels": [0, 3],
            "n_classes": 4, **kwargs}
    with pytest.raises(InputError, match=message):
        load_soft_labels(tmp_path / "soft", **args)


def test_config_needs_soft_labels_with_stored_and_only_then():
    with pytest.raises(ConfigError, match="distill: stored needs soft_labels"):
        load_train_config(None, ["distill=stored"])
    with pytest.raises(ConfigError, match="only read with distill: stored"):
        load_train_config(None, ["distill=inplace", "soft_labels=x"])


def test_training_distils_every_subnet_from_the_batch_images_own_logits(tmp_path, monkeypatch):
    cfg = load_train_config(None, [*TINY, "distill=stored", f"soft_labels={tmp_path / 'soft'}"])
    loaders = build_loaders(cfg.data)
    train = loaders.train.dataset
    labels = torch.as_tensor(train.labels)
    # the "teacher" is sure of each image's own label: a batch's soft labels then match its labels
    save_soft_labels(tmp_path / "soft", 5.0 * torch.eye(10)[labels], train.indices, labels,
                     loaders.dataset, "test")
    targets, teachers = [], []
    real_ce, real_kd = torch.nn.functional.cross_entropy, train_mod.kd_loss
    monkeypatch.setattr(torch.nn.functional, "cross_entropy",
                        lambda logits, y, **kw: targets.append(y) or real_ce(logits, y, **kw))
    monkeypatch.setattr(train_mod, "kd_loss",
                        lambda student, teacher: teachers.append((targets[-1], teacher)) or real_kd(student, teacher))
    summary = train_supernet(cfg, tmp_path / "run")
    assert [rec["phase"] for rec in summary["log"]] == ["full", "elastic"]
    # 3 elastic steps x (the largest, the smallest, another): the largest learns from them too
    assert len(teachers) == 3 * cfg.subnets_per_step
    for y, teacher in teachers:
        assert torch.equal(teacher.argmax(1), y) and set(teacher.unique().tolist()) == {0.0, 5.0}


def test_training_refuses_soft_labels_of_another_dataset(tmp_path):
    _pair(tmp_path, dataset="cifar10")
    cfg = load_train_config(None, [*TINY, "distill=stored", f"soft_labels={tmp_path / 'soft'}"])
    with pytest.raises(InputError, match="dataset 'cifar10'"):
        train_supernet(cfg, tmp_path / "run")


def test_resuming_on_other_soft_labels_is_refused(tmp_path):
    """The same stem rewritten (the teacher retrained) would mix two teachers in one run."""
    cfg = load_train_config(None, [*TINY, "distill=stored", f"soft_labels={tmp_path / 'soft'}"])
    loaders = build_loaders(cfg.data)
    train = loaders.train.dataset
    labels = torch.as_tensor(train.labels)

    def write(scale: float) -> None:
        save_soft_labels(tmp_path / "soft", scale * torch.eye(10)[labels], train.indices, labels,
                         loaders.dataset, "test")

    write(5.0)
    train_supernet(cfg, tmp_path / "run")
    train_supernet(cfg, tmp_path / "run")  # the same logits: the finished run reopens
    write(3.0)
    with pytest.raises(CheckpointError, match="other soft labels"):
        train_supernet(cfg, tmp_path / "run")
