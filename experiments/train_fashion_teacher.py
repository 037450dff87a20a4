"""Train a stronger Fashion-MNIST teacher for the shipped supernet's distillation (issue 26).

The supernet's largest subnet is a stride-32 MobileNetV3: at r44 its last feature map is 2x2 and it
scored 93.41% on the official test set, the same as that architecture trained alone (93.49%), so
in-place distillation (the largest teaches the rest) cannot lift it. This script trains a plain
ResNet at the images' own 28x28 (stride 4 in all: 7x7 at the end) on the supernet's training split
(the same validation images held out), then writes its soft labels for the 60,000 training images
(`hwnas.supernet.soft_labels`), which `hwnas train` distils from with ``distill: stored``.

    .venv/bin/python experiments/train_fashion_teacher.py --out runs/fashion-teacher   # resumes

A resumed run may change --epochs (the cosine then follows the new length from where it stands):
the shipped soft labels' teacher ran epochs 1-5 on a 20-epoch cosine, then was cut to 14 to fit
a working session.

bfloat16 autocast: this CPU's AMX units run the teacher's dense 3x3 convolutions ~2.7x faster
than float32 (a 64-128-256 step of 128 images: 1.16 s -> 0.44 s on 2 threads).
Writes runs/.../teacher.safetensors (+ .json state), runs/.../soft_labels.safetensors and
experiments/results/fashion_teacher.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml
from safetensors.torch import load_file, save_file

from hwnas.fileio import atomic_write_json
from hwnas.supernet.data import build_loaders
from hwnas.supernet.train import TrainConfig

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "experiments" / "supernet_fashion_stage8.yaml"  # the supernet's data split


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


def teacher_net(width: int, blocks: int = 2, n_classes: int = 10, dropout: float = 0.2) -> nn.Sequential:
    """ResNet with three stages (width, 2x, 4x channels; strides 1, 2, 2) and `blocks` blocks each."""
    layers: list[nn.Module] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for stage, cout in enumerate((width, 2 * width, 4 * width)):
        for b in range(blocks):
            layers.append(BasicBlock(cin, cout, 2 if stage > 0 and b == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(cin, n_classes)]
    return nn.Sequential(*layers)


def lr_at(epoch: float, epochs: int, peak: float, warmup: float = 1.0) -> float:
    if epoch < warmup:
        return peak * epoch / warmup
    return 0.5 * peak * (1 + math.cos(math.pi * (epoch - warmup) / (epochs - warmup)))


@torch.no_grad()
def predict(model: nn.Module, loader, flip: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (float32) and labels over a loader; with `flip`, the mean of the image's and its
    mirror's logits."""
    model.eval()
    out, labels = [], []
    for x, y in loader:
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x).float()
            if flip:
                logits = (logits + model(x.flip(-1)).float()) / 2
        out.append(logits)
        labels.append(y)
    return torch.cat(out), torch.cat(labels)


