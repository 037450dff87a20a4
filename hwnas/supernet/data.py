"""Datasets for training and evaluating the once-for-all supernet.

Every dataset yields normalised float images at one *base* size. Once-for-All trains each batch at
a resolution drawn from the search space's list, so resizing happens per batch, not per image: the
trainer draws ``r = ResolutionSampler(...)(step)`` and calls ``resize_batch(x, r)`` (one bilinear
interpolate over the whole batch, cheap on CPU). Sources: ``fashion-mnist`` (default),
``mnist-embedded``, ``imagefolder``, ``cifar10`` / ``cifar100``; nothing is ever downloaded.

Each source's sizes and train / validation / test splits: docs/pipeline.md, 'Datasets'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence, get_args

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator
from torch.utils.data import DataLoader, Dataset, Sampler, Subset

from hwnas.errors import InputError
from hwnas.supernet.splits import stratified_split

__all__ = [
    "DataConfig",
    "Loaders",
    "ArrayImageDataset",
    "Augment",
    "EpochShuffleSampler",
    "ResolutionSampler",
    "build_loaders",
    "calibration_loader",
    "BN_IMAGES",
    "KIT_CALIBRATION_IMAGES",
    "CALIBRATION_BATCH",
    "resize_batch",
    "stratified_split",
]

DatasetName = Literal["fashion-mnist", "mnist-embedded", "imagefolder", "cifar10", "cifar100"]
#: datasets that ship with hwnas: ``--data NAME`` needs no path
EMBEDDED = ("fashion-mnist", "mnist-embedded")
#: the dataset a run, a training config or a checkpoint without one uses
DEFAULT_DATASET = "fashion-mnist"
# Fashion-MNIST's 60,000 training images (fixed, so the embedded subset normalises like the full set)
_FASHION_MEAN, _FASHION_STD = (0.2860,) * 3, (0.3530,) * 3
_IMAGENET_MEAN = (0.485, 0.456, 0.406)  # an image folder is not scanned to compute its statistics
_IMAGENET_STD = (0.229, 0.224, 0.225)
_CIFAR_FOLDERS = {"cifar10": ("CIFAR-10", "cifar-10-batches-py", "cifar-10-python.tar.gz"),
                  "cifar100": ("CIFAR-100", "cifar-100-python", "cifar-100-python.tar.gz")}


_LATER_FIELDS = ("bad_images",)


class DataConfig(BaseModel):
    """Which dataset to load and how to batch it."""

    model_config = ConfigDict(extra="forbid")

    name: DatasetName = DEFAULT_DATASET
    root: Path | None = None  # required for every dataset but the embedded ones (optional for fashion-mnist)
    batch_size: int = Field(64, ge=1)
    num_workers: int = Field(0, ge=0)
    seed: int = 0
    val_fraction: float = Field(0.1, gt=0.0, lt=1.0)
    test_fraction: float = Field(0.1, ge=0.0, lt=1.0)  # only used where no test split exists
    image_size: int = Field(224, ge=8)  # base size of image-folder images (ignored elsewhere)
    augment: bool = True  # random crop/flip of training images (digits are never flipped)
    # at most this many training images are held out as the validation split (Once-for-All holds
    # out 10,000 of ImageNet's train/; 10% would be 128,000 evaluated per subnet)
    val_images: int | None = Field(None, ge=1)
    # an image folder's labels are mapped onto these class names, in the classifier's output order
    # (a supernet's own classes; None = the folder's classes in sorted order)
    classes: list[str] | None = None
    # image folders: an image that does not decode stops before training ("refuse", naming it) or
    # is left out and counted ("skip")
    bad_images: Literal["refuse", "skip"] = "refuse"

    @classmethod
    def from_spec(cls, spec: str) -> "DataConfig":
        """``NAME[:PATH]`` as the CLI's ``--data`` takes it: ``imagefolder:/data/imagenet``
        (train/ and val/ class folders), ``cifar10:PATH``, ``cifar100:PATH``, ``fashion-mnist``
        (embedded) or ``fashion-mnist:PATH`` (the original idx files), ``mnist-embedded``."""
        name, _, root = str(spec).partition(":")
        names = get_args(DatasetName)
        if name not in names:
            raise InputError(f"--data {spec!r}: unknown dataset {name!r}; use one of "
                             f"{', '.join(n + ('' if n in EMBEDDED else ':PATH') for n in names)}, "
                             "or fashion-mnist:PATH")
        if name == "mnist-embedded":
            if root:
                raise InputError("--data mnist-embedded takes no path (the digits ship with hwnas)")
            return cls(name=name)
        if name == "fashion-mnist" and not root:
            return cls(name=name)
        if not root:
            raise InputError(f"--data {name} needs a folder: --data {name}:PATH")
        if not Path(root).expanduser().is_dir():
            raise InputError(f"--data {spec!r}: folder {root} does not exist")
        extra = {"val_images": 10_000} if name == "imagefolder" else {}
        if name == "fashion-mnist" and not Path(root).expanduser().is_dir():
            raise InputError(f"--data {spec!r}: folder {root} does not exist; it needs the original "
                             "four .gz files (on Debian: apt-get install dataset-fashion-mnist, then "
                             "--data fashion-mnist:/usr/share/datasets/fashion-mnist)")
        return cls(name=name, root=Path(root).expanduser().resolve(), **extra)

    @model_serializer(mode="wrap")
    def _without_later_defaults(self, handler: Any) -> dict[str, Any]:
        """Fields added after runs, checkpoints and shipped keys recorded data configs are left out
        at their default, so those records still match the config they were made with."""
        out = handler(self)
        for name in _LATER_FIELDS:
            if out.get(name) == type(self).model_fields[name].default:
                out.pop(name)
        return out

    @model_validator(mode="after")
    def _fractions_leave_training_data(self) -> "DataConfig":
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ValueError(f"val_fraction + test_fraction = {self.val_fraction + self.test_fraction}"
                             " leaves no training data; keep their sum below 1")
        return self


@dataclass(frozen=True)
class Augment:
    """Random flips and shifts of a training batch, drawn from the caller's seeded generator (the
    datasets yield clean images: BN calibration and evaluation see the same pixels every time, and
    a resumed training draws the same augmentation for the same step)."""

    flip: bool = False
    shift: int = 0  # translate by up to this many pixels; the border is background
    background: tuple[float, ...] = (0.0, 0.0, 0.0)  # normalised value of a 0 pixel, per channel

    def __bool__(self) -> bool:
        return self.flip or self.shift > 0

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if not self:
            return x
        n, _, h, w = x.shape
        if self.shift:
            p = self.shift
            fill = torch.tensor(self.background, dtype=x.dtype).view(1, -1, 1, 1)
            padded = fill.expand(n, -1, h + 2 * p, w + 2 * p).clone()
            padded[:, :, p:p + h, p:p + w] = x
            offsets = torch.randint(0, 2 * p + 1, (n, 2), generator=generator).tolist()
            x = torch.stack([padded[i, :, dy:dy + h, dx:dx + w] for i, (dy, dx) in enumerate(offsets)])
        if self.flip:
            flips = torch.rand(n, generator=generator) < 0.5
            x = torch.where(flips.view(-1, 1, 1, 1), x.flip(-1), x)
        return x


@dataclass
class Loaders:
    """The three loaders plus what a checkpoint must remember about the data."""

    train: DataLoader
    val: DataLoader
    test: DataLoader
    n_classes: int
    class_names: list[str]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    dataset: str
    image_size: int  # base size of the images the loaders yield
    augment: Augment = Augment()  # what training applies to its batches (`Augment`)
    empty: dict[str, str] = field(default_factory=dict)  # split -> why it holds no image (`require_split`)

    def require_split(self, split: str) -> None:
        """One line, before anything slow, when `split` holds no image (a stage that trains or
        reports on it needs it): why, and how to get one."""
        if split in self.empty:
            raise InputError(self.empty[split])
        if len(getattr(self, split).dataset) == 0:
            raise InputError(f"the {split} split holds no image; lower the other splits' fractions or add images")


# -- per-batch resolution ---------------------------------------------------------------------
def resize_batch(x: torch.Tensor, r: int | None) -> torch.Tensor:
    """Resize a [B, C, H, W] batch to r x r (bilinear, no antialias); unchanged when r is None
    or already the batch's size."""
    if r is None or tuple(x.shape[-2:]) == (r, r):
        return x
    return F.interpolate(x, size=(r, r), mode="bilinear", align_corners=False, antialias=False)


