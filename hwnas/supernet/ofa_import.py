"""Import Once-for-All's published supernets (every family) as hwnas checkpoints.

Once-for-All's ``ofa.model_zoo.ofa_net(name, pretrained=True)``, for a published name
(`Family.published`, e.g. the default family's at W=1.0 and 1.2), downloads one file and runs
``net.load_state_dict(torch.load(path)["state_dict"])``.
That file is what `import_ofa_checkpoint` reads, with ``torch.load(..., weights_only=True)`` only:
a pickle that needs code to load is refused, never executed. A bare state dict (the ``"state_dict"``
value saved on its own) and ``module.``-prefixed keys (a DataParallel wrapper) are accepted too.

Which tensors a file must hold is its family's `Family.ofa_layout` (for the default family, its
`plan.ofa_layout`, which shows the key layout); hwnas's networks name their
modules like Once-for-All's (`hwnas.families.layers`), so every key maps onto the hwnas key of the
same name (`Family.hwnas_key`) and computes the same subnets.

Everything is checked before anything is written: a missing or extra key, a shape that does not fit
(the first such tensor and both shapes, plus what the file looks like: the other width, or another
Once-for-All family), non-finite values. Files without ``num_batches_tracked`` entries are accepted,
as ``load_state_dict`` accepts them (those counters never change a forward pass).
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
from pathlib import Path
from typing import Mapping

import torch

from hwnas.errors import CheckpointError, InputError
from hwnas.fileio import sha256_file
from hwnas.families import DEFAULT_FAMILY, get_family
from hwnas.families.base import IMAGENET_MEAN, IMAGENET_STD
from hwnas.supernet.checkpoint import checkpoint_exists, checkpoint_paths, save_checkpoint

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "hwnas_key",
    "read_ofa_state_dict",
    "describe_ofa_file",
    "check_ofa_state_dict",
    "import_ofa_checkpoint",
]

N_CLASSES = 1000


def _default_published() -> str:
    """The default family's published supernet at its default width (what error messages name)."""
    fam = get_family(DEFAULT_FAMILY)
    return fam.published[fam.default_width]


# -- keys -------------------------------------------------------------------------------------
def hwnas_key(ofa_key: str) -> str:
    """The hwnas supernet's key for one of Once-for-All's: the same name (hwnas mirrors OFA's
    module tree, see `hwnas.families.layers`)."""
    return ofa_key


# -- reading ----------------------------------------------------------------------------------
def read_ofa_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The tensors of a Once-for-All checkpoint (``{"state_dict": {...}, ...}`` or a bare state
    dict), loaded with ``weights_only=True``. One-line `CheckpointError` for anything else."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist; download the Once-for-All checkpoint yourself "
                         f"(e.g. {_default_published()}) and pass its path")
    if not path.is_file():
        raise InputError(f"{path} is not a file; pass the Once-for-All checkpoint file itself")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty; download the Once-for-All checkpoint again")
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the error says enough
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        found = re.search(r"GLOBAL ([\w.]+)", text)
        if found:
            raise CheckpointError(
                f"{path} is a pickle that needs code to load ({found.group(1)}), which "
                "torch.load(weights_only=True) refuses and hwnas never runs; in an environment you "
                "trust, re-save only the tensors: torch.save({'state_dict': net.state_dict()}, PATH)") from None
        detail = re.search(r"Unsupported operand \d+", text)
        detail = detail.group(0) if detail else _first_line(text, err)
        raise CheckpointError(f"{path} is not a weights-only PyTorch checkpoint (torch.load with "
                              f"weights_only=True refuses it: {detail}); pass the file Once-for-All's "
                              "ofa_net(..., pretrained=True) loads, or re-save its tensors with "
                              "torch.save({'state_dict': net.state_dict()}, PATH)") from None
    except Exception as err:  # whatever parsing untrusted bytes raises: not a checkpoint
        raise CheckpointError(f"{path} is not a PyTorch checkpoint ({type(err).__name__}: "
                              f"{_first_line(str(err), err)}); pass the file Once-for-All's "
                              "ofa_net(..., pretrained=True) loads") from None
    if isinstance(obj, Mapping) and "state_dict" in obj:
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not obj:
        raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a state dict (a dict of "
                              "tensors, or a dict with one under 'state_dict')")
    state: dict[str, torch.Tensor] = {}
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise CheckpointError(f"{path} is not a state dict: entry {key!r} is a "
                                  f"{type(value).__name__}, not a tensor")
        state[key] = value
    if all(k.startswith("module.") for k in state):  # saved from a DataParallel wrapper
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


def _first_line(text: str, err: BaseException) -> str:
    """The first sentence of an error message, at most 160 characters."""
    line = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return line.split(". ")[0][:160]


def _fits(state: Mapping[str, torch.Tensor], layout: Mapping[str, tuple[int, ...]]) -> bool:
    keys = {k for k in layout if not k.endswith(".num_batches_tracked")}
    return keys <= set(state) <= set(layout) and all(
        tuple(state[k].shape) == layout[k] for k in keys)


