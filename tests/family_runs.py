"""Tiny checkpoints of the other families (issue 16) for accuracy and search tests: an untrained
supernet of the family over resolutions 32..40 and 10 classes, saved like a trained one (weights
do not matter for the plumbing; BN recalibration makes every subnet evaluable)."""

from __future__ import annotations

from pathlib import Path

FAMILIES = ("ofa-proxyless", "ofa-resnet50")
RESOLUTIONS = [32, 36, 40]


def save_family_supernet(family: str, folder: Path) -> Path:
    """The checkpoint stem of a fresh `family` supernet (seeded) in `folder`."""
    import torch

    from hwnas.families import get_family
    from hwnas.supernet.checkpoint import save_checkpoint

    fam = get_family(family)
    space = fam.space_from_dict({"r": RESOLUTIONS})
    torch.manual_seed(0)
    model = fam.supernet_for(space, 10)
    stem = Path(folder) / "supernet"
    save_checkpoint(stem, model, {"family": family, "space": space.to_dict(), "n_classes": 10,
                                  "dataset": "mnist-embedded", "class_names": [str(i) for i in range(10)]},
                    rng=False)
    return stem