#: training images INT8 devices calibrate on: 512 for the percentile ranges of `hwnas.devices.quantize`
#: (with 128, the shipped supernet's largest subnet lost 0.51 points of top-1, with 512 0.32)
CALIBRATION_IMAGES = 512
#: images a TensorRT build kit carries for its own calibrator (calib.npy, shipped in the bundle)
KIT_CALIBRATION_IMAGES = 128


def spread_images(dataset, n: int, r: int | None = None):
    """(`n` images spread evenly over `dataset` (splits are sorted by class, so the first `n` would
    all be one class) as float32 NCHW numpy at resolution `r` (None: as stored), their labels)."""
    import numpy as np

    from hwnas.errors import InputError

    if len(dataset) == 0:
        raise InputError("the dataset split is empty: no images to take")
    picks = np.unique(np.linspace(0, len(dataset) - 1, min(n, len(dataset))).round().astype(int))
    items = [dataset[int(i)] for i in picks]
    x = resize_batch(torch.stack([item[0] for item in items]).float(), r)
    return np.ascontiguousarray(x.numpy().astype(np.float32)), np.array([int(item[1]) for item in items])


@dataclass(frozen=True)
class ResolutionSampler:
    """Draws the resolution of each training batch from `choices` (Once-for-All's elastic
    resolution).

    The draw is a pure function of ``(seed, step)``: a resumed run gets the same resolutions from
    the step counter alone, with no sampler state to checkpoint.
    """

    choices: tuple[int, ...]
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.choices:
            raise InputError("a resolution sampler needs at least one resolution")
        object.__setattr__(self, "choices", tuple(int(c) for c in self.choices))

    @classmethod
    def from_space(cls, space: Any, seed: int = 0) -> "ResolutionSampler":
        """Sample from a space's resolution list (`space.r_choices`, any family's)."""
        return cls(tuple(space.r_choices), seed)

    def __call__(self, step: int) -> int:
        word = np.random.SeedSequence([self.seed, int(step)]).generate_state(1)[0]
        return self.choices[int(word) % len(self.choices)]


