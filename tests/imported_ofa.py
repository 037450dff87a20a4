"""Test helpers: an official-format Once-for-All checkpoint (random weights) imported into hwnas, and
small generated image folders."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pytest
import torch


def make_image_folder(root: Path, per_class: dict[str, int], classes: Sequence[str], seed: int = 0,
                      size: int = 40) -> Path:
    """`split/` folders (e.g. train/, val/) with one subfolder of small PNGs per class (a colour
    per class + noise, so a network can tell them apart)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split, n in per_class.items():
        for c, name in enumerate(classes):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(n):
                img = rng.integers(0, 60, (size, size, 3), dtype=np.uint8)
                img[..., c % 3] += 150 if c < 3 else 90
                Image.fromarray(img).save(folder / f"{i}.png")
    return root


def import_random_ofa(folder: Path) -> Path:
    """An OFA-MobileNetV3 w1.0 checkpoint in Once-for-All's published format (random weights),
    imported with `hwnas supernet import`; returns the hwnas checkpoint stem."""
    from hwnas.cli import main
    from hwnas.space import SearchSpace
    from hwnas.supernet.ofa_mbv3 import OFAMobileNetV3

    torch.manual_seed(0)
    net = OFAMobileNetV3(SearchSpace(width_mult=1.0), n_classes=1000)
    src = folder / "ofa_mbv3_d234_e346_k357_w1.0"
    torch.save({"state_dict": net.state_dict(), "epoch": 1}, src)
    stem = folder / "ofa-w1.0"
    with pytest.raises(SystemExit) as done:
        main(["supernet", "import", "--from-ofa", str(src), "--family", "ofa-mbv3",
              "--width-mult", "1.0", "--out", str(stem)])
    assert done.value.code == 0
    return stem
