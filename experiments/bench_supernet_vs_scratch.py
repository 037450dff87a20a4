"""Once-for-All's claim, checked on our data: subnets taken from the shipped supernet (after BN
recalibration) vs. the same architectures trained from scratch with the same epoch budget.

Budget: each from-scratch network trains alone for --epochs (default 20) with the supernet's recipe
for its full network (SGD + Nesterov, 1 warm-up epoch then cosine from lr 0.1, label smoothing,
weight decay, the same flips and shifts, batch 128), at its own fixed resolution. The shipped
Fashion-MNIST supernet trained 96 epochs in all (7 stages), 3-4 subnets a step, shared by every
subnet; 20 epochs alone is what this 2-core machine affords for 6 networks (the largest takes ~5
min an epoch on one core). Both sides are scored on the official 10,000-image test split.

    .venv/bin/python experiments/bench_supernet_vs_scratch.py            # both parts
    .venv/bin/python experiments/bench_supernet_vs_scratch.py --part scratch   # resumable
    # on two cores, two processes, each training half of the architectures (by MACs):
    .venv/bin/python experiments/bench_supernet_vs_scratch.py --part scratch --shard 0/2 &
    .venv/bin/python experiments/bench_supernet_vs_scratch.py --part scratch --shard 1/2
    # on a GPU machine (the rows record where they trained; scoring stays on the CPU):
    .venv/bin/python experiments/bench_supernet_vs_scratch.py --part scratch --device cuda

Writes experiments/results/supernet_vs_scratch.json (per-arch results are kept as they finish, and
each network's training is saved after every epoch under --state, so an interrupted run continues
where it stopped).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hwnas.fileio import atomic_write_json
from hwnas.space import Arch
from hwnas.supernet.bn import evaluate
from hwnas.supernet.data import build_loaders
from hwnas.supernet.evaluation import evaluate_subnets
from hwnas.supernet.ofa_mbv3 import MobileNetV3Subnet
from hwnas.supernet.pretrained import load_supernet
from hwnas.supernet.stats import count_params_macs
from hwnas.supernet.finetune import FinetuneSettings, train_alone
from hwnas.supernet.train import load_train_config

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "results" / "supernet_vs_scratch.json"  # the shipped supernet's (Fashion-MNIST)
CONFIG = ROOT / "supernet_fashion.yaml"  # MNIST's: --config experiments/supernet_mnist.yaml --out ..._mnist.json


def pick_archs(space, n: int = 8, seed: int = 0) -> list[Arch]:
    """min, max, and n-2 archs at evenly spaced MACs quantiles of a uniform sample."""
    pool = space.sample(4000, np.random.default_rng(seed))
    macs = np.array([count_params_macs(a, 10)[1] for a in pool])
    order = np.argsort(macs)
    picks = [space.min_arch()]
    for q in np.linspace(0.02, 0.98, n - 2):
        picks.append(pool[order[int(q * (len(pool) - 1))]])
    return picks + [space.max_arch()]


def shard_of(macs: list[int], shards: int) -> list[int]:
    """Each architecture's shard, balancing MACs (a proxy for training time): the largest first, each
    to the shard with the least so far. Deterministic, so parallel processes agree on it."""
    load, owner = [0] * shards, [0] * len(macs)
    for i in sorted(range(len(macs)), key=lambda i: (-macs[i], i)):
        owner[i] = min(range(shards), key=lambda k: (load[k], k))
        load[owner[i]] += macs[i]
    return owner


def train_from_scratch(arch: Arch, cfg, loaders, epochs: int, seed: int, resume: Path,
                       device: str = "cpu") -> dict:
    """The supernet's own recipe for its full network (lr, warm-up, weight decay, label smoothing,
    augmentation, batch), one network alone, no teacher; resumable after every epoch. Trained on
    `device`, scored on the CPU like the supernet's subnets."""
    torch.manual_seed(seed)
    net = MobileNetV3Subnet(arch, n_classes=loaders.n_classes, dropout=cfg.dropout).to(device)
    full = cfg.phases["full"]
    settings = FinetuneSettings(epochs=epochs, lr=full.lr, batch_size=cfg.data.batch_size, kd_ratio=0.0,
                                label_smoothing=cfg.label_smoothing, weight_decay=cfg.weight_decay,
                                seed=seed, warmup_epochs=full.warmup_epochs)
    t0 = time.time()
    seen: set[str] = set()

    def log_epochs(step: int, steps: int, text: str) -> None:  # a line as each epoch starts
        epoch = text.split()[1]
        if epoch not in seen:
            seen.add(epoch)
            print(f"{time.strftime('%H:%M:%S')} {arch.id} {text}", flush=True)

    # scratch_train_s: this call's epochs
    train_alone(net, loaders, arch.r, settings, resume=resume, progress=log_epochs)
    res = evaluate(net.cpu().eval(), loaders.test, resolution=arch.r)
    return {"top1": res["top1"], "loss": res["loss"], "train_s": round(time.time() - t0, 1)}


