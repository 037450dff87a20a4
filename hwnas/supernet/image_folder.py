"""A class-per-subfolder image dataset read from a folder someone else may have made.

Unlike torchvision's `ImageFolder` it follows no directory symlink that loops (one line naming it),
counts each real file once (the same file under two classes is refused: its label would be a
coin toss), skips hidden folders and files (`.ipynb_checkpoints/`, `.DS_Store`) with a warning,
and checks every image before training: a header larger than `MAX_PIXELS` or a file that does not
decode is named in one line (exit 2) before any epoch starts, or skipped and counted with
``bad_images="skip"``. Decoding is bounded the same way when images are loaded.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from hwnas.errors import InputError

__all__ = ["ImageFiles", "BadImages", "IMAGE_SUFFIXES", "MAX_PIXELS"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
#: the most pixels one image may have (a 6000 x 6000 photo): larger headers are decompression bombs here
MAX_PIXELS = 36_000_000
BadImages = Literal["refuse", "skip"]


def _hidden(name: str) -> bool:
    return name.startswith(".") or name.startswith("__")


def _walk(top: Path, where: Path) -> list[Path]:
    """Image files under `top` (sorted), following directory symlinks that do not loop."""
    out: list[Path] = []
    seen: set[str] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        real = os.path.realpath(folder)
        if real in seen:
            continue
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            raise InputError(f"image folder {where}: cannot read {folder} ({err.strerror})") from None
        for entry in entries:
            if _hidden(entry.name):
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=True):
                if entry.is_symlink():
                    target = os.path.realpath(path)
                    if real == target or real.startswith(target.rstrip(os.sep) + os.sep) or target in seen:
                        raise InputError(f"image folder {where}: {path.relative_to(where)} is a symlink to "
                                         f"a folder above it or already read (a loop); remove it")
                stack.append(path)
            elif entry.is_file(follow_symlinks=True) and path.suffix.lower() in IMAGE_SUFFIXES:
                out.append(path)
    return sorted(out)


@contextlib.contextmanager
def _bounded() -> Iterator[None]:
    """PIL's decompression-bomb warning off: the size is checked against MAX_PIXELS instead."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        yield


def _decode(path: str | Path, check: bool = False) -> tuple[Any, str | None]:
    """(the RGB image, None), or (None, why not) for a file that does not decode or has more than
    MAX_PIXELS. `check`: only whether it decodes ((None, None) when it does), a JPEG at 1/8 scale
    (every byte read, 1/64 the pixels)."""
    from PIL import Image

    try:
        with _bounded(), Image.open(path) as img:
            w, h = img.size
            if w * h > MAX_PIXELS:
                return None, f"{w} x {h} pixels is more than {MAX_PIXELS:,}"
            if check:
                img.draft(img.mode, (max(1, w // 8), max(1, h // 8)))
                img.load()
                return None, None
            return img.convert("RGB"), None
    except Image.DecompressionBombError:
        return None, f"more than {MAX_PIXELS:,} pixels"
    except (OSError, SyntaxError, ValueError) as err:
        return None, str(err).splitlines()[0] if str(err) else type(err).__name__


class ImageFiles:
    """Images of `root`/<class>/..., labelled by their class folder in sorted order.

    `classes`, `targets`, `samples` [(path, label)], `transform`, `target_transform` as torchvision's
    ImageFolder has them, so the rest of the data pipeline treats both alike."""

    def __init__(self, root: str | os.PathLike[str], transform: Callable | None = None,
                 bad_images: BadImages = "refuse", check: bool = True):
        root = Path(root)
        self.root, self.transform, self.target_transform = root, transform, None
        try:
            folders = sorted((e for e in os.scandir(root) if e.is_dir(follow_symlinks=True)), key=lambda e: e.name)
        except OSError as err:
            raise InputError(f"image folder {root} cannot be read ({err.strerror})") from None
        hidden = [e.name for e in folders if _hidden(e.name)]
        if hidden:
            warnings.warn(f"image folder {root}: skipped hidden folders {', '.join(hidden[:5])} (not classes)",
                          stacklevel=2)
        self.classes = [e.name for e in folders if not _hidden(e.name)]
        owner: dict[str, str] = {}
        samples: list[tuple[str, int]] = []
        for label, name in enumerate(self.classes):
            files = _walk(root / name, root)
            if not files:
                raise InputError(f"image folder {root}: class folder {name}/ holds no usable images "
                                 f"({', '.join(IMAGE_SUFFIXES)}); add some or remove it")
            for path in files:
                real = os.path.realpath(path)
                if real in owner:
                    if owner[real] != name:
                        raise InputError(f"image folder {root}: {path.relative_to(root)} is the same file as "
                                         f"one in {owner[real]}/ (a link): one image, two labels; remove one")
                    continue
                owner[real] = name
                samples.append((str(path), label))
        if not samples:
            raise InputError(f"image folder {root} has no usable images; it needs one subfolder of images "
                             f"per class ({', '.join(IMAGE_SUFFIXES)})")
        if check:
            samples = self._checked(samples, bad_images)
        self.samples = samples
        self.targets = [label for _, label in samples]

    def with_transform(self, transform: Callable | None) -> "ImageFiles":
        """The same images (not scanned or checked again) with another transform."""
        other = object.__new__(ImageFiles)
        other.__dict__.update(self.__dict__, transform=transform, target_transform=None)
        return other

    def _checked(self, samples: list[tuple[str, int]], bad_images: BadImages) -> list[tuple[str, int]]:
        good, bad = [], []
        for path, label in samples:
            why = _decode(path, check=True)[1]
            if why is None:
                good.append((path, label))
            elif bad_images == "refuse":
                raise InputError(f"image folder {self.root}: {Path(path).relative_to(self.root)} is not a "
                                 f"usable image ({why}); remove or replace it, or skip such files with "
                                 "--set data.bad_images=skip")
            else:
                bad.append(path)
        if bad:
            warnings.warn(f"image folder {self.root}: skipped {len(bad)} image(s) that do not decode, e.g. "
                          f"{Path(bad[0]).relative_to(self.root)}", stacklevel=3)
        if not good:
            raise InputError(f"image folder {self.root}: none of its {len(samples)} images decodes")
        return good

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        path, label = self.samples[index]
        image, why = _decode(path)
        if why is not None:  # changed since it was checked
            raise InputError(f"image {path} is not a usable image any more ({why}); remove or replace it")
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label
