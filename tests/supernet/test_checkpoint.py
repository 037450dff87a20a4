from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from torch import nn

from hwnas.errors import CheckpointError, InputError
from hwnas.space import SearchSpace
from hwnas.supernet.checkpoint import (checkpoint_exists, checkpoint_paths, load_checkpoint,
                                       load_checkpoint_meta, save_checkpoint)

SPACE = SearchSpace(r_choices=(24, 28, 32))
META = {"space": SPACE, "n_classes": 4, "dataset": "mnist-embedded", "class_names": list("abcd"),
        "mean": [0.1, 0.1, 0.1], "std": [0.3, 0.3, 0.3], "phase": "kernel", "step": 7, "epoch": 2,
        "extra": {"note": "unit test"}}


def mlp(hidden: int = 16) -> nn.Module:
    """BatchNorm buffers, dropout (consumes RNG) and two layers: enough to exercise the format."""
    return nn.Sequential(nn.Linear(8, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(hidden, 4))


def train_steps(model: nn.Module, opt: torch.optim.Optimizer, sched, n: int) -> None:
    """Steps whose data draws on the torch, numpy and python RNGs, as a real loop might."""
    model.train()
    for _ in range(n):
        x = torch.randn(16, 8) * (1 + random.random()) + float(np.random.rand())
        y = torch.randint(0, 4, (16,))
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()


def make_training(seed: int):
    torch.manual_seed(seed)
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    return model, opt, torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def test_round_trip_gives_identical_tensors_and_the_metadata(tmp_path):
    model, opt, sched = make_training(0)
    train_steps(model, opt, sched, 2)
    json_path = save_checkpoint(tmp_path / "supernet", model, META)
    paths = checkpoint_paths(tmp_path / "supernet")
    assert json_path == paths.meta and paths.weights.is_file() and checkpoint_exists(tmp_path / "supernet")

    fresh = mlp()
    meta = load_checkpoint(tmp_path / "supernet.json", fresh)  # an extension is tolerated
    for (k, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert torch.equal(a, b), k
    assert meta["format"] == "hwnas-supernet" and meta["version"] == 1
    assert SearchSpace.from_dict(meta["space"]) == SPACE
    assert (meta["n_classes"], meta["dataset"], meta["class_names"]) == (4, "mnist-embedded", list("abcd"))
    assert (meta["phase"], meta["step"], meta["epoch"], meta["extra"]) == ("kernel", 7, 2, {"note": "unit test"})
    assert meta["mean"] == [0.1] * 3 and meta["weights"]["dtype"] == "float32"
    assert load_checkpoint_meta(tmp_path / "supernet") == json.loads(paths.meta.read_text())


def test_resumed_training_continues_exactly_like_uninterrupted_training(tmp_path):
    seed_all(1)
    model, opt, sched = make_training(1)
    train_steps(model, opt, sched, 2)
    save_checkpoint(tmp_path / "ckpt", model, META, optimizer=opt, scheduler=sched, rng=True)
    train_steps(model, opt, sched, 2)  # steps 3 and 4 straight through (LR halves after step 3)

    seed_all(99)  # a new process: other seeds, other init
    resumed, opt2, sched2 = make_training(99)
    load_checkpoint(tmp_path / "ckpt", resumed, optimizer=opt2, scheduler=sched2, restore_rng=True)
    train_steps(resumed, opt2, sched2, 2)

    for (k, a), (_, b) in zip(model.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k
    assert sched2.get_last_lr() == sched.get_last_lr() == [5e-3]
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"] == 4


def test_float16_storage_halves_the_file_and_loads_into_float32(tmp_path):
    torch.manual_seed(2)
    model = mlp(1024)  # big enough that the header does not dominate the file size
    with torch.no_grad():
        model[0].bias[0] = 1e6  # beyond float16's range: must survive unchanged
    save_checkpoint(tmp_path / "fp32", model, META, rng=False)
    save_checkpoint(tmp_path / "fp16", model, META, rng=False, dtype="float16")
    size32, size16 = (checkpoint_paths(tmp_path / n).weights.stat().st_size for n in ("fp32", "fp16"))
    assert size16 < 0.6 * size32
    with safe_open(checkpoint_paths(tmp_path / "fp16").weights, "pt") as f:
        assert f.get_slice("0.weight").get_dtype() == "F16"
        assert f.get_slice("0.bias").get_dtype() == "F32"

    fresh = mlp(1024)
    meta = load_checkpoint(tmp_path / "fp16", fresh)
    assert meta["weights"]["dtype"] == "float16"
    assert all(p.dtype == torch.float32 for p in fresh.parameters())
    assert torch.equal(fresh[0].weight, model[0].weight.half().float())
    assert float(fresh[0].bias.detach()[0]) == 1e6
    assert torch.allclose(fresh[4].weight, model[4].weight, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("damage, message", [
    (lambda data: b"\x00garbage bytes\xff" * 50, "corrupt: not a valid safetensors file"),
    (lambda data: data[: len(data) // 2], "corrupt: not a valid safetensors file"),
])
def test_damaged_weights_file_is_a_clear_error(tmp_path, damage, message):
    save_checkpoint(tmp_path / "c", mlp(), META, rng=False)
    weights = checkpoint_paths(tmp_path / "c").weights
    weights.write_bytes(damage(weights.read_bytes()))
    with pytest.raises(CheckpointError, match=message) as err:
        load_checkpoint(tmp_path / "c", mlp())
    assert "\n" not in str(err.value)


def test_weights_from_another_save_do_not_pass_as_this_checkpoint(tmp_path):
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "a", mlp(), META, rng=False)
    save_checkpoint(tmp_path / "b", mlp(), META, rng=False)
    checkpoint_paths(tmp_path / "a").weights.write_bytes(checkpoint_paths(tmp_path / "b").weights.read_bytes())
    with pytest.raises(CheckpointError, match="does not match a.json"):
        load_checkpoint(tmp_path / "a", mlp())


def test_foreign_json_is_not_an_hwnas_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "c", mlp(), META, rng=False)
    checkpoint_paths(tmp_path / "c").meta.write_text(json.dumps({"format": "timm", "arch": "resnet"}))
    with pytest.raises(CheckpointError, match="not an hwnas supernet checkpoint"):
        load_checkpoint(tmp_path / "c", mlp())
    checkpoint_paths(tmp_path / "c").meta.write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint_meta(tmp_path / "c")


def test_a_different_network_is_named_with_the_offending_tensor(tmp_path):
    save_checkpoint(tmp_path / "c", mlp(16), META, rng=False)
    with pytest.raises(CheckpointError, match=r"different network: .*0\.weight is \[16, 8\] in the "
                                              r"checkpoint but \[32, 8\] in the model") as err:
        load_checkpoint(tmp_path / "c", mlp(32))
    assert "n_classes=4" in str(err.value)
    with pytest.raises(CheckpointError, match=r"different network: 2 unexpected, e.g. 4\.bias"):
        load_checkpoint(tmp_path / "c", mlp(16)[:3])


def test_missing_or_incomplete_checkpoints_say_so(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nothing", mlp())
    save_checkpoint(tmp_path / "c", mlp(), META, rng=False)
    checkpoint_paths(tmp_path / "c").meta.unlink()
    assert not checkpoint_exists(tmp_path / "c")
    with pytest.raises(CheckpointError, match="incomplete.*interrupted save"):
        load_checkpoint_meta(tmp_path / "c")


def test_resume_from_a_checkpoint_without_training_state_is_refused(tmp_path):
    model, opt, sched = make_training(0)
    save_checkpoint(tmp_path / "c", model, META, optimizer=opt, rng=True)
    save_checkpoint(tmp_path / "c", model, META, rng=False)  # overwrite: weights only
    assert not checkpoint_paths(tmp_path / "c").state_meta.exists()
    load_checkpoint(tmp_path / "c", mlp())  # weights alone load fine
    with pytest.raises(CheckpointError, match="has no optimizer state"):
        load_checkpoint(tmp_path / "c", mlp(), optimizer=opt)


def test_unsaveable_metadata_fails_before_touching_the_existing_checkpoint(tmp_path):
    model = mlp()
    save_checkpoint(tmp_path / "c", model, META, rng=False)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(InputError, match="invalid checkpoint metadata"):
        save_checkpoint(tmp_path / "c", mlp(), {**META, "extra": {"fn": object()}}, rng=False)
    with pytest.raises(InputError, match="invalid checkpoint metadata: n_clases"):
        save_checkpoint(tmp_path / "c", mlp(), {"n_clases": 4}, rng=False)
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before
    load_checkpoint(tmp_path / "c", mlp())


def test_training_state_is_json_and_safetensors_only(tmp_path):
    model, opt, sched = make_training(0)
    train_steps(model, opt, sched, 1)
    save_checkpoint(tmp_path / "c", model, META, optimizer=opt, scheduler=sched, rng=True)
    paths = checkpoint_paths(tmp_path / "c")
    state = json.loads(paths.state_meta.read_text())
    assert state["format"] == "hwnas-supernet-state"
    assert state["tree"]["rng"]["python"]["__tuple__"][0] == 3  # random.getstate() as JSON
    with safe_open(paths.state_weights, "pt") as f:
        names = set(f.keys())
    assert {"rng/torch", "rng/numpy/1", "optimizer/state/0/exp_avg"} <= names
    assert sorted(load_checkpoint_meta(tmp_path / "c")["training_state"]["contains"]) == \
        ["optimizer", "rng", "scheduler"]