# -- datasets ---------------------------------------------------------------------------------
class ArrayImageDataset(Dataset):
    """uint8 images held in memory ([N, C, H, W], C = 1 or 3), normalised on access.

    Grey images are replicated to 3 channels. `indices` are the rows' positions in the source
    dataset, so splits can be checked for overlap and traced back.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, indices: np.ndarray,
                 mean: Sequence[float], std: Sequence[float]):
        self.images, self.labels, self.indices = images, labels, np.asarray(indices)
        self.mean = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].float().div_(255.0).expand(3, -1, -1)
        return (x - self.mean) / self.std, int(self.labels[i])


class EpochShuffleSampler(Sampler[int]):
    """A shuffle that depends only on ``(seed, epoch)``, so a resumed run sees the same order.

    Each iteration uses the current epoch and then advances it; `set_epoch` jumps to an epoch.
    """

    def __init__(self, n: int, seed: int = 0):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        self.epoch += 1
        return iter(order.tolist())


def _channel_stats(images: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean/std of uint8 [N, C, H, W] images in [0, 1], replicated to 3 channels."""
    x = images.float().div_(255.0).transpose(0, 1).reshape(images.shape[1], -1)
    mean, std = x.mean(dim=1).tolist(), x.std(dim=1).tolist()
    if len(mean) == 1:
        mean, std = mean * 3, std * 3
    return tuple(mean), tuple(std)


@dataclass
class _Splits:
    """Datasets of one source before they are wrapped into loaders."""

    train: Dataset
    val: Dataset
    test: Dataset
    class_names: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    image_size: int
    augment: Augment = Augment()
    empty: dict[str, str] = field(default_factory=dict)  # split -> why it holds no image


def _array_splits(images: torch.Tensor, labels: torch.Tensor, class_names: list[str],
                  split: tuple[np.ndarray, np.ndarray, np.ndarray], flip: bool, shift: int = 0,
                  stats: tuple[tuple[float, ...], tuple[float, ...]] | None = None) -> _Splits:
    """Wrap in-memory arrays; normalisation statistics are `stats`, else the training split's."""
    train_idx, val_idx, test_idx = split
    mean, std = stats or _channel_stats(images[torch.from_numpy(train_idx)])

    def make(idx: np.ndarray, train: bool) -> ArrayImageDataset:
        t = torch.from_numpy(idx)
        return ArrayImageDataset(images[t], labels[t], idx, mean, std)

    background = tuple(-m / sd for m, sd in zip(mean, std))
    return _Splits(make(train_idx, True), make(val_idx, False), make(test_idx, False),
                   class_names, mean, std, int(images.shape[-1]), Augment(flip, shift, background))