def top1(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return round(100.0 * float((logits.argmax(1) == labels).float().mean()), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default="runs/fashion-teacher")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ensemble-shipped", action="store_true",
                    help="also try the teacher averaged with the shipped supernet's largest subnet; the "
                         "soft labels come from whichever scores best on validation")
    ap.add_argument("--results", default=str(ROOT / "experiments" / "results" / "fashion_teacher.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cfg = TrainConfig.model_validate(yaml.safe_load(CONFIG.read_text()))
    data = cfg.data.model_copy(update={"root": Path(args.data)})
    loaders = build_loaders(data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = teacher_net(args.width, n_classes=loaders.n_classes).to(memory_format=torch.channels_last)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay},
                           {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, momentum=0.9, nesterov=True)
    state_path, weights_path = out / "teacher.json", out / "teacher.safetensors"
    state = {"epoch": 0, "log": [], "args": vars(args)}
    if state_path.exists():  # resume at the last finished epoch
        state = json.loads(state_path.read_text())
        tensors = load_file(str(weights_path))
        model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
        params = [p for g in opt.param_groups for p in g["params"]]
        for i, p in enumerate(params):
            if f"momentum.{i}" in tensors:
                opt.state[p]["momentum_buffer"] = tensors[f"momentum.{i}"]

    def save() -> None:
        tensors = {f"model.{k}": v.contiguous() for k, v in model.state_dict().items()}
        params = [p for g in opt.param_groups for p in g["params"]]
        for i, p in enumerate(params):
            buf = opt.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                tensors[f"momentum.{i}"] = buf.contiguous()
        save_file(tensors, str(weights_path) + ".tmp")
        Path(str(weights_path) + ".tmp").replace(weights_path)
        atomic_write_json(state_path, state)

    train = loaders.train
    steps = len(train)
    while state["epoch"] < args.epochs:
        epoch, started = state["epoch"], time.time()
        train.sampler.set_epoch(epoch)
        model.train()
        seen = correct = 0
        loss_sum = 0.0
        for step, (x, y) in enumerate(train):
            if loaders.augment:
                x = loaders.augment(x, torch.Generator().manual_seed(epoch * 100_003 + step))
            x = x.contiguous(memory_format=torch.channels_last)
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch + step / steps, args.epochs, args.lr)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits.float(), y, label_smoothing=cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += len(y)
            correct += int((logits.argmax(1) == y).sum())
            loss_sum += float(loss) * len(y)
        val = top1(*predict(model, loaders.val))
        state["epoch"] = epoch + 1
        state["log"].append({"epoch": epoch + 1, "train_loss": round(loss_sum / seen, 4),
                             "train_acc": round(100 * correct / seen, 2), "val_top1": val,
                             "seconds": round(time.time() - started, 1)})
        print(json.dumps(state["log"][-1]), flush=True)
        save()

    # logits (mean of the image's and its mirror's) on validation, test and every training image
    train_ds = loaders.train.dataset
    splits = {"val": loaders.val, "test": loaders.test,
              "train": torch.utils.data.DataLoader(train_ds, batch_size=500)}
    outputs = {"teacher": {name: predict(model, loader, flip=True) for name, loader in splits.items()}}
    if args.ensemble_shipped:
        outputs["shipped largest"] = shipped_largest_logits(splits, loaders)
        outputs["teacher + shipped largest"] = {
            name: (torch.log((F.softmax(outputs["teacher"][name][0], 1)
                              + F.softmax(outputs["shipped largest"][name][0], 1)) / 2),
                   outputs["teacher"][name][1]) for name in splits}
    scores = {source: {f"{name}_top1": top1(*out[name]) for name in splits} for source, out in outputs.items()}
    # the soft labels come from the source best on validation (the test split stays unseen)
    chosen = max(scores, key=lambda source: scores[source]["val_top1"])
    train_logits, train_labels = outputs[chosen]["train"]
    from hwnas.supernet.soft_labels import save_soft_labels

    save_soft_labels(out / "soft_labels", train_logits, np.asarray(train_ds.indices), train_labels,
                     dataset=loaders.dataset, source=f"experiments/train_fashion_teacher.py: {chosen}")
    atomic_write_json(Path(args.results), {
        "command": "python experiments/train_fashion_teacher.py --epochs {} --width {}{}".format(
            args.epochs, args.width, " --ensemble-shipped" if args.ensemble_shipped else ""),
        "teacher": f"ResNet, 3 stages x 2 basic blocks, widths {args.width}/{2 * args.width}/{4 * args.width}, "
                   "28x28 input, bf16 autocast",
        "params": sum(p.numel() for p in model.parameters()),
        "epochs": args.epochs, "log": state["log"],
        "n": {name: len(outputs["teacher"][name][1]) for name in splits},
        "top1_flip_tta": scores, "soft_labels_from": chosen,
        "test_top1_teacher_no_tta": top1(*predict(model, loaders.test)),
    })


def shipped_largest_logits(splits: dict, loaders) -> dict:
    """The shipped supernet's largest subnet on the same images (BN recalibrated as every hwnas
    evaluation does), mean of the image's and its mirror's logits."""
    from hwnas.supernet.bn import recalibrate_bn
    from hwnas.supernet.data import calibration_loader, resize_batch
    from hwnas.supernet.pretrained import load_supernet

    net, _ = load_supernet(None)
    arch = net.space.max_arch()
    net.set_active_subnet(arch)
    calib = calibration_loader(loaders.train)
    recalibrate_bn(net, calib, len(calib), resolution=arch.r)
    net = net.to(memory_format=torch.channels_last).eval()
    result = {}
    with torch.no_grad():
        for name, loader in splits.items():
            logits, labels = [], []
            for x, y in loader:
                x = resize_batch(x, arch.r).contiguous(memory_format=torch.channels_last)
                logits.append((net(x) + net(x.flip(-1))) / 2)
                labels.append(y)
            result[name] = (torch.cat(logits).float(), torch.cat(labels))
    return result

if __name__ == "__main__":
    main()
