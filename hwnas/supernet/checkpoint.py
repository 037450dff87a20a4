"""Supernet checkpoints: safetensors weights + a JSON sidecar, never pickle.

A checkpoint ``runs/x/supernet`` is up to four files:

- ``supernet.safetensors``: the model's state dict (optionally stored as float16);
- ``supernet.state.safetensors`` + ``supernet.state.json``: optional training state (optimizer,
  LR scheduler, RNG states), tensors flattened under path-like keys, everything else as JSON;
- ``supernet.json``: what the network is (search space, classes, normalisation), where training
  stands (phase, step, epoch), and the sha256 of the safetensors files. Written last, atomically:
  if the JSON exists the checkpoint is complete, and the hashes catch a weights file from an
  interrupted overwrite or a corrupted copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator
from pydantic_core import PydanticSerializationError
from safetensors import SafetensorError
from safetensors.torch import load as st_load, save as st_save
from torch import nn

from hwnas.errors import CheckpointError, InputError
from hwnas.families import DEFAULT_FAMILY
from hwnas.fileio import atomic_write_bytes, atomic_write_json
from hwnas.supernet.checkpoint_meta import (FORMAT, VERSION, CheckpointPaths, checkpoint_paths,
                                            load_checkpoint_meta, read_json)

__all__ = [
    "FORMAT",
    "STATE_FORMAT",
    "VERSION",
    "CheckpointMeta",
    "CheckpointPaths",
    "checkpoint_paths",
    "checkpoint_exists",
    "save_checkpoint",
    "load_checkpoint_meta",
    "load_checkpoint",
    "read_weights",
]

STATE_FORMAT = "hwnas-supernet-state"
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_FP16_MAX = 65504.0
_MARKERS = ("__tensor__", "__ndarray__", "__tuple__", "__dict__")


class CheckpointMeta(BaseModel):
    """What the caller describes about a checkpoint (the file adds format, hashes, versions)."""

    model_config = ConfigDict(extra="forbid")

    # hwnas.families registry name (files written before families are the first family's); None: a
    # network of no family (a baseline trained alone)
    family: Optional[str] = DEFAULT_FAMILY
    space: dict[str, Any] | None = None  # the family's space as a dict; a space object is accepted
    n_classes: int | None = None
    dataset: str | None = None
    class_names: list[str] = []
    mean: list[float] | None = None
    std: list[float] | None = None
    phase: str | None = None
    step: int = 0
    epoch: int = 0
    extra: dict[str, Any] = {}

    @field_validator("space", mode="before")
    @classmethod
    def _space_as_dict(cls, value: Any) -> Any:
        if not isinstance(value, Mapping) and hasattr(value, "to_dict") and hasattr(value, "family"):
            return value.to_dict()  # a space object (any family's)
        return value

    @model_validator(mode="after")
    def _space_of_family(self) -> "CheckpointMeta":
        """Validate and normalise the space against the family's genes (an unknown family too)."""
        from hwnas.families import get_family

        if self.family is None:
            if self.space is not None:
                raise ValueError("a checkpoint of no family has no search space")
            return self
        family = get_family(self.family)
        if self.space is not None:
            self.space = family.space_from_dict(self.space).to_dict()
        return self


def checkpoint_exists(path_stem: str | os.PathLike[str]) -> bool:
    """True when a complete checkpoint is there (its JSON is written last)."""
    return checkpoint_paths(path_stem).meta.is_file()


# -- saving -----------------------------------------------------------------------------------
def _cpu_copy(t: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU copy: safetensors refuses tensors that share memory (tied weights)."""
    return t.detach().to("cpu").clone(memory_format=torch.contiguous_format)


def _weights(model: nn.Module, dtype: str | None) -> dict[str, torch.Tensor]:
    """The model's state dict on CPU; floating tensors cast to `dtype` unless they overflow it."""
    if dtype is not None and dtype not in _DTYPES:
        raise InputError(f"checkpoint dtype {dtype!r} is not supported; use one of {sorted(_DTYPES)}")
    target = _DTYPES.get(dtype) if dtype else None
    out = {}
    for name, t in model.state_dict().items():
        t = _cpu_copy(t)
        if target is not None and t.is_floating_point() and _fits(t, target):
            t = t.to(target)
        out[name] = t
    return out


def _fits(t: torch.Tensor, dtype: torch.dtype) -> bool:
    """False when casting to float16 would turn finite values into inf."""
    return dtype != torch.float16 or t.numel() == 0 or float(t.abs().max()) <= _FP16_MAX


def _pack(tensors: dict[str, torch.Tensor]) -> tuple[bytes, dict[str, Any]]:
    """safetensors bytes and their record for the JSON (size, sha256)."""
    data = st_save(tensors, metadata={"format": "pt", "writer": FORMAT})
    return data, {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _child(key: str, name: Any) -> str:
    """Tensor name of an item inside the tree node `key` ("optimizer/state/0/exp_avg")."""
    return f"{key}/{name}" if key else str(name)


def _encode(obj: Any, key: str, tensors: dict[str, torch.Tensor]) -> Any:
    """JSON-able form of a state tree; tensors and arrays go to `tensors` under `key` paths."""
    if isinstance(obj, torch.Tensor):
        tensors[key] = _cpu_copy(obj)
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        unsigned = obj.dtype.kind == "u" and obj.dtype.itemsize > 1  # torch lacks most uints
        raw = obj.view(f"int{8 * obj.dtype.itemsize}") if unsigned else obj
        tensors[key] = torch.from_numpy(np.ascontiguousarray(raw)).clone()
        return {"__ndarray__": key, "dtype": obj.dtype.str}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, _child(key, i), tensors) for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    if isinstance(obj, Mapping):
        if all(isinstance(k, str) for k in obj) and not any(k in _MARKERS for k in obj):
            return {k: _encode(v, _child(key, k), tensors) for k, v in obj.items()}
        return {"__dict__": [[_encode(k, _child(key, f"{k}#key"), tensors), _encode(v, _child(key, k), tensors)]
                             for k, v in obj.items()]}
    raise CheckpointError(f"cannot save {key}: a {type(obj).__name__} is neither "
                          "JSON, a tensor nor an array (hwnas never pickles)")


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if "__ndarray__" in obj:
        dtype = np.dtype(obj["dtype"])
        return tensors[obj["__ndarray__"]].numpy().view(dtype).copy()
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors) for v in obj["__tuple__"])
    if "__dict__" in obj:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__dict__"]}
    return {k: _decode(v, tensors) for k, v in obj.items()}