def _mnist_embedded(cfg: DataConfig) -> _Splits:
    from hwnas.supernet.mnist_digits import read_digits

    x, y = read_digits()
    images = torch.from_numpy(np.array(x)[:, None])  # a writable copy (the idx bytes are read-only)
    labels = torch.from_numpy(y.astype(np.int64))
    split = stratified_split(labels.numpy(), cfg.val_fraction, cfg.test_fraction, cfg.seed)
    # digits are never flipped (a mirrored 2 or 7 is no digit), but shifted like Fashion-MNIST
    return _array_splits(images, labels, [str(i) for i in range(10)], split, flip=False,
                         shift=2 if cfg.augment else 0)


def _fashion_mnist(cfg: DataConfig) -> _Splits:
    """The embedded copy, or the original files under `root`; validation held out of the training
    images (the same rows either way), the official test set as the test split."""
    from hwnas.supernet import fashion_mnist as fm

    arrays = fm.read_embedded() if cfg.root is None else fm.read_folder(Path(cfg.root).expanduser())
    n_val = cfg.val_images or fm.VAL_IMAGES
    if n_val >= len(arrays.all_train_labels):
        raise InputError(f"val_images {n_val} leaves no Fashion-MNIST training images; keep it below "
                         f"{len(arrays.all_train_labels)}")
    val = fm.val_rows(arrays.all_train_labels, n_val, cfg.seed)
    if np.setdiff1d(val, arrays.train_rows).size:
        raise InputError(f"the embedded Fashion-MNIST copy holds the validation split of seed 0 and "
                         f"{fm.VAL_IMAGES} images; for seed {cfg.seed} / {n_val} images use the original "
                         "files: --data fashion-mnist:PATH")
    val_pos = np.searchsorted(arrays.train_rows, val)
    train_pos = np.setdiff1d(np.arange(len(arrays.train_rows)), val_pos)
    n = len(arrays.train_rows)
    images = torch.from_numpy(np.concatenate([arrays.train_images, arrays.test_images])[:, None])
    labels = torch.from_numpy(np.concatenate([arrays.all_train_labels[arrays.train_rows],
                                              arrays.test_labels]).astype(np.int64))
    split = (train_pos, val_pos, np.arange(n, n + len(arrays.test_labels)))
    return _array_splits(images, labels, list(fm.CLASS_NAMES), split, flip=cfg.augment,
                         shift=2 if cfg.augment else 0, stats=(_FASHION_MEAN, _FASHION_STD))


def _require_root(cfg: DataConfig) -> Path:
    if cfg.root is None:
        raise InputError(f"dataset {cfg.name!r} needs a root folder; set root to where it is on "
                         "disk, or use name='mnist-embedded' for the bundled digits")
    return Path(cfg.root).expanduser()


def _cifar(cfg: DataConfig) -> _Splits:
    from torchvision.datasets import CIFAR10, CIFAR100

    title, folder, archive = _CIFAR_FOLDERS[cfg.name]
    root = _require_root(cfg)
    if root.name == folder:  # the extracted folder itself was given
        root = root.parent
    if not (root / folder).is_dir():
        raise InputError(f"{title} not found under {root}: expected {folder}/; hwnas never "
                         f"downloads, extract {archive} there")
    cls = CIFAR10 if cfg.name == "cifar10" else CIFAR100
    try:
        train, test = cls(str(root), train=True, download=False), cls(str(root), train=False, download=False)
    except (RuntimeError, OSError, ValueError) as err:
        raise InputError(f"{title} under {root / folder} is incomplete or corrupted "
                         f"({str(err).splitlines()[0]}); extract {archive} there again") from None
    images = torch.from_numpy(np.concatenate([train.data, test.data])).permute(0, 3, 1, 2).contiguous()
    labels = torch.tensor(list(train.targets) + list(test.targets), dtype=torch.int64)
    n_train = len(train.targets)
    tr, va, _ = stratified_split(train.targets, cfg.val_fraction, 0.0, cfg.seed)
    split = (tr, va, np.arange(n_train, len(labels), dtype=np.int64))
    return _array_splits(images, labels, list(train.classes), split, flip=cfg.augment)


