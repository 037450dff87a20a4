"""Stored soft labels: a teacher's logits for a dataset's training images, to distil from.

A teacher that is not a subnet of the supernet (another architecture, trained here or elsewhere,
e.g. on a GPU) teaches through its outputs alone: `hwnas train` with ``distill: stored`` and
``soft_labels: STEM`` looks each training image's logits up instead of running a teacher, so
distillation costs nothing per step. The teacher saw the clean image (and its mirror, averaged);
training's flips and shifts of a few pixels keep the label's meaning.

A file pair, never pickle:

- ``STEM.safetensors``: ``logits`` [N, C] float32, ``indices`` [N] int64 (each row's position in
  the dataset's original training images) and ``labels`` [N] int64;
- ``STEM.json``: the dataset's name, the class count, where the logits came from, and the sha256
  of the safetensors file (written last: if it exists the pair is complete).

Loading checks the pair against the training split: same dataset, every training image covered,
and the stored labels equal to the split's (a different split or dataset is one clear line).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load, save as st_save

from hwnas.errors import InputError
from hwnas.fileio import atomic_write_bytes, atomic_write_json, file_stem

FORMAT = "hwnas-soft-labels/1"


def _paths(stem: str | Path) -> tuple[Path, Path]:
    stem = file_stem(stem, (".safetensors", ".json"))
    return Path(stem + ".safetensors"), Path(stem + ".json")


def save_soft_labels(stem: str | Path, logits: torch.Tensor, indices: Sequence[int] | np.ndarray,
                     labels: Sequence[int] | torch.Tensor, dataset: str, source: str) -> Path:
    """Write a teacher's `logits` for the training images at `indices` (positions in the
    dataset's original training images) with their `labels`; returns the JSON's path."""
    logits = torch.as_tensor(logits, dtype=torch.float32).contiguous()
    indices_t = torch.as_tensor(np.asarray(indices), dtype=torch.int64).contiguous()
    labels_t = torch.as_tensor(labels, dtype=torch.int64).contiguous()
    if logits.ndim != 2 or not (len(logits) == len(indices_t) == len(labels_t)):
        raise ValueError(f"logits {tuple(logits.shape)}, indices {len(indices_t)} and labels "
                         f"{len(labels_t)} must be [N, C], [N] and [N]")
    blob = st_save({"logits": logits, "indices": indices_t, "labels": labels_t})
    weights, meta = _paths(stem)
    weights.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(weights, blob)
    atomic_write_json(meta, {"format": FORMAT, "dataset": dataset, "n_images": len(logits),
                             "n_classes": logits.shape[1], "source": source,
                             "sha256": hashlib.sha256(blob).hexdigest()})
    return meta


@dataclass(frozen=True)
class SoftLabels:
    """Logits by original training-image position (`for_indices`)."""

    logits: torch.Tensor  # [max index + 1, C]; rows of images the file does not hold are unused
    dataset: str
    source: str
    sha256: str  # of the safetensors file: a resumed run checks it learns from the same logits

    def for_indices(self, indices: Sequence[int] | np.ndarray | torch.Tensor) -> torch.Tensor:
        return self.logits[torch.as_tensor(np.asarray(indices), dtype=torch.int64)]


def load_soft_labels(stem: str | Path, dataset: str, train_indices: np.ndarray,
                     train_labels: Sequence[int] | torch.Tensor, n_classes: int) -> SoftLabels:
    """Read a soft-label pair and check that it covers this training split (see the module doc)."""
    weights, meta_path = _paths(stem)
    fix = "write it with hwnas.supernet.soft_labels.save_soft_labels (see experiments/train_fashion_teacher.py)"
    try:
        meta = json.loads(meta_path.read_text())
        blob = weights.read_bytes()
    except FileNotFoundError as e:
        raise InputError(f"soft_labels: {e.filename} does not exist; {fix}") from None
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"soft_labels: {meta_path} is not JSON; {fix}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"soft_labels: {meta_path} is not a soft-label file ({FORMAT}); {fix}")
    if hashlib.sha256(blob).hexdigest() != meta.get("sha256"):
        raise InputError(f"soft_labels: {weights} does not match the sha256 in {meta_path} "
                         f"(damaged or from another write); {fix}")
    try:
        tensors = st_load(blob)
        logits, indices, labels = tensors["logits"], tensors["indices"], tensors["labels"]
    except (SafetensorError, KeyError):
        raise InputError(f"soft_labels: {weights} lacks logits/indices/labels; {fix}") from None
    if meta.get("dataset") != dataset:
        raise InputError(f"soft_labels: {meta_path} holds logits for dataset {meta.get('dataset')!r}, "
                         f"the training uses {dataset!r}; give soft labels of this dataset")
    if logits.shape[1] != n_classes:
        raise InputError(f"soft_labels: {meta_path} has {logits.shape[1]} classes, the training "
                         f"data {n_classes}; give soft labels of these classes")
    wanted = torch.as_tensor(np.asarray(train_indices), dtype=torch.int64)
    size = int(max(int(indices.max()), int(wanted.max()))) + 1
    table = torch.zeros(size, logits.shape[1])
    stored = torch.full((size,), -1, dtype=torch.int64)
    table[indices], stored[indices] = logits.float(), labels
    missing = int((stored[wanted] < 0).sum())
    if missing:
        raise InputError(f"soft_labels: {meta_path} has no logits for {missing} of the "
                         f"{len(wanted)} training images (another split?); write them for this split")
    if not torch.equal(stored[wanted], torch.as_tensor(train_labels, dtype=torch.int64)):
        raise InputError(f"soft_labels: the labels in {meta_path} differ from this training split's "
                         "(another dataset or split?); write them for this split")
    return SoftLabels(table, dataset, str(meta.get("source", "")), str(meta["sha256"]))
