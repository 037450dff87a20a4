"""Rows as choice indices: the evolution's hot loop without value lookups, for any family with a
slot layout (`hwnas.families.slots`).

A search breeds ~70,000 rows in ~500 rounds of ~140, so each round's cost is the number of numpy
calls, not their size. `GeneIndex` keeps rows as small-int *choice indices* (an inactive gene holds
the index one past its choices, "pad") and makes `operators.breed` bit-level: every "gene from Y
where P, else from X" is ``x ^ ((x ^ y) & mask)`` on int masks (0 / -1), which is several times
faster than `np.where` on bools; a row's active genes depend on its depth genes alone, so active
masks come from one row lookup per depth combination; the round's `SlotIndex` (what every fused
gather reads) comes from one lookup table, unused slots (padded genes) pointing at the zero row.

Same operators, same random draws, same children as `operators.breed` + the value-row index
(tested row for row), so a fixed-seed search finds the same subnets.
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.search.operators import gene_table
from hwnas.search.slots import SpaceSlots, space_slots

__all__ = ["SlotIndex", "GeneIndex", "gene_index"]

_MAX_COMBOS = 1 << 20


class SlotIndex:
    """Where each row of a batch reads every table over one space: its fixed row (`ctx`) and,
    per slot, its slot row (`flat`; the zero row where the slot does not run). Derived once per
    batch and shared by every cost column and the accuracy features; `take(rows)` keeps the rows
    it names."""

    __slots__ = ("ctx", "flat")

    def __init__(self, ctx: np.ndarray, flat: np.ndarray) -> None:
        self.ctx, self.flat = ctx, flat

    def take(self, rows: np.ndarray) -> SlotIndex:
        return SlotIndex(self.ctx[rows], self.flat[rows])

    def __len__(self) -> int:
        return len(self.ctx)

    @staticmethod
    def concat(parts: list[SlotIndex]) -> SlotIndex:
        return SlotIndex(np.concatenate([p.ctx for p in parts]), np.concatenate([p.flat for p in parts]))


@functools.lru_cache(maxsize=32)
def gene_index(space) -> "GeneIndex | None":
    """The `GeneIndex` of `space`: None when its family has no slot layout, or its active genes
    do not follow from its depth genes alone (checked on a sample), or it is too large."""
    slots = space_slots(space)
    if slots is None:
        return None
    table, counts = gene_table(space)
    n_combos = int(np.prod([counts[c] for c in slots.layout.depth_columns]))
    if n_combos > _MAX_COMBOS or int(counts.max()) + 1 >= (1 << 15):
        return None
    gi = GeneIndex(space, slots)
    return gi if gi.consistent() else None


class GeneIndex:
    """Choice-index rows of `space`, their breeding, values and `SlotIndex`; also the
    `SlotIndex` of value rows (`index_values`). Build with `gene_index(space)`."""

    def __init__(self, space, slots: SpaceSlots) -> None:
        self.space, self.slots = space, slots
        table, counts = gene_table(space)
        self.width = width = len(counts)
        self.counts = counts.astype(np.float64)
        # choice indices and masks as int8 where they fit (the bit-level ops are fastest there)
        self.dtype = np.dtype(np.int8 if int(counts.max()) + 1 < 128 else np.int16)
        # depth genes: their combination picks a row's active mask
        self.depth_cols = np.asarray(slots.layout.depth_columns, dtype=np.intp)
        dcounts = counts[self.depth_cols]
        self.n_combos = int(np.prod(dcounts))
        self.fresh = self.n_combos  # the mask row of fresh random genes: every gene "used"
        self.combo_dtype = np.dtype(np.int16 if self.n_combos < (1 << 15) else np.int32)
        self._dc_w = np.ones(len(dcounts), dtype=self.combo_dtype)
        for i in range(1, len(dcounts)):
            self._dc_w[i] = self._dc_w[i - 1] * dcounts[i - 1]
        cols = self.depth_cols
        self._dsel = (slice(int(cols[0]), int(cols[-1]) + 1)
                      if len(cols) and (np.diff(cols) == 1).all() else cols)
        # a representative value row per depth combination: its active mask and fillers
        reps = np.repeat(table[:, 0][None].astype(np.int64), self.n_combos, axis=0)
        combo_pos = (np.arange(self.n_combos)[:, None] // self._dc_w.astype(np.int64)) % dcounts
        reps[:, self.depth_cols] = table[self.depth_cols, combo_pos]
        active = np.ones((self.n_combos, width), dtype=bool)
        active[:, 1:] = space.active_mask(reps)
        canon = np.asarray(space.canonical(reps), dtype=np.int64)
        act = np.full((self.n_combos + 1, width), -1, dtype=self.dtype)
        act[:-1] = np.where(active, -1, 0)
        self._act = act
        ever_off = ~active.all(axis=0)
        pad = np.where(ever_off, counts, 0).astype(self.dtype)
        self._pad = pad
        # values: [columns, max choices + 1], the extra index of a gene is its filler
        stride = table.shape[1] + 1
        vals = np.zeros((width, stride), dtype=np.int32)
        vals[:, :table.shape[1]] = table
        for c in np.flatnonzero(ever_off):
            off = np.flatnonzero(~active[:, c])[0]
            vals[c, counts[c]] = canon[off, c]
        self._vals = vals.ravel()
        self._val_off = np.arange(width, dtype=np.intp) * stride
        # value -> index, per column (for rows that come in as values; -1: not a choice)
        top = int(max(table.max(), vals.max())) + 1
        v2i = np.full((width, top), -1, dtype=self.dtype)
        for c in range(width):
            v2i[c, table[c, :counts[c]]] = np.arange(counts[c])
        self._v2i = v2i.ravel()
        self._v2i_off = np.arange(width, dtype=np.intp) * top
        full = int(np.argmax(active.sum(axis=1)))  # the depth combination with the most active genes
        self._build_remap(table, counts, reps[full], active[full], v2i)
        self._build_lookup()

    def _build_remap(self, table: np.ndarray, counts: np.ndarray, full: np.ndarray, active: np.ndarray,
                     v2i: np.ndarray) -> None:
        """Genes whose canonical form changes an active value (ResNet50's d_0 and w_0, whose
        choices can build the same network): index -> canonical index, per such column."""
        cols, maps = [], []
        for c in np.flatnonzero(active[1:]) + 1:
            rows = np.repeat(full[None], counts[c], axis=0)
            rows[:, c] = table[c, :counts[c]]
            got = v2i[c].take(np.asarray(self.space.canonical(rows), dtype=np.intp)[:, c])
            if not np.array_equal(got, np.arange(counts[c])):
                cols.append(c)
                maps.append(np.append(np.where(got < 0, np.arange(counts[c]), got), counts[c]))
        self._remap_cols = np.asarray(cols, dtype=np.intp)
        stride = int(counts.max()) + 1
        remap = np.zeros((len(cols), stride), dtype=self.dtype)
        for i, (c, mp) in enumerate(zip(cols, maps)):
            remap[i, :len(mp)] = mp
        self._remap = remap.ravel()
        self._remap_off = np.arange(len(cols), dtype=np.intp) * stride

    def _build_lookup(self) -> None:
        """`SlotIndex` of index rows: each slot's padded key (its context, then its genes with
        the filler index) -> its table row, or the zero row when a gene is the filler."""
        slots = self.slots
        sizes = []
        for s in range(slots.n_slots):
            sizes.append(int(np.prod(slots.slot_keys(s, padded=True)[1])))
        base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        lookup = np.empty(int(sum(sizes)), dtype=np.intp)
        for s in range(slots.n_slots):
            cols, padded = slots.slot_keys(s, padded=True)
            n_key = len(slots.keys[s])
            pos = np.stack(np.unravel_index(np.arange(sizes[s]), padded), axis=1)  # [size, keys]
            genes = pos[:, n_key:]
            filler = (genes == padded[n_key:] - 1).any(axis=1)
            real = slots.counts[cols]
            ctx_s = np.ravel_multi_index(pos[:, :n_key].T, real[:n_key]) if n_key else np.zeros(len(pos), int)
            opt = np.ravel_multi_index(np.minimum(genes, real[n_key:] - 1).T, real[n_key:])
            lookup[base[s]:base[s] + sizes[s]] = np.where(filler, slots.n_rows,
                                                          slots.offset[s] + ctx_s * slots.n_opt[s] + opt)
        self._lookup = lookup
        self._key_terms = slots.terms(padded=True, base=base)

    def consistent(self, n: int = 512) -> bool:
        """Whether a row's active genes follow from its depth genes alone, and a slot's genes are
        active exactly when it runs (on a fixed sample of the space)."""
        from hwnas.search.operators import sample_mixed

        from hwnas.search.operators import random_genes

        rng = np.random.default_rng(11)
        raw = random_genes(self.space, n, rng)
        if not np.array_equal(self.values(self.to_index(raw)), self.space.canonical(raw)):
            return False
        m = sample_mixed(self.space, n, rng)
        act = self._act[self.combos(self.to_index(m))][:, 1:] != 0
        if not np.array_equal(act, self.space.active_mask(m)):
            return False
        used = self.slots.used(m)
        genes = self.slots.gene_cols
        return bool(np.array_equal(act[:, genes - 1], used[:, self.slots.gene_slot]))

    # -- conversions ---------------------------------------------------------------------------
    def combos(self, rows: np.ndarray) -> np.ndarray:
        """int [n]: each index row's depth combination (its active-mask row)."""
        return rows[:, self._dsel] @ self._dc_w

    def canonical(self, rows: np.ndarray, combos: np.ndarray | None = None) -> np.ndarray:
        """Index rows with the filler index in every gene their depths leave inactive."""
        act = self._act.take(self.combos(rows) if combos is None else combos, axis=0)
        out = self._pad ^ ((rows ^ self._pad) & act)
        if len(self._remap_cols):
            out[:, self._remap_cols] = self._remap.take(out[:, self._remap_cols] + self._remap_off)
        return out

    def to_index(self, m: np.ndarray) -> np.ndarray:
        """Canonical index rows of canonical value rows `m` (of this space)."""
        rows = self._v2i.take(np.asarray(m, dtype=np.intp) + self._v2i_off)
        return self.canonical(rows)

    def values(self, rows: np.ndarray) -> np.ndarray:
        """int32 canonical value rows of index rows."""
        return self._vals.take(rows + self._val_off)

    def slot_index(self, rows: np.ndarray) -> SlotIndex:
        """The `SlotIndex` of canonical index rows, from one lookup."""
        slots = self.slots
        return SlotIndex(slots.ctx_terms(rows)[:, 0], self._lookup.take(self._key_terms(rows)))

    def index_values(self, m: np.ndarray, trusted: bool = False) -> SlotIndex | None:
        """The `SlotIndex` of value rows (None for a batch with a row the tables cannot express:
        a value outside the space's choices where it matters). `trusted`: rows a search bred
        from the space's own choices (the checks are skipped)."""
        ctx, flat, bad = self.slots.index_values(m, trusted)
        if bad is not None and bad.any():
            return None
        return SlotIndex(ctx, flat)

    # -- breeding ------------------------------------------------------------------------------
    def breed(self, parents: np.ndarray, parent_combos: np.ndarray, k_mut: int, k_cross: int,
              rng: np.random.Generator, prob: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """`operators.breed` on index rows: (children's canonical index rows, their depth
        combinations). Same draws from `rng`, same children."""
        k = k_mut + k_cross
        n_par, width = len(parents), self.width
        draw = rng.random((k, 2 * width + 2))
        p = np.empty((k, width), dtype=bool)
        np.less(draw[:k_mut, :width], prob, out=p[:k_mut])
        np.less(draw[k_mut:, :width], 0.5, out=p[k_mut:])
        p = np.negative(p.view(np.int8) if self.dtype == np.int8 else p.astype(self.dtype))  # -1: from y
        fresh = (draw[:, width:2 * width] * self.counts).astype(self.dtype)
        pick = (draw[:, 2 * width:] * n_par).astype(np.intp)
        x = parents.take(pick[:, 0], axis=0)
        ax = self._act.take(parent_combos.take(pick[:, 0]), axis=0)
        if k_cross:
            y = np.concatenate([fresh[:k_mut], parents.take(pick[k_mut:, 1], axis=0)])
            cy = np.concatenate([np.full(k_mut, self.fresh, dtype=parent_combos.dtype),
                                 parent_combos.take(pick[k_mut:, 1])])
            ay = self._act.take(cy, axis=0)
        else:
            y, ay = fresh, self._act[self.fresh]
        xy = x ^ y
        chosen = x ^ (xy & p)  # y where p, else x
        other = chosen ^ xy  # x where p, else y
        axy = ax ^ ay
        a_chosen = ax ^ (axy & p)  # does the chosen source use the gene
        a_other = a_chosen ^ axy
        genes = fresh ^ ((other ^ fresh) & a_other)
        genes ^= (chosen ^ genes) & a_chosen
        combos = self.combos(genes)
        return self.canonical(genes, combos), combos
