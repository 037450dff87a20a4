"""How a family's flat rows split into additive slots: what the search tabulates (`Family.slot_layout`).

Every additive cost of a subnet -- lookup-table and linear latency models, MACs, parameters, the
analytic latency features, the one-hot accuracy features -- is a sum over the parts it runs (its
`cost_layout`). A search scores ~70,000 rows, so it tabulates such a cost once per space and reads
a batch with one gather (`hwnas.search.tabulate`). For that it needs, in flat-row columns:

- the *slots*: the searchable block positions. A `Slot` owns its `genes` (no other part reads
  them, and they are inactive exactly when the slot does not run), may read some `shared` genes
  too, and runs while the code of its `depth` gene is above `after` (no `depth`: always);
- the layout's `shared` genes: always-active genes that several parts read (ResNet50's widths).
  With ``r`` they form the *context* of a row: everything no slot owns (stem, head, the blocks a
  depth never drops) is tabulated per context value.

So a cost is ``fixed[context] + sum over running slots of table[slot, its shared genes and r,
its genes]``, and which slots run follows from the depth genes alone, so the search's choice-index
rows look a row's active genes up per combination of depths (`hwnas.search.indexed`).

A family without a layout (`Family.slot_layout` returns None) is searched by calling its models on
whole matrices. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwnas.errors import InputError

__all__ = ["Slot", "SlotLayout"]


@dataclass(frozen=True)
class Slot:
    """One searchable position: flat columns of its own `genes`, the layout's `shared` genes it
    also reads, and the `depth` gene (flat column) it runs under: it runs while that gene's code
    is greater than `after` (`depth` None: it always runs)."""

    genes: tuple[int, ...]
    shared: tuple[int, ...] = ()
    depth: int | None = None
    after: int = -1

    @property
    def context(self) -> tuple[int, ...]:
        """The columns its table is keyed by besides its genes: ``r``, then its shared genes."""
        return (0,) + self.shared


@dataclass(frozen=True)
class SlotLayout:
    """A family's slots in network order, and the always-active genes several parts share."""

    slots: tuple[Slot, ...]
    shared: tuple[int, ...] = ()

    @property
    def context(self) -> tuple[int, ...]:
        """The columns the fixed part of a row is keyed by: ``r``, then the shared genes."""
        return (0,) + self.shared

    @property
    def depth_columns(self) -> tuple[int, ...]:
        """The genes that decide which slots run, in column order."""
        return tuple(sorted({s.depth for s in self.slots if s.depth is not None}))

    def used(self, m: np.ndarray) -> np.ndarray:
        """bool [n, slots]: the slots each flat row runs."""
        m = np.asarray(m)
        out = np.ones((len(m), len(self.slots)), dtype=bool)
        for i, s in enumerate(self.slots):
            if s.depth is not None:
                out[:, i] = m[:, s.depth] > s.after
        return out

    def slot_of_parts(self, parts) -> tuple[int | None, ...] | None:
        """Per part of a cost layout (`hwnas.families.parts.Part`): the slot it is (the one whose
        context and genes are its key columns), or None for a part keyed by the context alone
        (it always runs); None overall when some part is neither (the slots do not describe it)."""
        by_columns = {frozenset(s.context + s.genes): i for i, s in enumerate(self.slots)}
        out = tuple(by_columns.get(frozenset(p.columns)) for p in parts)
        context = set(self.context)
        if any(i is None and not set(p.columns) <= context for i, p in zip(out, parts)):
            return None
        return out if sorted(i for i in out if i is not None) == list(range(len(self.slots))) else None

    def check(self, n_columns: int) -> "SlotLayout":
        """This layout if it is well formed over rows of `n_columns` flat columns (genes owned by
        one slot only, shared genes not owned, columns in range), else one InputError."""
        owned: set[int] = set()
        for i, s in enumerate(self.slots):
            cols = s.genes + s.shared + (() if s.depth is None else (s.depth,))
            if not s.genes or any(not 0 < c < n_columns for c in cols):
                raise InputError(f"slot {i} needs genes, and columns within 1..{n_columns - 1}: {s}")
            if owned & set(s.genes) or set(s.genes) & set(self.shared) or not set(s.shared) <= set(self.shared):
                raise InputError(f"slot {i} shares a gene it owns, or reads one the layout does not share: {s}")
            if s.depth is not None and s.depth in set(s.genes) | set(self.shared):
                raise InputError(f"slot {i}'s depth gene is one of its genes or shared: {s}")
            owned |= set(s.genes)
        if owned & {s.depth for s in self.slots if s.depth is not None}:
            raise InputError("a depth gene is owned by a slot")
        return self
