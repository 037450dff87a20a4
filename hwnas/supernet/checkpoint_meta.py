"""A supernet checkpoint's files and its JSON sidecar, read without torch.

Every run checks its config.yaml against its checkpoint's JSON when it is opened
(`hwnas.run.open_run`), on paths that must stay torch-free (search, latency fit, the dashboard);
`hwnas.supernet.checkpoint` (weights, saving) re-exports these names.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from hwnas.errors import CheckpointError
from hwnas.fileio import file_stem

__all__ = ["FORMAT", "VERSION", "SHIPPED_NAME", "CheckpointPaths", "checkpoint_paths", "read_json",
           "load_checkpoint_meta", "shipped_checkpoint"]

FORMAT = "hwnas-supernet"
VERSION = 1
SHIPPED_NAME = "supernet_fashion"


class CheckpointPaths(NamedTuple):
    weights: Path
    meta: Path
    state_weights: Path
    state_meta: Path


def checkpoint_paths(path_stem: str | os.PathLike[str]) -> CheckpointPaths:
    """The files of the checkpoint `path_stem` (a trailing .json/.safetensors is tolerated)."""
    stem = file_stem(path_stem, (".state.safetensors", ".state.json", ".safetensors", ".json"))
    return CheckpointPaths(*(Path(stem + ext) for ext in
                             (".safetensors", ".json", ".state.safetensors", ".state.json")))


def shipped_checkpoint() -> Path:
    """Path stem of the supernet that ships inside the package."""
    return Path(str(resources.files("hwnas") / "assets" / SHIPPED_NAME))


def read_json(path: Path, what: str) -> Any:
    """A checkpoint's JSON file (`what`: "checkpoint", "training state"); CheckpointError if corrupt."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is not valid JSON ({err}); the {what} is corrupt") from None


def load_checkpoint_meta(path_stem: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint's JSON, after checking it is a complete hwnas supernet checkpoint."""
    paths = checkpoint_paths(path_stem)
    if not paths.meta.is_file():
        if paths.weights.is_file():
            raise CheckpointError(f"checkpoint {paths.meta.with_suffix('')} is incomplete: "
                                  f"{paths.weights.name} exists but {paths.meta.name} does not "
                                  "(interrupted save?); save it again or use an earlier one")
        raise CheckpointError(f"checkpoint {paths.meta} does not exist; pass the path without "
                              "extension, e.g. runs/NAME/supernet")
    doc = read_json(paths.meta, "checkpoint")
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt != FORMAT:
        raise CheckpointError(f"{paths.meta} is not an hwnas supernet checkpoint (format {fmt!r}, "
                              f"expected {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise CheckpointError(f"{paths.meta} has checkpoint version {doc.get('version')!r}; this "
                              f"hwnas reads version {VERSION} (use the hwnas that wrote it)")
    return doc