def _folder_transforms(cfg: DataConfig):
    from torchvision import transforms as T

    norm = [T.ToTensor(), T.Normalize(_IMAGENET_MEAN, _IMAGENET_STD)]
    size = cfg.image_size
    evaluate = T.Compose([T.Resize(int(round(size / 0.875))), T.CenterCrop(size), *norm])
    if not cfg.augment:
        return evaluate, evaluate
    train = T.Compose([T.RandomResizedCrop(size, scale=(0.35, 1.0)), T.RandomHorizontalFlip(), *norm])
    return train, evaluate


def _image_folder(path: Path, transform, cfg: DataConfig):
    from hwnas.supernet.image_folder import ImageFiles

    return ImageFiles(path, transform=transform, bad_images=cfg.bad_images)


def _too_small(split: str, where: Path, labels: Sequence[int], classes: list[str], fraction: float) -> InputError:
    counts = np.bincount(np.asarray(labels), minlength=len(classes))
    smallest = int(counts.argmin())
    return InputError(f"image folder {where}: no images left for the {split} split ({fraction:g} of each "
                      f"class, rounded; the smallest class, {classes[smallest]!r}, has {counts[smallest]} "
                      f"image(s)); add images (at least {int(np.ceil(0.5 / fraction))} per class) or give "
                      f"the split its own folder (train/ and val/)")


def _imagefolder(cfg: DataConfig) -> _Splits:
    root = _require_root(cfg)
    if not root.is_dir():
        raise InputError(f"image folder {root} does not exist; point root at a folder with "
                         "train/ and val/ (or one subfolder per class)")
    train_tf, eval_tf = _folder_transforms(cfg)
    has = {name: (root / name).is_dir() for name in ("train", "val", "test")}
    base = root / "train" if has["train"] else root
    val_dir = root / "val" if has["train"] and has["val"] and has["test"] else None
    test_dir = (root / "test" if has["train"] and has["test"]
                else root / "val" if has["train"] and has["val"] else None)
    train_src = _image_folder(base, train_tf, cfg)
    eval_src = train_src.with_transform(eval_tf)
    classes = list(train_src.classes)
    if len(classes) < 2:
        raise InputError(f"image folder {base} has {len(classes)} class; a classifier needs at least 2 "
                         "(one subfolder per class)")
    labels = _LabelMap.between(classes, cfg.classes, base)
    empty: dict[str, str] = {}
    if val_dir is not None:
        tr, val = np.arange(len(train_src)), _checked_folder(val_dir, eval_tf, classes, cfg)
    else:  # hold out part of the training images for validation
        fraction = cfg.val_fraction
        if cfg.val_images is not None:
            fraction = min(fraction, cfg.val_images / max(len(train_src), 1))
        tr, va, te = stratified_split(train_src.targets, fraction,
                                      0.0 if test_dir else cfg.test_fraction, cfg.seed)
        if len(va) == 0:
            empty["val"] = str(_too_small("validation", base, train_src.targets, classes, fraction))
        if test_dir is None and cfg.test_fraction > 0 and len(te) == 0:
            empty["test"] = str(_too_small("test", base, train_src.targets, classes, cfg.test_fraction))
        val = Subset(eval_src, va.tolist())
    test = _checked_folder(test_dir, eval_tf, classes, cfg) if test_dir else Subset(eval_src, te.tolist())
    for ds in {id(d): d for d in (train_src, eval_src, val, test)}.values():
        if hasattr(ds, "target_transform"):
            ds.target_transform = labels
    return _Splits(Subset(train_src, tr.tolist()), val, test, labels.names,
                   _IMAGENET_MEAN, _IMAGENET_STD, cfg.image_size, empty=empty)


