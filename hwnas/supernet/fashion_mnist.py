"""Fashion-MNIST from its original idx files: the four ``.gz`` files of the dataset's own release
(Debian's ``dataset-fashion-mnist`` puts them in ``/usr/share/datasets/fashion-mnist/``), or the
embedded copy in ``hwnas/assets/fashion-mnist/``.

The validation split is held out of the 60,000 training images (stratified by class, seeded); the
test split is the official 10,000-image test set. The embedded copy holds every test image, every
training label and a subset of the training images (``manifest.json`` names their original rows):
the whole default validation split plus enough training images to calibrate BatchNorm, INT8 and to
fine-tune. It yields the same validation split as the full files, so a supernet trained on the full
set never saw an image it is validated on.

Fashion-MNIST: Copyright (c) 2017 Zalando SE, MIT licence (``assets/fashion-mnist/LICENSE``).
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from hwnas.errors import InputError

__all__ = ["FILES", "CLASS_NAMES", "VAL_IMAGES", "FashionArrays", "read_idx", "read_folder",
           "read_embedded", "embedded_root", "val_rows", "write_embedded", "write_idx"]

FILES = {"train_images": "train-images-idx3-ubyte.gz", "train_labels": "train-labels-idx1-ubyte.gz",
         "test_images": "t10k-images-idx3-ubyte.gz", "test_labels": "t10k-labels-idx1-ubyte.gz"}
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
               "Bag", "Ankle boot"]
#: training images held out as the validation split by default: 500 per class, so one subnet's
#: top-1 near 92% is measured to about +-0.4 points (binomial) and differences between subnets,
#: measured on the same images, to less
VAL_IMAGES = 5000
_HOW_TO_GET = ("the original release's four .gz files (on Debian: apt-get install dataset-fashion-mnist, "
               "then --data fashion-mnist:/usr/share/datasets/fashion-mnist)")
_MAGIC = {3: 0x00000803, 1: 0x00000801}  # unsigned bytes, 3-d images / 1-d labels
MAX_ITEMS = 1_000_000  # images or labels in one file (the training set holds 60,000)


def read_idx(path: Path, ndim: int, how_to_get: str = _HOW_TO_GET) -> np.ndarray:
    """One idx file (gzip or raw) as uint8 [N, 28, 28] images (`ndim` 3) or [N] labels (`ndim` 1);
    one InputError line naming the file for anything missing, truncated or not idx (and where to
    get it: `how_to_get`)."""
    path = Path(path)
    if path.is_dir() or not path.exists():
        raise InputError(f"{path} is missing; it comes with {how_to_get}")
    header = 4 + 4 * ndim
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
        # never more than the header announces (+1 byte to tell padding): a gzip bomb stops there
        with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as f:
            data = f.read(header)
            magic = int.from_bytes(data[:4], "big") if len(data) >= 4 else None
            if magic != _MAGIC[ndim]:
                what = "images (magic 2051)" if ndim == 3 else "labels (magic 2049)"
                raise InputError(f"{path} is not an idx file of {what}: it starts with "
                                 f"{data[:4].hex() or 'nothing'}; get {how_to_get} again")
            dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
            if len(data) < header or (ndim == 3 and dims[1:] != [28, 28]):
                raise InputError(f"{path} holds images of {dims[1:]} pixels, expected 28x28")
            if dims[0] > MAX_ITEMS:
                raise InputError(f"{path} announces {dims[0]:,} items, more than an idx file of Fashion-MNIST "
                                 f"holds ({MAX_ITEMS:,} at most); get {how_to_get} again")
            expected = header + int(np.prod(dims))
            data += f.read(expected - header + 1)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise InputError(f"{path} is damaged ({str(err).splitlines()[0] or type(err).__name__}); "
                         f"get {how_to_get} again") from None
    if len(data) != expected:
        held = f"more than {expected}" if len(data) > expected else f"{len(data)}"
        raise InputError(f"{path} is truncated or padded: {held} bytes where its header announces {expected}; "
                         f"get {how_to_get} again")
    array = np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)
    if ndim == 1 and array.size and int(array.max()) >= len(CLASS_NAMES):
        raise InputError(f"{path} has label {int(array.max())}; the labels are 0..9")
    return array


@dataclass
class FashionArrays:
    """Training images with their rows in the original training set, every training label, and
    the official test set."""

    train_images: np.ndarray  # [n, 28, 28] uint8
    train_rows: np.ndarray  # row of each in the original 60,000
    all_train_labels: np.ndarray  # [60,000] (every original training label)
    test_images: np.ndarray
    test_labels: np.ndarray


def _pair(root: Path, images: str, labels: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = read_idx(root / FILES[images], 3), read_idx(root / FILES[labels], 1)
    if len(x) != len(y):
        raise InputError(f"{root / FILES[images]} holds {len(x)} images but {root / FILES[labels]} "
                         f"{len(y)} labels; get {_HOW_TO_GET} again")
    return x, y


def read_folder(root: Path) -> FashionArrays:
    """The original release's four files in `root`."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"--data fashion-mnist:{root}: folder {root} does not exist; it needs "
                         f"{_HOW_TO_GET}")
    train_x, train_y = _pair(root, "train_images", "train_labels")
    test_x, test_y = _pair(root, "test_images", "test_labels")
    return FashionArrays(train_x, np.arange(len(train_x)), train_y, test_x, test_y)


