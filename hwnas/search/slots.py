"""A family's slot layout over one space's choices: the geometry every search table shares.

`hwnas.families.slots.SlotLayout` says which genes each searchable position owns and shares and
which depth gene switches it on. `SpaceSlots` binds it to a space's choices:

- *where rows live*: a table has one ``fixed`` row per context value (``r`` and the shared genes)
  and, per slot, one row per (its context value, its genes' option), then a zero row that slots a
  subnet does not run point at (`n_rows`). Options and contexts count in row-major order over
  their columns' choice positions;
- *probes*: the rows a model is evaluated on to fill a table (`probes`, `assemble`): per context
  value the base row (every column at its first choice, every depth at its smallest), each slot
  at each option -- an optional slot brought into use by deepening its depth gene to just hold it
  -- and the row each is compared with (the base, or the same depth one short);
- *indices*: the fixed row and the slot rows a batch of value rows reads (`index_values`).

Nothing here knows a family: it reads `space.column_choices()` and `space.family.slot_layout()`.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["SpaceSlots", "space_slots", "KeyTerms"]


@functools.lru_cache(maxsize=32)
def space_slots(space) -> "SpaceSlots | None":
    """The `SpaceSlots` of `space` (None when its family has no slot layout)."""
    layout = space.family.slot_layout()
    if layout is None:
        return None
    return SpaceSlots(space, layout.check(len(space.column_choices())))


class KeyTerms:
    """``base[s] + sum_k rows[:, cols[s, k]] * weights[s, k]`` for every slot s of many rows, with
    as few numpy calls as the columns allow (one column for every slot: a broadcast column;
    consecutive columns: a slice; else a fancy index). Integer [n, slots]."""

    def __init__(self, base: np.ndarray, cols: np.ndarray, weights: np.ndarray) -> None:
        self.base = np.asarray(base, dtype=np.intp)
        self.terms = []
        for c, w in zip(cols.T, weights.T):
            if not w.any():
                continue
            weight = np.intp(w[0]) if (w == w[0]).all() else w.astype(np.intp)
            if (c == c[0]).all():
                sel = slice(int(c[0]), int(c[0]) + 1)
            elif (np.diff(c) == 1).all():
                sel = slice(int(c[0]), int(c[-1]) + 1)
            else:
                sel = c.astype(np.intp)
            self.terms.append((sel, None if np.ndim(weight) == 0 and weight == 1 else weight))

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        out = self.base
        for sel, w in self.terms:
            part = rows[:, sel] if isinstance(sel, slice) else rows.take(sel, axis=1)
            out = out + (part if w is None else part * w)
        return np.broadcast_to(out, (len(rows), len(self.base))) if out is self.base else out


def _strides(sizes) -> np.ndarray:
    """Row-major strides of a mixed-radix number with digit `sizes` (the first most significant)."""
    out = np.ones(len(sizes), dtype=np.int64)
    for i in range(len(sizes) - 2, -1, -1):
        out[i] = out[i + 1] * sizes[i + 1]
    return out


class SpaceSlots:
    """`layout` (a `SlotLayout`) over `space`'s choices: table geometry, probes, indices."""

    def __init__(self, space, layout) -> None:
        self.space, self.layout = space, layout
        self.choices = [np.asarray(c, dtype=np.int64) for c in space.column_choices()]
        self.counts = np.array([len(c) for c in self.choices], dtype=np.int64)
        self.width = len(self.choices)
        self.slots = layout.slots
        self.n_slots = len(self.slots)
        self.context = layout.context
        self.n_ctx = int(np.prod(self.counts[list(self.context)]))
        self.ctx_strides = _strides(self.counts[list(self.context)])
        # per slot: its context columns and genes, their counts, its rows' offset
        self.keys = [s.context for s in self.slots]
        self.n_ctx_of = np.array([int(np.prod(self.counts[list(k)])) for k in self.keys], dtype=np.int64)
        self.n_opt = np.array([int(np.prod(self.counts[list(s.genes)])) for s in self.slots], dtype=np.int64)
        sizes = self.n_ctx_of * self.n_opt
        self.offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.n_rows = int(sizes.sum())  # the zero row's position
        # value -> choice position per column (shifted by one: position 0 and the last one are
        # sentinels, so clipping maps every value outside [0, max] to -1)
        top = int(max(c.max() for c in self.choices)) + 3
        v2i = np.full((self.width, top), -1, dtype=np.int64)
        for c, ch in enumerate(self.choices):
            v2i[c, ch + 1] = np.arange(len(ch))
        self._v2i, self._top = v2i.ravel(), top
        self._v2i_off = np.arange(self.width, dtype=np.int64) * top
        # which slot runs: row[depth] > after (a slot that always runs reads r, which is > -1)
        self._dcol = np.array([0 if s.depth is None else s.depth for s in self.slots], dtype=np.intp)
        self._after = np.array([-1 if s.depth is None else s.after for s in self.slots], dtype=np.int64)
        self.gene_cols = np.array([c for s in self.slots for c in s.genes], dtype=np.intp)
        self.gene_slot = np.array([i for i, s in enumerate(self.slots) for _ in s.genes], dtype=np.intp)
        self._depth_cols = np.asarray(layout.depth_columns, dtype=np.intp)
        # choice positions -> a slot's row inside its table, and the context's fixed row
        self.key_terms = self.terms(padded=False)
        self.ctx_terms = KeyTerms(np.zeros(1), np.asarray([self.context]).reshape(1, -1),
                                  self.ctx_strides[None, :])

    # -- geometry ------------------------------------------------------------------------------
    def slot_keys(self, s: int, padded: bool) -> tuple[list[int], np.ndarray]:
        """(the columns slot `s`'s rows are keyed by: its context, then its genes; their sizes,
        a gene counting one more position when `padded`: the filler of an unused slot)."""
        cols = list(self.keys[s]) + list(self.slots[s].genes)
        sizes = self.counts[cols].copy()
        if padded:
            sizes[len(self.keys[s]):] += 1
        return cols, sizes

    def terms(self, padded: bool, base: np.ndarray | None = None) -> KeyTerms:
        """`KeyTerms` of every slot's position: its row in the tables (`padded` False), or its
        position in a padded lookup (`hwnas.search.indexed`) when `base` gives each slot's start."""
        k = max(len(self.keys[s]) + len(self.slots[s].genes) for s in range(self.n_slots))
        cols = np.zeros((self.n_slots, k), dtype=np.intp)
        weights = np.zeros((self.n_slots, k), dtype=np.int64)
        for s in range(self.n_slots):
            c, sizes = self.slot_keys(s, padded)
            cols[s, :len(c)], weights[s, :len(c)] = c, _strides(sizes)
        return KeyTerms(self.offset if base is None else base, cols, weights)

    def always_runs(self, s: int) -> bool:
        """Whether slot `s` runs in every row of the space (no depth gene, or the smallest depth
        choice already holds it)."""
        slot = self.slots[s]
        return slot.depth is None or int(self.choices[slot.depth].min()) > slot.after

    def ctx_values(self) -> np.ndarray:
        """int [n_ctx, len(context)]: each context's choice positions, in table order."""
        return np.stack(np.unravel_index(np.arange(self.n_ctx), self.counts[list(self.context)]), axis=1)

    def options(self, s: int) -> np.ndarray:
        """int [n_opt, genes]: the values of slot `s`'s genes at each of its options, in order."""
        genes = self.slots[s].genes
        pos = np.unravel_index(np.arange(self.n_opt[s]), self.counts[list(genes)])
        return np.stack([self.choices[c][p] for c, p in zip(genes, pos)], axis=1)

    # -- probes --------------------------------------------------------------------------------
    def base_row(self) -> np.ndarray:
        row = np.array([c[0] for c in self.choices], dtype=np.int32)
        for c in self._depth_cols:
            row[c] = self.choices[c].min()
        return row

    @functools.cached_property
    def _plan(self) -> list[tuple[int, tuple[int, ...]]]:
        """Per context (in order): (its index, the slots probed there: those whose own context
        matches it while every other context column is at its first choice)."""
        pos = self.ctx_values()
        ctx_index = {c: i for i, c in enumerate(self.context)}
        out = []
        for ci in range(self.n_ctx):
            here = tuple(s for s in range(self.n_slots)
                         if all(pos[ci, j] == 0 for c, j in ctx_index.items() if c not in self.keys[s]))
            out.append((ci, here))
        return out

    def _templates(self, here: tuple[int, ...]) -> np.ndarray:
        base = self.base_row()
        blocks, refs = [], []
        for s in here:
            slot = self.slots[s]
            rows = np.repeat(base[None], self.n_opt[s], axis=0)
            rows[:, list(slot.genes)] = self.options(s)
            ref = base.copy()
            if not self.always_runs(s):  # bring it into use: its depth gene just holds it
                rows[:, slot.depth] = slot.after + 1
                ref[slot.depth] = max(slot.after, int(base[slot.depth]))
            blocks.append(rows)
            refs.append(ref)
        return np.concatenate([base[None]] + blocks + ([np.stack(refs)] if refs else []))

    def probes(self) -> np.ndarray:
        """int32 [P, columns]: the rows `assemble` turns a model's outputs on into tables."""
        templates: dict[tuple[int, ...], np.ndarray] = {}
        pos = self.ctx_values()
        out = []
        for ci, here in self._plan:
            if here not in templates:
                templates[here] = self._templates(here)
            block = templates[here].copy()
            for j, c in enumerate(self.context):
                block[:, c] = self.choices[c][pos[ci, j]]
            out.append(block)
        return np.concatenate(out)

    def assemble(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(fixed [n_ctx, F], slot rows [n_rows, F]) from a model's outputs `y` [P, F] on `probes`:
        a context's base row is its fixed row; a slot's entry is its probe minus the row it is
        compared with (for a slot that always runs: its change from the base choices, which sit
        in the fixed row; for an optional one: what adding it costs)."""
        y = np.asarray(y, dtype=np.float64)
        fixed = np.empty((self.n_ctx,) + y.shape[1:])
        rows = np.zeros((self.n_rows,) + y.shape[1:])
        pos = self.ctx_values()
        at = 0
        for ci, here in self._plan:
            fixed[ci] = y[at]
            n_opts = [int(self.n_opt[s]) for s in here]
            start = at + 1
            ref_at = start + sum(n_opts)
            for k, (s, n) in enumerate(zip(here, n_opts)):
                sub = [pos[ci, self.context.index(c)] for c in self.keys[s]]
                ctx_s = int(np.ravel_multi_index(sub, self.counts[list(self.keys[s])]))
                lo = self.offset[s] + ctx_s * n
                rows[lo:lo + n] = y[start:start + n] - y[ref_at + k]
                start += n
            at = ref_at + len(here)
        return fixed, rows

    # -- indices of value rows -----------------------------------------------------------------
    def positions(self, m: np.ndarray) -> np.ndarray:
        """int [n, columns]: each value's choice position in its column, -1 where it is none."""
        m = np.asarray(m)
        return self._v2i.take(np.clip(m + 1, 0, self._top - 1) + self._v2i_off)

    def used(self, m: np.ndarray) -> np.ndarray:
        """bool [n, slots]: the slots value rows `m` run."""
        return np.asarray(m).take(self._dcol, axis=1) > self._after

    def index_values(self, m: np.ndarray, trusted: bool = False
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(fixed row [n], slot rows [n, slots] -- the zero row where a slot does not run --, and
        the rows the tables cannot express: a value outside the space's choices in r, a shared or
        depth gene or a gene a running slot owns; None when `trusted`: rows a search bred from
        the space's choices)."""
        idx = self.positions(m)
        used = self.used(m)
        bad = None
        if not trusted:
            neg = idx < 0
            bad = (neg.take(self.context, axis=1).any(axis=1) | neg.take(self._depth_cols, axis=1).any(axis=1)
                   | (neg.take(self.gene_cols, axis=1) & used.take(self.gene_slot, axis=1)).any(axis=1))
            if bad.any():
                idx = np.maximum(idx, 0)
        return self.ctx_terms(idx)[:, 0], np.where(used, self.key_terms(idx), self.n_rows), bad

    def describe(self) -> dict[str, int]:
        return {"slots": self.n_slots, "contexts": self.n_ctx, "table_rows": self.n_rows}