class _LabelMap:
    """Folder label -> classifier output index (a class, not a lambda: loader workers pickle it)."""

    def __init__(self, table: list[int], names: list[str]):
        self.table, self.names = table, names

    def __call__(self, label: int) -> int:
        return self.table[label]

    @classmethod
    def between(cls, folder: list[str], model: list[str] | None, where: Path) -> "_LabelMap":
        """Folders named like the classifier's classes map by name (any subset); otherwise a folder
        with exactly as many classes as the classifier maps in sorted order (ImageFolder's and
        Once-for-All's convention for ImageNet's train/ and val/)."""
        if model is None or folder == model:
            return cls(list(range(len(folder))), list(folder))
        index = {name: i for i, name in enumerate(model)}
        if all(name in index for name in folder):
            return cls([index[name] for name in folder], list(model))
        if len(folder) == len(model):
            return cls(list(range(len(folder))), list(model))
        raise InputError(f"image folder {where} has {len(folder)} classes ({', '.join(folder[:3])}...) "
                         f"but the supernet classifies {len(model)}; point at a folder with one "
                         f"subfolder per class of the supernet ({len(model)}), named as its classes "
                         "or in its class order")


def _checked_folder(path: Path, transform, classes: list[str], cfg: DataConfig):
    ds = _image_folder(path, transform, cfg)
    if ds.classes != classes:
        raise InputError(f"{path} has classes {ds.classes[:5]}... but train/ has {classes[:5]}...; "
                         "every split needs the same class subfolders")
    return ds


_SOURCES = {"fashion-mnist": _fashion_mnist, "mnist-embedded": _mnist_embedded, "cifar10": _cifar, "cifar100": _cifar,
            "imagefolder": _imagefolder}


def build_loaders(cfg: DataConfig | None = None) -> Loaders:
    """Build train/val/test loaders; the same config (seed included) gives the same batches."""
    cfg = cfg or DataConfig()
    splits = _SOURCES[cfg.name](cfg)
    if len(splits.train) == 0:
        raise InputError(f"dataset {cfg.name!r} has no training images after the split; "
                         "lower val_fraction/test_fraction or add images")

    def loader(ds: Dataset, train: bool) -> DataLoader:
        return DataLoader(
            ds, batch_size=cfg.batch_size, num_workers=cfg.num_workers,
            sampler=EpochShuffleSampler(len(ds), cfg.seed) if train else None,
            drop_last=train and len(ds) > cfg.batch_size,  # a 1-image batch breaks BatchNorm
            generator=torch.Generator().manual_seed(cfg.seed),  # seeds workers' augmentation
            persistent_workers=cfg.num_workers > 0)

    return Loaders(loader(splits.train, True), loader(splits.val, False), loader(splits.test, False),
                   n_classes=len(splits.class_names), class_names=splits.class_names,
                   mean=tuple(splits.mean), std=tuple(splits.std),  # type: ignore[arg-type]
                   dataset=cfg.name, image_size=splits.image_size, augment=splits.augment, empty=dict(splits.empty))


# BatchNorm recalibration runs BN in training mode, so every layer normalises with its *batch's*
# statistics while the running ones are collected: small batches bend what deeper layers see away
# from inference. One batch of up to 500 images measured +0.8 to +3.4 top-1 points (median +1.6)
# over batches of 64 on the MNIST supernet (experiments/results/bn_calibration.json), at the same cost.
CALIBRATION_BATCH = 500
# Calibration images per subnet: every evaluation in hwnas uses this default. 2,000 as in
# Once-for-All's own evaluation: on the shipped Fashion-MNIST supernet (16 subnets, 5,000
# validation images; experiments/results/bn_noise.json) two calibration draws of 500 images moved
# a subnet's top-1 by 0.16 points (std of the difference), two of 2,000 by 0.07; 2,000 also
# measured +0.15 points on average.
BN_IMAGES = 2000


def calibration_loader(train: DataLoader, n_images: int = BN_IMAGES, seed: int = 0,
                       batch_size: int | None = None) -> DataLoader:
    """A fixed random subset of the training set, in a fixed order, for BN recalibration.

    Every subnet is then calibrated on the same images (Once-for-All's ``sub_train_loader``), so
    accuracy differences between subnets are not noise from different calibration batches, and
    iterating it does not advance the training loader's shuffle. Batches hold up to
    `CALIBRATION_BATCH` images (see above), split evenly.
    """
    n = len(train.dataset)
    picked = np.sort(np.random.default_rng(seed).permutation(n)[: min(n_images, n)])
    if batch_size is None:
        chunks = -(-len(picked) // CALIBRATION_BATCH)
        batch_size = -(-len(picked) // max(chunks, 1))
    return DataLoader(Subset(train.dataset, picked.tolist()), batch_size=max(1, batch_size),
                      shuffle=False, num_workers=train.num_workers)