def embedded_root() -> Path:
    return Path(str(resources.files("hwnas") / "assets" / "fashion-mnist"))


def read_embedded(root: Path | None = None) -> FashionArrays:
    """The copy that ships with hwnas (a subset of the training images, everything else whole)."""
    root = embedded_root() if root is None else Path(root)
    try:
        manifest = json.loads((root / "manifest.json").read_text())
        rows = np.asarray(manifest["train_rows"], dtype=np.int64)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"the embedded Fashion-MNIST copy in {root} is damaged ({err}); reinstall "
                         "hwnas, or use --data fashion-mnist:PATH with the original files") from None
    train_x = read_idx(root / FILES["train_images"], 3)
    all_y = read_idx(root / FILES["train_labels"], 1)
    test_x, test_y = _pair(root, "test_images", "test_labels")
    if len(train_x) != len(rows) or (len(rows) and int(rows.max()) >= len(all_y)):
        raise InputError(f"the embedded Fashion-MNIST copy in {root} is damaged (manifest and images "
                         "disagree); reinstall hwnas")
    return FashionArrays(train_x, rows, all_y, test_x, test_y)


def val_rows(all_train_labels: np.ndarray, val_images: int, seed: int) -> np.ndarray:
    """The original training rows held out for validation: `val_images` spread over the classes in
    their proportions, drawn with `seed` (sorted)."""
    from hwnas.supernet.splits import stratified_split

    fraction = val_images / len(all_train_labels)
    _, val, _ = stratified_split(all_train_labels, fraction, 0.0, seed)
    return val


def write_embedded(source: Path, dest: Path, train_images: int, seed: int = 0,
                   val_images: int = VAL_IMAGES) -> dict:
    """Build the embedded copy from the original files: the default validation split plus
    `train_images` other training images (stratified, seeded), the whole test set, every label."""
    full = read_folder(source)
    labels = full.all_train_labels
    val = val_rows(labels, val_images, seed)
    rest = np.setdiff1d(np.arange(len(labels)), val)
    rng = np.random.default_rng([seed, 1])
    picked = []
    for c in range(len(CLASS_NAMES)):
        of_class = rest[labels[rest] == c]
        picked.append(rng.permutation(of_class)[: round(train_images * len(of_class) / len(rest))])
    rows = np.sort(np.concatenate([val, *picked]))
    dest.mkdir(parents=True, exist_ok=True)
    write_idx(dest / FILES["train_images"], full.train_images[rows])
    for name in ("train_labels", "test_images", "test_labels"):
        (dest / FILES[name]).write_bytes((Path(source) / FILES[name]).read_bytes())
    manifest = {"source": "Fashion-MNIST, original release (Zalando Research), MIT licence",
                "train_rows": rows.tolist(), "val_images": val_images, "seed": seed,
                "train_images_besides_val": int(len(rows) - len(val))}
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def write_idx(path: Path, array: np.ndarray) -> None:
    """uint8 images [N, 28, 28] or labels [N] as a gzipped idx file (byte-reproducible: mtime 0)."""
    header = _MAGIC[array.ndim].to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())
