"""The embedded MNIST digits (`--data mnist-embedded`): 5,000 real digits of MNIST's training set
(500 per class), shipped in ``hwnas/assets/mnist-digits/`` as idx files, the format of MNIST's own
release (built once by `experiments/make_mnist_embedded.py`). A small, solved dataset kept for fast
tests and for transfer experiments; Fashion-MNIST is the default.

MNIST: Yann LeCun and Corinna Cortes, CC BY-SA 3.0 (``assets/mnist-digits/NOTICE``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from hwnas.errors import InputError

__all__ = ["FILES", "digits_root", "read_digits"]

FILES = {"images": "images-idx3-ubyte.gz", "labels": "labels-idx1-ubyte.gz"}
_DAMAGED = "the embedded MNIST digits are damaged; reinstall hwnas"


def digits_root() -> Path:
    return Path(str(resources.files("hwnas") / "assets" / "mnist-digits"))


def read_digits(root: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images [5000, 28, 28], labels [5000]) in their shipped order."""
    from hwnas.supernet.fashion_mnist import read_idx

    root = digits_root() if root is None else Path(root)
    images = read_idx(root / FILES["images"], 3, how_to_get="hwnas's own copy: reinstall hwnas")
    labels = read_idx(root / FILES["labels"], 1, how_to_get="hwnas's own copy: reinstall hwnas")
    if len(images) != len(labels):
        raise InputError(_DAMAGED)
    return images, labels
