"""`train_alone`: one network trained by itself (fine-tuning, the from-scratch baseline), resumable
after every epoch to the same weights as an uninterrupted run."""

from __future__ import annotations

import pytest
import torch

from hwnas.errors import CheckpointError
from hwnas.space import SearchSpace
from hwnas.supernet.data import DataConfig, build_loaders
from hwnas.supernet.finetune import FinetuneSettings, train_alone
from hwnas.supernet.ofa_mbv3 import MobileNetV3Subnet
from tests.imported_ofa import make_image_folder

SETTINGS = FinetuneSettings(epochs=2, lr=0.05, batch_size=4, kd_ratio=0.0, warmup_epochs=0.5, seed=3)


@pytest.fixture(scope="module")
def loaders(tmp_path_factory):
    root = make_image_folder(tmp_path_factory.mktemp("images"), {"train": 6, "val": 2}, ["a", "b"], size=24)
    return build_loaders(DataConfig(name="imagefolder", root=root, batch_size=4, image_size=24))


def _net() -> MobileNetV3Subnet:
    torch.manual_seed(0)
    return MobileNetV3Subnet(SearchSpace(r_choices=(24,)).min_arch(), n_classes=2)


class Stop(Exception):
    pass


def test_a_stopped_run_resumes_to_the_same_weights(loaders, tmp_path):
    whole = train_alone(_net(), loaders, 24, SETTINGS)

    def stop_in_second_epoch(step, steps, text):
        if text.startswith("epoch 2/"):
            raise Stop

    with pytest.raises(Stop):
        train_alone(_net(), loaders, 24, SETTINGS, progress=stop_in_second_epoch, resume=tmp_path / "net")
    resumed = train_alone(_net(), loaders, 24, SETTINGS, resume=tmp_path / "net")
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    from hwnas.supernet.checkpoint import load_checkpoint_meta

    assert load_checkpoint_meta(tmp_path / "net")["family"] is None  # a network of no family says so


def test_other_settings_do_not_resume_a_saved_run(loaders, tmp_path):
    train_alone(_net(), loaders, 24, SETTINGS, resume=tmp_path / "net")
    with pytest.raises(CheckpointError, match="another training"):
        train_alone(_net(), loaders, 24, FinetuneSettings(epochs=3, batch_size=4), resume=tmp_path / "net")


def test_warm_up_must_end_before_the_last_epoch():
    with pytest.raises(Exception, match="warmup_epochs"):
        FinetuneSettings(epochs=2, warmup_epochs=2)


def test_a_loader_of_other_batches_is_refused(loaders):
    from hwnas.errors import InputError

    with pytest.raises(InputError, match="batches of 3"):
        train_alone(_net(), loaders, 24, FinetuneSettings(epochs=1, batch_size=3))


@pytest.mark.gpu
def test_trains_where_the_student_is_and_resumes_anywhere(loaders, tmp_path):
    """On a GPU: the student trains there (its CPU teacher is moved to it), and what it saved after
    every epoch loads back on the CPU."""
    from dataclasses import replace

    settings = replace(SETTINGS, kd_ratio=1.0)
    start = _net()
    student = train_alone(_net().cuda(), loaders, 24, settings, teacher=_net(), resume=tmp_path / "net")
    assert next(student.parameters()).is_cuda
    trained = {k: v.cpu() for k, v in student.state_dict().items()}
    assert any(not torch.equal(trained[k], v) for k, v in start.state_dict().items())
    assert all(torch.isfinite(v.float()).all() for v in trained.values())
    finished = train_alone(_net(), loaders, 24, settings, teacher=_net(), resume=tmp_path / "net")
    for name, value in finished.state_dict().items():
        assert torch.equal(value, trained[name]), name
