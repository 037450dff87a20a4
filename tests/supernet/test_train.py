"""`hwnas train`: the whole progressive-shrinking schedule, kill-and-resume, DDP on 2 CPU processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hwnas.families import get_family
from hwnas.supernet.checkpoint import load_checkpoint, load_checkpoint_meta
from hwnas.supernet.ofa_mbv3 import OFAMobileNetV3
from hwnas.supernet.train import build_phases, load_train_config, train_supernet

TINY = ["phases.full.epochs=1", "phases.kernel.epochs=1", "phases.depth.epochs=2",
        "phases.expand.epochs=2", "max_steps_per_epoch=3", "data.batch_size=16", "eval_batches=1",
        "bn_batches=1", "threads=1", "space.r=32:40:4", "checkpoint_every=1"]
ENV = {**os.environ, "HWNAS_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}


def train_cmd(out: Path, *extra: str) -> list[str]:
    args = [sys.executable, "-m", "hwnas", "train", "--out", str(out)]
    for item in [*TINY, *extra]:
        args += ["--set", item]
    return args


def test_schedule_follows_progressive_shrinking():
    cfg = load_train_config(None, ["phases.depth.epochs=4", "phases.expand.epochs=4"])
    phases = build_phases(cfg)
    assert [p.name for p in phases] == ["full", "kernel", "depth-1", "depth-2", "expand-1", "expand-2"]
    full, kernel, d1, d2, e1, e2 = phases
    assert full.space.ks_choices == (7,) and full.space.d_choices == (4,) and not full.distill
    assert kernel.space.ks_choices == (3, 5, 7) and kernel.space.e_choices == (6,) and kernel.distill
    assert d1.space.d_choices == (3, 4) and d2.space.d_choices == (2, 3, 4)
    assert e1.space.e_choices == (4, 6) and e1.sort_channels_first and e2.space.e_choices == (3, 4, 6)


def test_whole_schedule_in_one_call(tmp_path):
    cfg = load_train_config(None, TINY)
    events = []
    summary = train_supernet(cfg, tmp_path, progress=lambda **kw: events.append(kw))
    phases = [rec["phase"] for rec in summary["log"]]
    assert phases == ["full", "kernel", "depth-1", "depth-2", "expand-1", "expand-2"]
    assert any(e["event"] == "step" and "loss" in e for e in events)
    meta = load_checkpoint_meta(tmp_path / "supernet")
    assert meta["extra"]["state"]["done"] and meta["n_classes"] == 10
    model = OFAMobileNetV3(cfg.search_space(), n_classes=10)
    load_checkpoint(tmp_path / "supernet", model)
    # running it again finds the finished run and does no training
    steps = []
    train_supernet(cfg, tmp_path, progress=lambda **kw: steps.append(kw))
    assert not [e for e in steps if e["event"] == "step"]


def _wait_for_checkpoint_at(out: Path, proc: subprocess.Popen, phase_index: int, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "training ended before it could be killed"
        try:
            state = json.loads((out / "supernet.json").read_text())["extra"]["state"]
            if state["phase_index"] >= phase_index and state["step"] >= 1:
                return
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.05)
    raise AssertionError("no mid-phase checkpoint appeared")


@pytest.mark.slow
def test_kill_and_resume_continues_exactly(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    subprocess.run(train_cmd(straight), check=True, env=ENV, capture_output=True, timeout=600)

    proc = subprocess.Popen(train_cmd(killed), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_checkpoint_at(killed, proc, phase_index=2)  # mid depth-1: distilling, after a kill point
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = subprocess.run(train_cmd(killed), env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr

    a = load_file(straight / "supernet.safetensors")
    b = load_file(killed / "supernet.safetensors")
    assert a.keys() == b.keys()
    diff = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert diff == 0.0, f"resumed run differs from the uninterrupted one by {diff}"


def test_bad_checkpoint_and_config_give_one_line(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "supernet.json").write_text('{"format": "something-else"}')
    (out / "supernet.safetensors").write_bytes(b"garbage")
    proc = subprocess.run(train_cmd(out), env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "checkpoint" in proc.stderr and "Traceback" not in proc.stderr
    assert (out / "supernet.safetensors").read_bytes() == b"garbage"  # nothing overwritten

    proc = subprocess.run(train_cmd(tmp_path / "r2", "phases.warp.epochs=1"), env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "unknown phases" in proc.stderr


def test_a_different_config_is_not_resumed_silently(tmp_path):
    cfg = load_train_config(None, [*TINY, "phases.kernel.epochs=0", "phases.depth.epochs=0",
                                   "phases.expand.epochs=0"])
    train_supernet(cfg, tmp_path)
    proc = subprocess.run(train_cmd(tmp_path, "seed=5"), env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "different config" in proc.stderr


@pytest.mark.slow
def test_torchrun_two_cpu_processes(tmp_path):
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "hwnas", "train", "--out", str(out)]
    for item in [*TINY, "phases.depth.epochs=0", "phases.expand.epochs=0"]:
        cmd += ["--set", item]
    # CPU processes on any machine (a GPU machine would give each its own GPU, and NCCL)
    proc = subprocess.run(cmd, env={**ENV, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in log] == ["full", "kernel"]  # rank 0 alone writes the log
    meta = load_checkpoint_meta(out / "supernet")
    assert meta["extra"]["state"]["done"]
    assert (out / "ddp.json").exists()
    info = json.loads((out / "ddp.json").read_text())
    assert info["world_size"] == 2 and info["backend"] == "gloo"


def test_other_families_train_with_their_own_phases(family, tmp_path):
    """`hwnas train --family F` for every family but the default (the tests above): progressive
    shrinking over the phases the family has (`Family.shrink_phases`, e.g. ResNet50: depth, expand,
    width; no kernel), a checkpoint that names its family and loads back."""
    from hwnas.families import DEFAULT_FAMILY
    from hwnas.supernet.pretrained import load_supernet

    if family.name == DEFAULT_FAMILY:
        pytest.skip("the default family's phases are trained by the tests above")
    family = family.name
    cfg = load_train_config(None, [*TINY, f"family={family}", "phases.width={epochs: 2, lr: 0.01}",
                                   "max_steps_per_epoch=1", "data.batch_size=8"])
    phases = build_phases(cfg)
    stems = list(dict.fromkeys(p.name.split("-")[0] for p in phases))
    fam = get_family(family)
    assert stems == ["full", *dict.fromkeys(ph.name for ph in fam.shrink_phases)]
    groups = {g.name: g for g in fam.gene_groups()}
    for ph in fam.shrink_phases:  # a gradual phase of more than two choices: the two largest open first
        if ph.gradual and len(groups[ph.group].choices) > 2:
            assert [f"{ph.name}-1", f"{ph.name}-2"] == [p.name for p in phases if p.name.startswith(ph.name)]
    summary = train_supernet(cfg, tmp_path)
    assert [rec["phase"] for rec in summary["log"]] == [p.name for p in phases for _ in range(p.epochs)]
    assert all(0 <= rec["val_top1_max"] <= 100 for rec in summary["log"])
    model, meta = load_supernet(tmp_path / "supernet")
    assert meta["family"] == family and model.family.name == family and meta["n_classes"] == 10
    sub = model.get_subnet(cfg.search_space().sample(1, 0)[0])
    assert sub(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("gpus, local_rank, expected", [(0, "1", "cpu"), (1, "0", "cuda:0"), (2, "1", "cuda:1"),
                                                        (1, "1", "1 GPU(s)")])
def test_each_process_gets_its_own_gpu_or_one_line(gpus, local_rank, expected, monkeypatch):
    """Found on a 1-GPU machine: torchrun's second process asked CUDA for a GPU that does not exist
    and died with "unexpected error"; it is now refused in one line that says what to do."""
    from hwnas.distributed import process_device
    from hwnas.errors import InputError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    if "GPU" in expected:
        with pytest.raises(InputError, match="--nproc_per_node 1") as err:
            process_device()
        assert expected in str(err.value) and "\n" not in str(err.value)
    else:
        assert str(process_device()) == expected


def test_transfer_may_add_smaller_choices_but_not_change_the_width():
    """Depth 1 runs the first block of each stage: the source's tensors, so a space that adds it
    loads the shipped supernet; another width does not fit and says which to set."""
    from hwnas.errors import InputError
    from hwnas.supernet.pretrained import shipped_checkpoint
    from hwnas.supernet.train import TrainConfig
    from hwnas.supernet.transfer import load_source

    cfg = TrainConfig(init_from="shipped", space={"d": [1, 2, 3, 4], "r": "20:44:4"})
    model = OFAMobileNetV3(cfg.search_space(), n_classes=10)
    names = list(load_checkpoint_meta(shipped_checkpoint())["class_names"])
    assert load_source(cfg, model, names)["classifier"] == "kept"
    assert model.space.d_choices == (1, 2, 3, 4)
    wide = TrainConfig(init_from="shipped", space={"r": "20:44:4", "width_mult": 1.2})
    with pytest.raises(InputError, match="width"):
        load_source(wide, OFAMobileNetV3(wide.search_space(), n_classes=10), names)


def test_random_subnets_are_drawn_gene_by_gene_unless_asked_otherwise():
    from hwnas.supernet.train import TrainConfig

    assert TrainConfig().subnet_sampling == "genes"
    with pytest.raises(ValueError):
        TrainConfig(subnet_sampling="slots")
