"""Progressive-shrinking training of the once-for-all supernet, in one resumable command.

Schedule (Once-for-All, Cai et al. 2020): train the full network, then progressively allow
smaller kernels, fewer blocks, and narrower expansions. Every phase after the first distils from
the full network (a frozen copy taken at the end of phase "full"). Depth and expand phases come
in two halves, as in the paper: first the two largest choices, then all of them. Channels are
sorted by importance before the expand phase so narrow subnets keep the most useful ones.

Resumability: a checkpoint (weights + optimizer + scheduler + RNG, atomically written) is saved
every `checkpoint_every` steps and at each epoch end. Data order and subnet sampling are functions
of (seed, phase, epoch, step), so a resumed run sees the same batches and subnets it would have.

Distributed: under `torchrun`, each process trains on its shard (DistributedSampler) with DDP
(gloo on CPU, NCCL on CUDA); every rank samples the same subnets because sampling is seeded.
"""

from __future__ import annotations

import copy
import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hwnas.distributed import dist_info, init_distributed, process_device
from hwnas.errors import CheckpointError, ConfigError, InputError
from hwnas.families import DEFAULT_FAMILY
from hwnas.families.base import GeneArch
from hwnas.fileio import atomic_write_json, atomic_write_text
from hwnas.supernet.data import DataConfig, build_loaders, resize_batch

__all__ = ["PhaseConfig", "TrainConfig", "Phase", "build_phases", "train_supernet", "load_train_config",
           "cosine_lr", "param_groups", "kd_loss", "transfer_config"]



class PhaseConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    epochs: int = Field(ge=0)
    lr: float = Field(gt=0)
    warmup_epochs: float = Field(default=0.0, ge=0)


