"""Build hwnas's embedded Fashion-MNIST copy (hwnas/assets/fashion-mnist/) from the original files.

    python experiments/make_fashion_embedded.py --source /usr/share/datasets/fashion-mnist

It holds the whole official test set (10,000 images), every training label, and 10,000 of the
60,000 training images: the default validation split (5,000, stratified, seed 0; the shipped
supernet never trained on them) and 5,000 more (500 a class) for BatchNorm and INT8 calibration
(500 and 128 images) and for fine-tuning a subnet on the embedded default. The shipped supernet is
trained on the original 55,000; training data for a new supernet comes from the original files.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hwnas.supernet.fashion_mnist import embedded_root, write_embedded

LICENSE = """Fashion-MNIST (https://github.com/zalandoresearch/fashion-mnist)

The MIT License (MIT) Copyright (c) 2017 Zalando SE

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES
OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    ap.add_argument("--dest", type=Path, default=embedded_root())
    ap.add_argument("--train-images", type=int, default=5000,
                    help="training images shipped besides the validation split")
    args = ap.parse_args()
    manifest = write_embedded(args.source, args.dest, args.train_images)
    (args.dest / "LICENSE").write_text(LICENSE)
    size = sum(p.stat().st_size for p in args.dest.iterdir())
    print(f"{args.dest}: {len(manifest['train_rows'])} training images "
          f"({manifest['val_images']} validation), 10000 test, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
