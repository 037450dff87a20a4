"""The first family's per-block helpers as hwnas had them before families (once
`hwnas.latency.layout`'s, never documented): adapters on the family's own `blocks` module and on
`hwnas.latency.layout.PartGather`, kept as test support (the GPU simulator and layout tests
compare the generic path against them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hwnas.families import NetworkSpec
from hwnas.errors import InputError
from hwnas.families.ofa_mbv3.blocks import *  # noqa: F401,F403 (the family's per-block helpers)
from hwnas.space import FLAT_COLUMNS, Arch

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["slot_specs", "slot_sizes", "block_cost", "stem_cost", "head_cost", "fixed_cost",
           "as_matrix", "entry_keys", "entry_module", "SlotGather"]


def _family():
    from hwnas.families import DEFAULT_FAMILY, get_family

    return get_family(DEFAULT_FAMILY)


def as_matrix(archs: Sequence[Arch] | np.ndarray) -> np.ndarray:
    """Flat rows as int64 [n, 46] from a list of `Arch` or a matrix (checked as latency models do)."""
    if not isinstance(archs, np.ndarray):
        archs = list(archs)
        if not all(isinstance(a, Arch) for a in archs):
            raise InputError("expected a list of Arch or an [n, 46] int matrix of flat arch rows")
        archs = np.fromiter((v for a in archs for v in a.to_row()), dtype=np.int32,
                            count=len(archs) * len(FLAT_COLUMNS)).reshape(-1, len(FLAT_COLUMNS))
    return _family().check_model_rows(archs)


def entry_keys(archs: Sequence[Arch] | np.ndarray, width_mult: float = 1.0) -> "pd.DataFrame":
    """The distinct parts (``part, stage, j, in_ch, k, e, size``) that make up `archs`: what a
    per-block profile measures (`hwnas.latency.layout.family_entry_keys` of this family)."""
    from hwnas.latency.layout import family_entry_keys

    return family_entry_keys(NetworkSpec(_family().name, width_mult, 1000), as_matrix(archs))


class SlotGather:
    """The per-(r, slot, k, e) gather this family's predictors once had, on `PartGather`:
    `block_fn(r, slot, k, e) -> float[F]` per searchable block, `fixed_fn(r) -> float[F]` for the
    stem and head together."""

    def __init__(self, block_fn: Callable[[int, int, int, int], np.ndarray],
                 fixed_fn: Callable[[int], np.ndarray], n_features: int) -> None:
        from hwnas.latency.layout import PartGather

        layout = _family().cost_layout()
        last = len(layout.parts) - 1  # the head; the stem (part 0) carries `fixed_fn`

        def part(p: int, key: tuple[int, ...]) -> np.ndarray:
            if p == 0:
                return fixed_fn(key[0])
            return np.zeros(n_features) if p == last else block_fn(key[0], p - 1, key[1], key[2])

        self.gather = PartGather(layout, part, n_features)

    def per_slot(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(per-slot values [n, 20, F] (zero for unused slots), fixed part [n, F])."""
        vals, fixed = self.gather.gather(as_matrix(m))
        return vals, fixed.sum(axis=1)

    def total(self, m: np.ndarray, chunk: int = 20000) -> np.ndarray:
        return self.gather.total(as_matrix(m), chunk)
