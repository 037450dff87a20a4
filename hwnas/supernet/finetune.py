"""Fine-tune one subnet alone, as Once-for-All fine-tunes its specialised networks.

The subnet starts from the supernet's shared weights and trains on the run's training images at its
own resolution, with cross-entropy on the labels plus distillation from the supernet's largest subnet
(frozen, at the same resolution). BatchNorm is recalibrated afterwards exactly as every other
evaluation in hwnas does, and top-1 is measured before and after on the validation and test splits.

The result lives in the run as ``finetuned/<id>/subnet`` (a checkpoint: safetensors + JSON with
their sha256, never pickle); the folder is published in one rename, so a kill mid-way leaves the
previous result (or none), never torn weights. `hwnas export` ships these weights when they exist.
"""

from __future__ import annotations

import math
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwnas.errors import CheckpointError, InputError

__all__ = ["FinetuneSettings", "finetune_subnet", "train_alone", "finetuned_record", "load_finetuned", "STEM"]

STEM = "subnet"  # finetuned/<id>/subnet.{safetensors,json}


@dataclass(frozen=True)
class FinetuneSettings:
    """How a subnet is fine-tuned (checked once, before anything slow)."""

    epochs: int = 5
    lr: float = 0.01
    batch_size: int = 128
    kd_ratio: float = 1.0
    label_smoothing: float = 0.1
    weight_decay: float = 3e-5
    seed: int = 0
    warmup_epochs: float = 0.0  # linear warm-up before the cosine (training from scratch wants one)

    def __post_init__(self) -> None:
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 1:
            raise InputError(f"fine-tuning needs at least 1 epoch, got {self.epochs!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"the fine-tuning learning rate must be a positive number, got {self.lr!r}")
        if self.batch_size < 2:
            raise InputError(f"the fine-tuning batch must hold at least 2 images, got {self.batch_size}")
        if not 0 <= self.kd_ratio < 100:
            raise InputError(f"kd_ratio must be in [0, 100), got {self.kd_ratio}")
        if not 0 <= self.warmup_epochs < self.epochs:
            raise InputError(f"warmup_epochs must be in [0, epochs), got {self.warmup_epochs}")
        if self.seed < 0:
            raise InputError(f"the seed must be 0 or more, got {self.seed}")


def _stem(run: Any, arch_id: str) -> Path:
    return run.files.finetuned(arch_id) / STEM


def finetuned_record(run: Any, arch_id: str) -> dict[str, Any] | None:
    """What fine-tuning recorded for a subnet of the run (None when it was never fine-tuned)."""
    from hwnas.supernet.checkpoint import checkpoint_exists, load_checkpoint_meta

    stem = _stem(run, arch_id)
    if not checkpoint_exists(stem):
        return None
    return load_checkpoint_meta(stem).get("extra", {}).get("finetune")


def load_finetuned(run: Any, arch: Any, subnet: Any) -> dict[str, Any] | None:
    """Load a subnet's fine-tuned weights into `subnet` (its static module) when the run has them;
    returns their record. Weights that do not match their checksum, or were made from another
    supernet, are refused with one line."""
    from hwnas.supernet.checkpoint import load_checkpoint

    record = finetuned_record(run, arch.id)
    if record is None:
        return None
    if record.get("supernet_sha256") != _supernet_sha256(run):
        raise CheckpointError(f"{run.files.finetuned(arch.id)} was fine-tuned from another supernet "
                              "than the run's; fine-tune it again (hwnas finetune) or delete the folder")
    load_checkpoint(_stem(run, arch.id), subnet)  # checks the sha256 of the weights
    return record


def _supernet_sha256(run: Any) -> str:
    from hwnas.supernet.checkpoint import load_checkpoint_meta
    from hwnas.supernet.pretrained import shipped_checkpoint

    stem = run.supernet if run.supernet is not None else shipped_checkpoint()
    return str(load_checkpoint_meta(stem)["weights"]["sha256"])


def finetune_subnet(run: Any, arch: Any, settings: FinetuneSettings | None = None, data: Any = None,
                    progress: Callable[[int, int, str], Any] | None = None) -> dict[str, Any]:
    """Fine-tune `arch` (an arch of the run's space) and store it in the run; returns the record
    (top-1 before and after on val and test, epochs, time).

    One fine-tuning per subnet and run at a time (a second is refused in one line while the first
    holds the run's lock), saved after every epoch in ``finetuned/.<id>.training``: a killed run
    given the same command continues from its last epoch."""
    from hwnas.fileio import file_lock

    arch = run.space.validate(arch)
    try:
        with file_lock(run.files.root / ".locks" / f"finetune-{arch.id}.lock", blocking=False):
            return _finetune(run, arch, settings or FinetuneSettings(), data, progress)
    except BlockingIOError:
        raise InputError(f"subnet {arch.id} is being fine-tuned in {run.files.root} by another process; "
                         "wait for it to finish (its result replaces this one's)") from None


def _finetune(run: Any, arch: Any, settings: FinetuneSettings, data: Any,
              progress: Callable[[int, int, str], Any] | None) -> dict[str, Any]:
    from hwnas.distributed import process_device
    from hwnas.supernet.bn import evaluate, folded_for_eval, recalibrate_bn
    from hwnas.supernet.checkpoint import save_checkpoint
    from hwnas.supernet.data import build_loaders, calibration_loader
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    model, meta = load_supernet(run.supernet)
    data_cfg = data_config_of(meta, data if data is not None else run.data)
    loaders = build_loaders(data_cfg.model_copy(update={"batch_size": settings.batch_size}))
    for split in ("val", "test"):  # top-1 before and after on both
        loaders.require_split(split)
    n_train = len(loaders.train.dataset)
    if n_train < 2:
        raise InputError(f"the training split has {n_train} image(s); fine-tuning needs at least 2")
    if n_train < settings.batch_size:  # a small dataset: one batch is all of it
        settings = replace(settings, batch_size=n_train)
        loaders = build_loaders(data_cfg.model_copy(update={"batch_size": n_train}))
    calib = calibration_loader(loaders.train, seed=0)

    def calibrated(module: Any) -> Any:
        return recalibrate_bn(module, calib, len(calib), resolution=arch.r)

    student = calibrated(model.get_subnet(arch))
    # BN folded for evaluation, as search verification and export evaluate: the same top-1 as theirs
    inference = folded_for_eval(student)
    before = {split: evaluate(inference, getattr(loaders, split), resolution=arch.r)["top1"]
              for split in ("val", "test")}
    teacher = calibrated(model.get_subnet(run.space.max_arch(arch.r))).requires_grad_(False)
    del model
    started = time.time()
    # on a GPU when torch sees one; BN calibration and evaluation stay on the CPU, as everywhere else
    device = process_device()
    state = run.files.finetuned(arch.id).parent / f".{arch.id}.training"
    train_alone(student.to(device), loaders, arch.r, settings, teacher=teacher,
                progress=progress, family=run.family.name, resume=state / STEM)
    student, teacher = student.cpu(), None
    calibrated(student)
    inference = folded_for_eval(student)
    after = {split: evaluate(inference, getattr(loaders, split), resolution=arch.r)
             for split in ("val", "test")}
    record = {"id": arch.id, "arch": arch.to_ofa_dict(), "epochs": settings.epochs,
              "settings": asdict(settings), "data": data_cfg.model_dump(mode="json"),
              "supernet": run.supernet or "shipped", "supernet_sha256": _supernet_sha256(run),
              "teacher": run.space.max_arch(arch.r).id,
              "top1_before": {k: round(v, 2) for k, v in before.items()},
              "top1_after": {k: round(v["top1"], 2) for k, v in after.items()},
              "n": {k: v["n"] for k, v in after.items()}, "train_images": len(loaders.train.dataset),
              "seconds": round(time.time() - started, 1), "trained_on": str(device)}
    _publish(run, arch.id, lambda stem: save_checkpoint(
        stem, student, {"family": run.family.name, "n_classes": int(meta["n_classes"]),
                        "dataset": loaders.dataset, "class_names": loaders.class_names,
                        "mean": list(loaders.mean), "std": list(loaders.std),
                        "extra": {"finetune": record}}, rng=False))
    shutil.rmtree(state, ignore_errors=True)
    return record


def train_alone(student: Any, loaders: Any, r: int, settings: FinetuneSettings, teacher: Any = None,
                progress: Callable[[int, int, str], Any] | None = None,
                resume: str | os.PathLike[str] | None = None, family: str | None = None,
                network: str | None = None) -> Any:
    """Train one static network at resolution `r` on the training split: cross-entropy on the
    labels, plus distillation from `teacher`'s soft output when one is given, SGD + Nesterov with
    a warm-up then cosine decay, the data's augmentation. Trains on the device `student` is on
    (the teacher is moved there). `resume`: a checkpoint stem saved after
    every epoch (weights, optimizer, RNG) and continued from when it exists, so a run of many
    epochs survives being stopped (`family`: the student's family, recorded there, None for a
    network of no family; `network`: what such a student is, e.g. "timm:resnet18"). Returns the
    trained `student`."""
    import torch
    import torch.nn.functional as F

    from hwnas.supernet.checkpoint import (checkpoint_exists, load_checkpoint, load_checkpoint_meta,
                                           save_checkpoint)
    from hwnas.supernet.data import resize_batch
    from hwnas.supernet.train import cosine_lr, kd_loss, param_groups

    loader = loaders.train
    per_epoch = len(loader.dataset) // settings.batch_size
    if loader.batch_size != settings.batch_size or per_epoch == 0:
        raise InputError(f"training alone needs batches of {settings.batch_size} and at least one of "
                         f"them: the loader gives {loader.batch_size} from {len(loader.dataset)} images")
    torch.manual_seed(settings.seed)
    optimizer = torch.optim.SGD(param_groups(student, settings.weight_decay), lr=settings.lr,
                                momentum=0.9, nesterov=True)
    steps, warm = settings.epochs * per_epoch, int(settings.warmup_epochs * per_epoch)
    student = student.to(memory_format=torch.channels_last).train()
    device = next(student.parameters()).device  # trains where the student is (a GPU when moved there)
    if teacher is not None:
        teacher = teacher.to(device)
    # what a saved epoch must match to be continued
    what = {"settings": asdict(settings), "r": r, "teacher": teacher is not None, "dataset": loaders.dataset,
            "train_images": len(loader.dataset), **({"network": network} if network else {})}
    first = 0
    if resume is not None and checkpoint_exists(resume):
        if load_checkpoint_meta(resume)["extra"].get("train_alone") != what:
            raise CheckpointError(f"{resume} was saved by another training (settings, resolution, "
                                  "teacher or data); delete it to start again")
        first = int(load_checkpoint(resume, student, optimizer=optimizer, restore_rng=True)["epoch"])
    for epoch in range(first, settings.epochs):
        loader.sampler.set_epoch(epoch)
        generator = torch.Generator().manual_seed(settings.seed * 100_003 + epoch)  # resumable
        step = epoch * per_epoch
        for x, y in loader:
            if len(y) < settings.batch_size or step >= (epoch + 1) * per_epoch:
                continue  # the last partial batch
            # augmentation draws from a CPU generator on CPU batches: the same images on any device
            x = resize_batch(loaders.augment(x, generator).to(device, non_blocking=True), r)
            x, y = x.contiguous(memory_format=torch.channels_last), y.to(device, non_blocking=True)
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(settings.lr, step, steps, warm)
            logits = student(x)
            loss = F.cross_entropy(logits, y, label_smoothing=settings.label_smoothing)
            if teacher is not None and settings.kd_ratio:
                with torch.no_grad():
                    soft = teacher(x)
                loss = loss + settings.kd_ratio * kd_loss(logits, soft)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if progress:
                progress(step, steps, f"epoch {epoch + 1}/{settings.epochs} loss {loss.item():.3f}")
        if not np.isfinite(loss.item()):
            raise InputError(f"training diverged (loss {loss.item()}) in epoch {epoch + 1}; lower "
                             f"the learning rate (now {settings.lr})")
        if resume is not None:
            save_checkpoint(resume, student, {"family": family, "n_classes": loaders.n_classes,
                                              "dataset": loaders.dataset, "epoch": epoch + 1,
                                              "extra": {"train_alone": what}},
                            optimizer=optimizer, rng=True)
    return student


def _publish(run: Any, arch_id: str, write: Callable[[Path], Any]) -> None:
    """Write into a fresh folder beside the final one, then swap it in with renames: readers see the
    old result or the new one, never a mix."""
    final = run.files.finetuned(arch_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = final.parent / f".{arch_id}.partial-{uuid.uuid4().hex[:8]}"
    stage.mkdir()
    try:
        write(stage / STEM)
        with run.files.lock(f"finetuned-{arch_id}"):
            old = final.parent / f".{arch_id}.old-{uuid.uuid4().hex[:8]}"
            if final.exists():
                os.rename(final, old)
            os.rename(stage, final)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)