def device_name(device: str) -> str:
    """What trained a row: "cpu (1 thread)" or the GPU's name."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu (1 thread)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["all", "scratch", "supernet"], default="all")
    ap.add_argument("--checkpoint", default=None, help="supernet checkpoint stem (default: shipped)")
    ap.add_argument("--epochs", type=int, default=20, help="from-scratch epochs")
    ap.add_argument("--config", type=Path, default=CONFIG, help="the supernet's training recipe")
    ap.add_argument("--out", type=Path, default=OUT, help="results file (resumed when it exists)")
    ap.add_argument("--archs", type=int, default=6, help="architectures: the smallest, the largest and "
                    "evenly spaced MACs quantiles between")
    ap.add_argument("--state", type=Path, default=ROOT.parent / "runs" / "scratch",
                    help="where each network's training is saved after every epoch (resumed from)")
    ap.add_argument("--device", default="cpu", help="where the from-scratch networks train: cpu, or cuda "
                    "on a GPU machine (each row records it)")
    ap.add_argument("--shard", default="0/1", help="K/N: train only the K-th of N MACs-balanced shares of "
                    "the architectures (parallel processes share the results file under a lock)")
    args = ap.parse_args()
    config, out = args.config.resolve(), args.out
    torch.set_num_threads(1)

    cfg = load_train_config(config)
    model, meta = load_supernet(args.checkpoint)
    space = model.space  # the shipped supernet's space (the recipe file's may be an earlier stage's)
    epochs = args.epochs
    loaders = build_loaders(cfg.data)
    archs = pick_archs(space, args.archs)
    shard, shards = (int(v) for v in args.shard.split("/"))
    owner = shard_of([count_params_macs(a, loaders.n_classes)[1] for a in archs], shards)
    rows: dict[str, dict] = {}
    trained_on = device_name(args.device)
    here = {"platform": platform.platform(), "processor": platform.processor(), "python": platform.python_version(),
            "torch": torch.__version__, "threads": 1, "trained_on": trained_on}
    machines: list[dict] = []  # every machine that trained rows of the file

    def merge() -> None:
        """Re-read the file (another shard may have written rows since) and keep every result."""
        results = json.loads(out.read_text()) if out.exists() else {}
        for m in [*results.get("machines", []), here]:
            if m not in machines:
                machines.append(m)
        for r in results.get("rows", []):
            rows[r["id"]] = {**r, **rows.get(r["id"], {})}
        for a in archs:
            p, m = count_params_macs(a, loaders.n_classes)
            rows.setdefault(a.id, {"id": a.id, "arch": a.to_ofa_dict(), "r": a.r, "params": p, "macs": m})

    def save() -> None:
        with open(out.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            merge()
            _write()

    def _write() -> None:
        ordered = [rows[a.id] for a in archs]
        done = [r for r in ordered if "supernet_top1" in r and r.get("scratch_epochs") == epochs]
        gaps = [r["supernet_top1"] - r["scratch_top1"] for r in done]
        atomic_write_json(out, {
            "benchmark": "supernet subnets (BN-recalibrated) vs. trained from scratch, test top-1 %",
            "command": "python " + " ".join(sys.argv),
            "dataset": cfg.data.name, "scratch_epochs": epochs, "config": str(config.relative_to(ROOT.parent)),
            "machines": machines,
            "summary": {"n": len(done), "mean_gap_pts": round(float(np.mean(gaps)), 2) if gaps else None,
                        "median_gap_pts": round(float(np.median(gaps)), 2) if gaps else None,
                        "worst_gap_pts": round(float(np.min(gaps)), 2) if gaps else None},
            "rows": ordered})

    merge()
    if args.part in ("all", "supernet"):
        for a, res in zip(archs, evaluate_subnets(model, archs, loaders, split="test")):
            rows[a.id]["supernet_top1"] = round(res["top1"], 2)
        save()
    if args.part in ("all", "scratch"):
        for i, a in enumerate(archs):
            if rows[a.id].get("scratch_epochs") == epochs or owner[i] != shard:
                continue  # done with this budget (a row trained with another is trained again)
            res = train_from_scratch(a, cfg, loaders, epochs, seed=cfg.seed,
                                     resume=args.state / f"{cfg.data.name}-{a.id}-{epochs}ep", device=args.device)
            rows[a.id].update(scratch_top1=round(res["top1"], 2), scratch_epochs=epochs,
                              scratch_train_s=res["train_s"], scratch_device=trained_on)
            print(f"[{i + 1}/{len(archs)}] {a.describe()}  scratch {res['top1']:.2f}%  ({res['train_s']} s)",
                  flush=True)
            save()
    print(json.dumps(json.loads(out.read_text())["summary"], indent=2))


if __name__ == "__main__":
    main()