class TrainConfig(BaseModel):
    """Everything `hwnas train` needs; loaded from YAML, overridable with --set key=value."""

    model_config = ConfigDict(extra="forbid")
    family: str = DEFAULT_FAMILY  # hwnas.families registry name
    data: DataConfig = Field(default_factory=DataConfig)
    space: dict[str, Any] = Field(default_factory=lambda: {"r": "32:64:4"})
    dropout: float = 0.1
    phases: dict[str, PhaseConfig] = Field(default_factory=lambda: {
        "full": PhaseConfig(epochs=10, lr=0.1, warmup_epochs=1),
        "kernel": PhaseConfig(epochs=4, lr=0.03),
        "depth": PhaseConfig(epochs=4, lr=0.01),
        "expand": PhaseConfig(epochs=4, lr=0.01),
    })
    momentum: float = 0.9
    weight_decay: float = 3e-5
    label_smoothing: float = 0.1
    kd_ratio: float = 1.0
    # where the soft labels of the phases after "full" come from: "teacher", a frozen copy of the
    # full network (Once-for-All), or "inplace", the largest subnet of the same step, trained on the
    # labels first (BigNAS): no extra forward pass, and the teacher keeps improving; or "stored",
    # another network's logits for every training image, read from `soft_labels`
    # (`hwnas.supernet.soft_labels`): all subnets, the largest too, learn from a stronger teacher
    distill: Literal["teacher", "inplace", "stored"] = "teacher"
    soft_labels: str | None = None  # the stem of a soft-label pair, for distill: stored
    sandwich: bool = True
    # how the random subnets of a step are drawn: "genes", every gene uniform (Once-for-All's rule:
    # each stage's depth uniform, so shallow subnets are trained as often as deep ones), or
    # "networks", uniform over distinct networks (nearly always the largest depth; checkpoints
    # trained before this setting existed were)
    subnet_sampling: Literal["genes", "networks"] = "genes"
    subnets_per_step: int = Field(default=2, ge=1)
    seed: int = Field(default=0, ge=0, lt=2**32)  # numpy's seed range
    threads: int | None = None
    checkpoint_every: int = Field(default=50, ge=1)
    eval_batches: int | None = 20
    bn_batches: int = 10
    amp: bool = True
    # NHWC tensors: oneDNN's depthwise convolutions run 2-3x faster on CPU in this layout.
    channels_last: bool = True
    max_steps_per_epoch: int | None = None
    # transfer: start from this checkpoint (a stem, or "shipped") instead of random weights; its
    # classifier is kept when the classes are the same, replaced otherwise
    init_from: str | None = None

    @field_validator("phases", mode="before")
    @classmethod
    def _known_phases(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError("phases must map phase names to {epochs, lr, warmup_epochs}")
        # "full", then the shrinking phases families declare (`Family.shrink_phases`; one the
        # config's family lacks is skipped, so one config serves every family), or "elastic":
        # every gene at once (a transferred supernet is elastic already)
        known = list(dict.fromkeys(["full", *shrink_phase_names(), "elastic"]))
        unknown = set(v) - set(known)
        if unknown:
            raise ValueError(f"unknown phases {sorted(unknown)}; phases are {', '.join(known)}")
        if "full" not in v:
            raise ValueError("the 'full' phase is required: later phases distil from it")
        return v

    @model_validator(mode="after")
    def _soft_labels_with_stored(self) -> "TrainConfig":
        if self.distill == "stored" and not self.soft_labels:
            raise ValueError("distill: stored needs soft_labels: the stem of a soft-label pair")
        if self.soft_labels and self.distill != "stored":
            raise ValueError(f"soft_labels is only read with distill: stored (this config: {self.distill})")
        return self

    @field_validator("family")
    @classmethod
    def _known_family(cls, v: str) -> str:
        from hwnas.families import family_names

        if v not in family_names():
            raise ValueError(f"unknown family {v!r}; hwnas knows {', '.join(family_names())}")
        return v

    def search_space(self):
        """The family's space (`Family.space_from_dict`: the space interface)."""
        from hwnas.families import get_family

        return get_family(self.family).space_from_dict(self.space)


def load_train_config(path: str | Path | None, overrides: list[str] = (),
                      base: dict[str, Any] | None = None, keep: tuple[str, ...] = ()) -> TrainConfig:
    """Read YAML over `base` (default: hwnas's defaults) and apply `key.sub=value` overrides (values
    parsed as YAML); the `keep` keys of `base` win over the YAML's."""
    from pydantic import ValidationError

    from hwnas.fileio import parse_yaml

    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"training config {path} does not exist") from None
        raw = parse_yaml(text, f"training config {path}") or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"training config {path} must be a mapping of settings")
    base = TrainConfig().model_dump(mode="json") if base is None else base
    raw = {**_deep_merge(base, raw), **{k: base[k] for k in keep}}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like key=value, e.g. phases.full.epochs=2")
        node = raw
        *parents, leaf = key.strip().split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p} is not a section")
        # "32:64:4" is a range, not YAML 1.1's base-60 integer
        node[leaf] = (value if re.fullmatch(r"\s*\d+:\d+(:\d+)?\s*", value)
                      else parse_yaml(value, f"override {item!r}"))
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"training config: {where}: {first['msg']}") from None


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`, section by section (a YAML need only name what it changes)."""
    out = dict(base)
    for k, v in top.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@dataclass(frozen=True)
class Phase:
    """One stretch of the schedule: which choices subnets are sampled from."""

    name: str  # full, kernel, depth-1, depth-2, expand-1, expand-2
    epochs: int
    lr: float
    warmup_epochs: float
    space: Any  # the family's space (the space interface)
    distill: bool
    sort_channels_first: bool = False


def shrink_phase_names() -> list[str]:
    """The shrinking phases of every registered family, in training order."""
    from hwnas.families import family_names, get_family

    return list(dict.fromkeys(p.name for name in family_names() for p in get_family(name).shrink_phases))


def build_phases(cfg: TrainConfig) -> list[Phase]:
    """Progressive shrinking for the config's family: "full" trains the largest network; each of
    the family's phases (`Family.shrink_phases`: kernel, depth, expand for the MobileNets; depth,
    expand, width for ResNet50) then makes its gene group elastic while later groups stay at their
    largest choice. A gradual phase first opens the two largest choices, then all; a phase that
    sorts channels does so by importance first. A phase the config does not set takes the
    "expand" phase's settings. With an "elastic" phase (BigNAS-style; transfer) every gene is open
    at once after "full", channels sorted by importance first."""
    from hwnas.families import get_family

    family = get_family(cfg.family)
    space = cfg.search_space()
    full = space.to_dict()
    largest = {ph.group: [max(full[ph.group])] for ph in family.shrink_phases}
    sub = lambda **kw: family.space_from_dict({**full, **kw})  # noqa: E731
    phases: list[Phase] = []

    def add(name: str, pc: PhaseConfig, s, epochs: int, first: bool = False) -> None:
        if epochs > 0:
            phases.append(Phase(name, epochs, pc.lr, pc.warmup_epochs, s, name != "full", first))

    pc = cfg.phases["full"]
    add("full", pc, sub(**largest), pc.epochs)
    if "elastic" in cfg.phases:
        pc = cfg.phases["elastic"]
        add("elastic", pc, space, pc.epochs, first=True)  # sorting keeps the function: harmless
        return phases
    for i, ph in enumerate(family.shrink_phases):
        pc = cfg.phases.get(ph.name) or cfg.phases.get("expand")
        if pc is None:
            continue
        later = {p.group: largest[p.group] for p in family.shrink_phases[i + 1:]}
        if not ph.gradual:
            add(ph.name, pc, sub(**later), pc.epochs, first=ph.sorts_channels)
            continue
        half = pc.epochs // 2 if len(full[ph.group]) > 2 else 0
        add(f"{ph.name}-1", pc, sub(**later, **{ph.group: sorted(full[ph.group])[-2:]}), half, first=ph.sorts_channels)
        add(f"{ph.name}-2", pc, sub(**later), pc.epochs - half, first=ph.sorts_channels and half == 0)
    return phases


# -- distributed helpers ---------------------------------------------------------------------
def _all_reduce_mean(values: list[float], device: torch.device) -> list[float]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return (t / dist.get_world_size()).tolist()


# -- the loop --------------------------------------------------------------------------------
def cosine_lr(peak: float, t: int, total: int, warm: int = 0) -> float:
    """The learning rate at step `t` of `total`: a linear warm-up over `warm` steps, then cosine
    decay to zero (every training loop in hwnas uses this schedule)."""
    if t < warm:
        return peak * (t + 1) / warm
    return 0.5 * peak * (1 + math.cos(math.pi * (t - warm) / max(1, total - warm)))


def _lr_at(phase: Phase, epoch: int, step: int, steps_per_epoch: int) -> float:
    """Cosine decay within a phase, after a linear warm-up."""
    return cosine_lr(phase.lr, epoch * steps_per_epoch + step, phase.epochs * steps_per_epoch,
                     int(phase.warmup_epochs * steps_per_epoch))


def _subnets_for_step(phase: Phase, cfg: TrainConfig, rng: np.random.Generator) -> list[GeneArch]:
    """The subnets trained on one batch. Sandwich rule (BigNAS): the largest and the smallest
    plus at least one random subnet, so the middle of the space, where searches end, is trained
    too (with only max + min, random subnets are never trained and score far below both)."""
    if phase.name == "full":
        return [phase.space.max_arch()]
    n = cfg.subnets_per_step
    archs: list[GeneArch] = []
    if cfg.sandwich:
        archs = [phase.space.max_arch(), phase.space.min_arch()][:max(n - 1, 1)]
    if n <= len(archs):
        return archs
    space = phase.space
    draw = space.sample_genes_matrix if cfg.subnet_sampling == "genes" else space.sample_matrix
    return archs + space.from_matrix(draw(n - len(archs), rng))


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """No weight decay on BN and biases (Once-for-All's `no_decay_keys`)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def kd_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against the teacher's soft labels (Once-for-All's KD loss)."""
    return torch.mean(torch.sum(-F.softmax(teacher, dim=1) * F.log_softmax(student, dim=1), dim=1))


TRAIN_LOCK = ".train.lock"


def train_supernet(cfg: TrainConfig, out_dir: str | Path,
                   progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Run (or resume) the whole progressive-shrinking schedule; returns the summary.

    One training per folder: the process (rank 0 under torchrun) holds a non-blocking lock on
    ``<out>/.train.lock`` for the whole run, so a second `hwnas train` on the same --out is one
    InputError line instead of two runs overwriting each other's checkpoints. The kernel drops
    the lock when the process dies, so a killed run never leaves a stale one."""
    from contextlib import ExitStack

    from hwnas.fileio import file_lock

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder for the training run")
    with ExitStack() as stack:
        if dist_info()[0] == 0:
            try:
                stack.enter_context(file_lock(out / TRAIN_LOCK, blocking=False))
            except BlockingIOError:
                raise InputError(f"{out} is being trained by another process (it holds "
                                 f"{out / TRAIN_LOCK}); wait for it to finish or use another "
                                 "--out") from None
        return _train_supernet(cfg, out, progress)


def _clean_log(log_path: Path, phases: list[Phase], state: dict[str, Any]) -> None:
    """Before a resumed run appends to train_log.jsonl: drop a partial last line (a kill while
    writing) and the records of epochs the checkpoint does not hold (a kill between writing an
    epoch's record and saving the checkpoint: that epoch is trained and logged again)."""
    try:
        text = log_path.read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return
    order = {ph.name: i for i, ph in enumerate(phases)}
    resumed = (state["phase_index"], state["epoch"])  # epochs [0, epoch) of that phase are done
    keep = []
    for line in text.splitlines(keepends=True):
        try:
            record = json.loads(line)
            where = (order.get(record["phase"], len(phases)), int(record["epoch"]) - 1)
        except (ValueError, KeyError, TypeError):
            continue  # a partial or corrupt line
        if not line.endswith("\n"):
            continue  # cut off mid-write, even if it parses
        if state["done"] or where < resumed:
            keep.append(line)
    if "".join(keep) != text:
        atomic_write_text(log_path, "".join(keep))


def _train_supernet(cfg: TrainConfig, out: Path,
                    progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    from hwnas.supernet.bn import evaluate, recalibrate_bn
    from hwnas.supernet.data import calibration_loader
    from hwnas.supernet.checkpoint import load_checkpoint, load_checkpoint_meta, save_checkpoint
    from hwnas.families import get_family

    rank, world = dist_info()
    device = process_device()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    init_distributed(device.type)

    torch.manual_seed(cfg.seed)  # same initial weights on every rank and every rerun
    space = cfg.search_space()
    phases = build_phases(cfg)
    loaders = build_loaders(cfg.data)
    loaders.require_split("val")  # every epoch reports on it: refused now, not after the first epoch
    calib = calibration_loader(loaders.train, n_images=cfg.bn_batches * cfg.data.batch_size, seed=cfg.seed)
    family = get_family(cfg.family)
    model = family.supernet_for(space, loaders.n_classes, cfg.dropout).to(device)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(param_groups(model, cfg.weight_decay), lr=phases[0].lr,
                                momentum=cfg.momentum, nesterov=True)
    amp = cfg.amp and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    ckpt, teacher_ckpt = out / "supernet", out / "teacher"
    meta = {"family": cfg.family, "space": space.to_dict(),
            "n_classes": loaders.n_classes, "class_names": loaders.class_names,
            "dataset": cfg.data.name, "mean": loaders.mean, "std": loaders.std}
    state = {"phase_index": 0, "epoch": 0, "step": 0, "done": False}
    log_path = out / "train_log.jsonl"
    transfer: dict[str, Any] | None = None
    resumed: dict[str, Any] = {}  # the extra meta of the run this one resumes

    if (out / "supernet.json").exists():
        resumed = load_checkpoint_meta(ckpt).get("extra", {})
        if _recipe(resumed.get("config")) != _recipe(cfg.model_dump(mode="json")):
            raise CheckpointError(f"{out} holds a run with a different config; "
                                  "use another --out or the same config to resume")
        state = resumed["state"]
        transfer = resumed.get("transfer")
        if state["done"]:  # finished: the final checkpoint keeps weights only
            load_checkpoint(ckpt, model)
        else:
            load_checkpoint(ckpt, model, optimizer=optimizer, restore_rng=True)
    elif cfg.init_from is not None:  # every rank loads the same source: no broadcast needed
        from hwnas.supernet.transfer import load_source

        transfer = load_source(cfg, model, loaders.class_names)
    stored = _stored_soft_labels(cfg, loaders) if cfg.distill == "stored" else None
    # the same stem with other logits (the teacher retrained) would silently mix two teachers
    if stored is not None and resumed.get("soft_labels_sha256") not in (None, stored.sha256):
        raise CheckpointError(f"{out} was trained on other soft labels than {cfg.soft_labels} holds "
                              "now (sha256 differs); use another --out or restore those soft labels")
    if rank == 0:
        _clean_log(log_path, phases, state)
    teacher = None

    def load_teacher() -> nn.Module:
        t = copy.deepcopy(model)
        load_checkpoint(teacher_ckpt, t)
        t.set_active_subnet(space.max_arch())
        return t.eval().requires_grad_(False)

    def save(final: bool = False) -> None:
        if rank != 0:
            return
        save_checkpoint(ckpt, model, {**meta, "phase": phases[min(state["phase_index"], len(phases) - 1)].name,
                                      "extra": {"config": cfg.model_dump(mode="json"), "state": state,
                                                **({"transfer": transfer} if transfer else {}),
                                                **({"soft_labels_sha256": stored.sha256} if stored else {})}},
                        optimizer=None if final else optimizer)

    ddp_model: nn.Module = model
    if world > 1:
        import torch.distributed as dist

        # Subnets leave parts of the supernet unused on each step, hence find_unused_parameters.
        ddp_model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
        if rank == 0:
            atomic_write_json(out / "ddp.json", {"world_size": world, "backend": dist.get_backend(),
                                                 "device": str(device)})

    summary: dict[str, Any] = {"phases": []}
    started = time.time()
    while not state["done"] and state["phase_index"] < len(phases):
        phase = phases[state["phase_index"]]
        if phase.distill and teacher is None and cfg.distill == "teacher":
            teacher = load_teacher()
        if phase.sort_channels_first and state["epoch"] == 0 and state["step"] == 0 \
                and hasattr(model, "sort_channels"):
            model.sort_channels()
            optimizer.state.clear()  # momentum belongs to the channels' old order
        while state["epoch"] < phase.epochs:
            epoch_stats = _train_epoch(cfg, phase, state, model, ddp_model, teacher, optimizer, scaler,
                                       loaders, device, save, progress, amp, stored)
            state["epoch"] += 1
            state["step"] = 0
            val = {}
            if rank == 0:
                val = _quick_eval(model, phase, calib, loaders.val, cfg, recalibrate_bn, evaluate)
                record = {"phase": phase.name, "epoch": state["epoch"], **epoch_stats, **val,
                          "elapsed_s": round(time.time() - started, 1)}
                with open(log_path, "a") as f:
                    f.write(json.dumps(record) + "\n")
                if progress:
                    progress(event="epoch", **record)
            save()
        if phase.name == "full" and rank == 0:
            save_checkpoint(teacher_ckpt, model, {**meta, "phase": "full"}, rng=False)
        if world > 1:
            import torch.distributed as dist

            dist.barrier()
        state.update(phase_index=state["phase_index"] + 1, epoch=0, step=0)
        save()
    state["done"] = True
    save(final=True)
    summary["log"] = [json.loads(line) for line in log_path.read_text().splitlines()] if log_path.exists() else []
    if rank == 0:
        atomic_write_text(out / "train_summary.json", json.dumps(summary["log"][-len(phases):], indent=2))
    return summary


# Settings that change how fast a run goes, not what it computes: a run may resume with others
# (e.g. on a machine with more cores).
_EXECUTION_KEYS = ("threads",)


def _recipe(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if config is None:
        return None
    # a setting added after the run started takes its default (runs from before families were
    # the default family's, from before `distill` used a frozen teacher: both the defaults)
    config = _deep_merge(TrainConfig.model_construct().model_dump(mode="json", warnings=False), config)
    return {k: v for k, v in config.items() if k not in _EXECUTION_KEYS}


def _stored_soft_labels(cfg: TrainConfig, loaders) -> Any:
    from hwnas.supernet.soft_labels import load_soft_labels

    ds = loaders.train.dataset
    if not hasattr(ds, "indices") or not hasattr(ds, "labels"):
        raise InputError(f"distill: stored needs training images held in memory with their positions "
                         f"(fashion-mnist, mnist-embedded, cifar); {cfg.data.name} streams its images")
    return load_soft_labels(cfg.soft_labels, loaders.dataset, np.asarray(ds.indices), ds.labels,
                            loaders.n_classes)


def _train_epoch(cfg, phase, state, model, ddp_model, teacher, optimizer, scaler, loaders, device,
                 save, progress, amp, stored=None) -> dict[str, float]:
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

    rank, world = dist_info()
    dataset = loaders.train.dataset
    epoch_seed = cfg.seed * 100_003 + state["phase_index"] * 1009 + state["epoch"]
    if world > 1:
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=epoch_seed)
    else:
        sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(epoch_seed))
    # The epoch's order, drawn once: a batch's images are then known by position (stored soft
    # labels). A seeded generator keeps the loader from drawing on the global RNG (resume stays exact).
    order = list(sampler)
    loader = DataLoader(dataset, batch_size=cfg.data.batch_size, sampler=order, drop_last=True,
                        num_workers=cfg.data.num_workers, generator=torch.Generator().manual_seed(epoch_seed))
    steps = len(loader) if cfg.max_steps_per_epoch is None else min(len(loader), cfg.max_steps_per_epoch)
    ddp_model.train()
    totals = np.zeros(3)  # loss sum, correct, seen
    for step, (x, y) in enumerate(loader):
        if step >= steps:
            break
        if step < state["step"]:  # resumed mid-epoch: skip batches already trained on
            continue
        rng = np.random.default_rng([epoch_seed, step])
        torch.manual_seed(int(rng.integers(2**62)))  # dropout masks depend on the step alone
        r = int(rng.choice(phase.space.r_choices))
        if loaders.augment:  # its own stream: the subnets and dropout draw as without it
            word = int(np.random.SeedSequence([epoch_seed, step, 1]).generate_state(1)[0])
            x = loaders.augment(x, torch.Generator().manual_seed(word))
        x = resize_batch(x.to(device), r)
        if cfg.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        y = y.to(device)
        lr = _lr_at(phase, state["epoch"], step, steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        soft = None
        if stored is not None and phase.distill:
            batch = order[step * cfg.data.batch_size:(step + 1) * cfg.data.batch_size]
            soft = stored.for_indices(np.asarray(dataset.indices)[batch]).to(device)
        elif teacher is not None:
            with torch.no_grad(), torch.autocast(device.type, enabled=amp):
                soft = teacher(x).float()
        optimizer.zero_grad(set_to_none=True)
        largest = phase.space.max_arch()
        for arch in _subnets_for_step(phase, cfg, rng):
            model.set_active_subnet(arch)
            with torch.autocast(device.type, enabled=amp):
                logits = ddp_model(x)
                loss = F.cross_entropy(logits, y, label_smoothing=cfg.label_smoothing)
                if soft is not None and cfg.kd_ratio > 0:
                    loss = loss + cfg.kd_ratio * kd_loss(logits.float(), soft)
            if phase.distill and cfg.distill == "inplace" and soft is None and arch == largest:
                soft = logits.detach().float()  # the sandwich trains the largest first
            scaler.scale(loss).backward()
            totals += [loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)]
        scaler.step(optimizer)
        scaler.update()
        state["step"] = step + 1
        if progress:
            progress(event="step", phase=phase.name, epoch=state["epoch"], step=step + 1, steps=steps,
                     loss=totals[0] / totals[2], acc=100 * totals[1] / totals[2], lr=lr, r=r)
        if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < steps:
            save()
    loss, correct, seen = _all_reduce_mean(list(totals), device)
    return {"train_loss": round(loss / max(seen, 1), 4), "train_acc": round(100 * correct / max(seen, 1), 2)}


def _quick_eval(model, phase, calib, val_loader, cfg, recalibrate_bn, evaluate) -> dict[str, float]:
    """Validation top-1 of the phase's largest, smallest and one fixed random ("mid") subnet
    after BN recalibration.

    Works on a copy so the training model's BN statistics are untouched.
    """
    out = {}
    probe = copy.deepcopy(model)
    mid = phase.space.sample(1, np.random.default_rng(cfg.seed + 7))[0]
    for tag, arch in (("max", phase.space.max_arch()), ("min", phase.space.min_arch()), ("mid", mid)):
        probe.set_active_subnet(arch)
        recalibrate_bn(probe, calib, cfg.bn_batches, resolution=arch.r)
        res = evaluate(probe, val_loader, resolution=arch.r, max_batches=cfg.eval_batches)
        out[f"val_top1_{tag}"] = round(res["top1"], 2)
        if phase.name == "full":
            break
    return out


def transfer_config(init_from: str | Path, data: Any, config: str | Path | None = None,
                    overrides: list[str] = ()) -> TrainConfig:
    """The training config of a transfer (`hwnas train --init-from`, `hwnas.supernet.transfer`): the source's family, space (resolutions included) and
    dropout, then the default recipe (or the YAML `config` over hwnas's defaults), then
    ``--set`` `overrides`; the target dataset `data` (a `DataConfig`) last."""
    from hwnas.supernet.checkpoint import load_checkpoint_meta
    from hwnas.supernet.transfer import TRANSFER_RECIPE, source_stem

    meta = load_checkpoint_meta(source_stem(init_from))
    base = {**TrainConfig().model_dump(mode="json"), "family": meta.get("family", DEFAULT_FAMILY),
            "space": meta["space"], "dropout": meta.get("extra", {}).get("config", {}).get("dropout", 0.1)}
    if config is None:
        base.update(TRANSFER_RECIPE, phases=dict(TRANSFER_RECIPE["phases"]))
    base.update(init_from=str(init_from), data=data.model_dump(mode="json"))
    return load_train_config(config, list(overrides), base=base, keep=("data", "init_from"))