def describe_ofa_file(state: Mapping[str, torch.Tensor]) -> str:
    """What a state dict looks like: which Once-for-All family and width (for error messages)."""
    from hwnas.families import family_names, get_family

    classifier = next((t for k, t in state.items() if k.endswith("classifier.linear.weight")), None)
    classes = int(classifier.shape[0]) if classifier is not None and classifier.dim() == 2 else N_CLASSES
    same_keys = []
    for name in family_names():
        family = get_family(name)
        if family.ofa_class is None:  # nothing of Once-for-All's to recognise
            continue
        for w in family.widths:
            layout = family.ofa_layout(w, classes)
            if _fits(state, layout):
                extra = f", {classes} classes" if classes != N_CLASSES else ""
                return f"{family.title} W={w} (--family {name} --width-mult {w}{extra})"
            if {k for k in layout if not k.endswith(".num_batches_tracked")} <= set(state) <= set(layout):
                same_keys.append(family)
    if same_keys:
        family = same_keys[0]
        return (f"an {family.title} of another width than hwnas imports (--family {family.name} "
                f"takes --width-mult {', '.join(str(w) for w in family.widths)})")
    return "no Once-for-All network hwnas knows"


def check_ofa_state_dict(state: Mapping[str, torch.Tensor], width_mult: float,
                         where: str | os.PathLike[str] = "the checkpoint", *,
                         family: str) -> dict[str, torch.Tensor]:
    """Check `state` against Once-for-All's `family` network at `width_mult`; return it under
    hwnas's keys (``num_batches_tracked`` filled with 0 where the file has none)."""
    from hwnas.families import get_family

    fam = get_family(family)
    layout = fam.ofa_layout(width_mult)
    net = f"{fam.title} W={width_mult}"
    looks = f"the file looks like {describe_ofa_file(state)}"
    missing = [k for k in layout if k not in state and not k.endswith(".num_batches_tracked")]
    extra = [k for k in state if k not in layout]
    if missing:
        raise CheckpointError(f"{where} lacks {len(missing)} tensor(s) of {net}, first {missing[0]}; {looks}")
    if extra:
        raise CheckpointError(f"{where} has {len(extra)} tensor(s) that {net} does not, first "
                              f"{extra[0]}; {looks}")
    for key, shape in layout.items():
        if key in state and tuple(state[key].shape) != shape:
            raise CheckpointError(f"{where}: {key} is {list(state[key].shape)} but {net} needs "
                                  f"{list(shape)}; {looks}")
    out: dict[str, torch.Tensor] = {}
    for key in layout:
        t = state.get(key)
        if t is None:
            t = torch.zeros((), dtype=torch.long)
        elif t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{where}: {key} holds NaN or infinite values; the file is "
                                  "damaged, download it again")
        elif not t.is_floating_point() and not key.endswith(".num_batches_tracked"):
            raise CheckpointError(f"{where}: {key} is {t.dtype}, not a floating-point tensor")
        out[fam.hwnas_key(key)] = t
    return out


# -- importing --------------------------------------------------------------------------------
def import_ofa_checkpoint(src: str | os.PathLike[str], out_stem: str | os.PathLike[str],
                          width_mult: float | None = None, *, family: str,
                          overwrite: bool = False) -> Path:
    """Read Once-for-All's checkpoint `src` of `family`, check every tensor, and write the hwnas
    checkpoint `out_stem` (safetensors + JSON, ImageNet's 1000 classes and normalisation, OFA's
    space at r 128..224 step 4). Nothing is written unless everything fits. Returns the JSON path."""
    from hwnas.families import get_family
    from hwnas.families.space import FamilySpace

    fam = get_family(family)
    if fam.ofa_class is None:
        fam.ofa_layout(fam.default_width)  # raises: no Once-for-All original, nothing to import
    if width_mult is None:
        width_mult = fam.default_width
    if isinstance(width_mult, bool) or not isinstance(width_mult, (int, float)) \
            or float(width_mult) not in fam.published:
        raise InputError(f"--width-mult {width_mult!r} is not a published {fam.title} width; "
                         f"use {' or '.join(str(w) for w in fam.published)}")
    width_mult = float(width_mult)
    paths = checkpoint_paths(out_stem)
    if checkpoint_exists(out_stem) and not overwrite:
        raise InputError(f"checkpoint {paths.meta} already exists; pick another --out or pass "
                         "--overwrite")
    src = Path(src)
    state = check_ofa_state_dict(read_ofa_state_dict(src), width_mult, src, family=family)
    model = fam.build_supernet(N_CLASSES, width_mult)
    expected = model.state_dict()
    if set(expected) != set(state):  # the family's layout and its network disagree: a bug
        raise RuntimeError(f"OFA layout and hwnas supernet differ: "
                           f"{sorted(set(expected) ^ set(state))[:3]}")
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    meta = {
        "family": family,
        "space": FamilySpace.published(fam, width_mult).to_dict(),
        "n_classes": N_CLASSES,
        "dataset": "imagenet",
        "class_names": [str(i) for i in range(N_CLASSES)],
        "mean": list(IMAGENET_MEAN),
        "std": list(IMAGENET_STD),
        "extra": {"family": family, "width_mult": width_mult,
                  "imported_from": {"format": "once-for-all", "name": fam.published[width_mult],
                                    "file": src.name, "sha256": sha256_file(src)}},
    }
    return save_checkpoint(paths.meta, model, meta, rng=False)
