"""Every family the tests run on, and tiny checkpoints of them.

The family tests are parametrized over `every_family()`: hwnas's registry (`family_names()`), so a
family added there is tested without editing a test, plus TinyConvNet (``tests/families/tiny_convnet``),
a family defined only here and registered for the test that uses it (the `family` fixture in
``tests/conftest.py``), which proves the stages know families only through the registry.

A tiny checkpoint is an untrained supernet of the family over resolutions 32..40 and 10 classes,
saved like a trained one (weights do not matter for the plumbing; BN recalibration makes every
subnet evaluable)."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

RESOLUTIONS = [32, 36, 40]


def tiny_family_class():
    """The test-only family's class (``tests/conftest.py`` puts ``tests/families`` on sys.path)."""
    from tiny_convnet import TinyConvFamily

    return TinyConvFamily


def every_family() -> tuple[str, ...]:
    """hwnas's registered families, then the test-only one."""
    from hwnas.families import family_names

    return (*family_names(), tiny_family_class().name)


@contextmanager
def family_in_registry(name: str) -> Iterator[None]:
    """`name` registered for the block: the test-only family is registered, then unregistered."""
    from hwnas.families import family_names, registered_family

    cls = tiny_family_class()
    with registered_family(cls) if name == cls.name and name not in family_names() else nullcontext():
        yield


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