def _rng_states() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def _restore_rng(states: Mapping[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    cuda = states.get("cuda") or []
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all(cuda)
    elif cuda:
        warnings.warn("the checkpoint's CUDA RNG states were not restored: this machine has a "
                      "different number of CUDA devices", stacklevel=3)


def _training_state(optimizer: torch.optim.Optimizer | None, scheduler: Any,
                    rng: bool) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    if optimizer is not None:
        tree["optimizer"] = optimizer.state_dict()
    if scheduler is not None:
        tree["scheduler"] = scheduler.state_dict()
    if rng:
        tree["rng"] = _rng_states()
    return tree


def _meta_dict(meta: CheckpointMeta | Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        info = meta if isinstance(meta, CheckpointMeta) else CheckpointMeta.model_validate(dict(meta or {}))
        doc = info.model_dump(mode="json")
        json.dumps(doc, allow_nan=True)
    except (ValidationError, PydanticSerializationError, TypeError, ValueError) as err:
        detail = _first_error(err) if isinstance(err, ValidationError) else str(err).splitlines()[0]
        raise InputError(f"invalid checkpoint metadata: {detail}") from None
    return doc


def save_checkpoint(path_stem: str | os.PathLike[str], model: nn.Module,
                    meta: CheckpointMeta | Mapping[str, Any] | None = None,
                    optimizer: torch.optim.Optimizer | None = None, scheduler: Any = None,
                    rng: bool = True, dtype: str | None = None) -> Path:
    """Save `model` (and optionally training state) as the checkpoint `path_stem`.

    `meta`: a `CheckpointMeta` or a dict of its fields. `dtype="float16"` halves the file (for
    shipping); float16-overflowing tensors stay float32. Optimizer/scheduler/RNG state always
    keeps full precision. Returns the JSON path.
    """
    # Encode everything first: a value that cannot be saved must fail before any file changes.
    doc = {"format": FORMAT, "version": VERSION, **_meta_dict(meta)}
    paths = checkpoint_paths(path_stem)
    weights, doc["weights"] = _pack(_weights(model, dtype))
    doc["weights"].update(file=paths.weights.name, dtype=dtype or "float32")
    tree = _training_state(optimizer, scheduler, rng)
    state_tensors: dict[str, torch.Tensor] = {}
    state_json = {"format": STATE_FORMAT, "version": VERSION, "tree": _encode(tree, "", state_tensors)}
    state, doc["training_state"] = _pack(state_tensors) if tree else (b"", None)
    if tree:
        doc["training_state"].update(file=paths.state_weights.name, json=paths.state_meta.name,
                                     contains=sorted(tree))
    doc.update(n_parameters=sum(p.numel() for p in model.parameters()),
               saved_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
               versions=_versions())
    # Weights first, the JSON last: a JSON on disk means the files it names are complete.
    atomic_write_bytes(paths.weights, weights)
    if tree:
        atomic_write_bytes(paths.state_weights, state)
        atomic_write_json(paths.state_meta, state_json)
    atomic_write_json(paths.meta, doc)
    if not tree:  # drop a previous save's training state so it cannot be mistaken for ours
        paths.state_weights.unlink(missing_ok=True)
        paths.state_meta.unlink(missing_ok=True)
    return paths.meta


def _versions() -> dict[str, str]:
    import hwnas

    return {"hwnas": hwnas.__version__, "torch": torch.__version__}


def _first_error(err: ValidationError) -> str:
    e = err.errors()[0]
    return f"{'.'.join(str(p) for p in e['loc']) or 'meta'}: {e['msg']}"


# -- loading ----------------------------------------------------------------------------------
def _read_tensors(path: Path, record: Mapping[str, Any], owner: Path) -> dict[str, torch.Tensor]:
    """Load a safetensors file named by `owner`'s JSON, checking it parses and matches its hash."""
    if not path.is_file():
        raise CheckpointError(f"{path} is missing; {owner.name} refers to it (copy the whole checkpoint)")
    data = path.read_bytes()
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, RuntimeError, OverflowError) as err:
        raise CheckpointError(f"{path} is corrupt: not a valid safetensors file "
                              f"({str(err).splitlines()[0]}); restore it from a good copy") from None
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
        raise CheckpointError(f"{path} does not match {owner.name} (sha256 differs): it was "
                              "modified, or a save was interrupted; save the checkpoint again")
    return tensors


def _check_fits(tensors: Mapping[str, torch.Tensor], model: nn.Module, doc: Mapping[str, Any],
                where: Path) -> None:
    expected = model.state_dict()
    missing = [k for k in expected if k not in tensors]
    unexpected = sorted(k for k in tensors if k not in expected)
    reshaped = [f"{k} is {list(tensors[k].shape)} in the checkpoint but {list(t.shape)} in the model"
                for k, t in expected.items() if k in tensors and tensors[k].shape != t.shape]
    problems = ([f"{len(missing)} tensor(s) missing, e.g. {missing[0]}"] if missing else []) + \
               ([f"{len(unexpected)} unexpected, e.g. {unexpected[0]}"] if unexpected else []) + \
               ([f"{len(reshaped)} with other shapes, e.g. {reshaped[0]}"] if reshaped else [])
    if problems:
        built_for = f"n_classes={doc.get('n_classes')}, dataset={doc.get('dataset')}"
        raise CheckpointError(f"checkpoint {where} is for a different network: {'; '.join(problems)} "
                              f"(it was saved for {built_for}; build the model to match)")


def _load_state(paths: CheckpointPaths, doc: Mapping[str, Any], wanted: list[str]) -> dict[str, Any]:
    record = doc.get("training_state") or {}
    lacking = [w for w in wanted if w not in record.get("contains", [])]
    if lacking:
        raise CheckpointError(f"checkpoint {paths.meta} has no {' or '.join(lacking)} state; "
                              "resuming needs a checkpoint saved with it")
    if not paths.state_meta.is_file():
        raise CheckpointError(f"{paths.state_meta} is missing; {paths.meta.name} refers to it "
                              "(copy the whole checkpoint)")
    state_doc = read_json(paths.state_meta, "training state")
    if not isinstance(state_doc, dict) or state_doc.get("format") != STATE_FORMAT:
        raise CheckpointError(f"{paths.state_meta} is not an hwnas training-state file")
    tensors = _read_tensors(paths.state_weights, record, paths.meta)
    try:
        return _decode(state_doc["tree"], tensors)
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{paths.state_meta} does not match its tensors ({err!r}); "
                              "the training state is corrupt") from None


def read_weights(path_stem: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The checkpoint's weights, checked against its JSON's sha256 and refused when any value is
    not finite (NaN or inf weights give a network that scores chance without any error)."""
    paths = checkpoint_paths(path_stem)
    doc = load_checkpoint_meta(paths.meta)
    tensors = _read_tensors(paths.weights, doc.get("weights") or {}, paths.meta)
    bad = next((k for k, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())),
               None)
    if bad is not None:
        raise CheckpointError(f"checkpoint {paths.meta.with_suffix('')} has non-finite weights "
                              f"({bad} holds NaN or inf): its training diverged or the file was "
                              "edited; use an earlier checkpoint")
    return tensors


def load_checkpoint(path_stem: str | os.PathLike[str], model: nn.Module,
                    optimizer: torch.optim.Optimizer | None = None, scheduler: Any = None,
                    restore_rng: bool = False) -> dict[str, Any]:
    """Load weights into `model` (float16 files load into float32 models), and optionally the
    optimizer, scheduler and global RNG states; returns the checkpoint's JSON."""
    paths = checkpoint_paths(path_stem)
    doc = load_checkpoint_meta(paths.meta)
    tensors = read_weights(paths.meta)
    _check_fits(tensors, model, doc, paths.meta)
    model.load_state_dict(tensors, strict=True)
    wanted = [name for name, want in (("optimizer", optimizer is not None),
                                      ("scheduler", scheduler is not None),
                                      ("rng", restore_rng)) if want]
    if not wanted:
        return doc
    state = _load_state(paths, doc, wanted)
    if optimizer is not None:
        try:
            optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError) as err:
            raise CheckpointError(f"the optimizer state in {paths.state_meta} does not fit this "
                                  f"optimizer ({str(err).splitlines()[0]}); use the same optimizer "
                                  "and parameter groups as the run that saved it") from None
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        _restore_rng(state["rng"])
    return doc
