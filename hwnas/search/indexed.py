"""OFA-MobileNetV3 rows as choice indices: the evolution's hot loop without value lookups.

A search breeds ~70,000 rows in ~500 rounds of ~140, so each round's cost is the number of numpy
calls, not their size. `GeneIndex` keeps rows as int8 *choice indices* (an unused slot holds the
index one past its choices, "pad") and makes `operators.breed` bit-level: every "gene from Y where
P, else from X" is ``x ^ ((x ^ y) & mask)`` on int8 masks (0 / -1), which is several times faster
than `np.where` on bools; active masks come from one row lookup per depth combination; the
round's `SlotIndex` (what every fused gather reads) comes from one lookup table.

Same operators, same random draws, same children as `operators.breed` + `SlotIndexer` (tested
row for row), so a fixed-seed search finds the same subnets.
"""

from __future__ import annotations

import numpy as np

from hwnas.search.operators import _gene_table
from hwnas.search.tabulate import SlotIndex, SlotIndexer, tabulable
from hwnas.space import MAX_DEPTH, N_SLOTS, N_STAGES, PAD_E, PAD_KS

__all__ = ["GeneIndex"]

_KS0, _E0, _D0 = 1, 1 + N_SLOTS, 1 + 2 * N_SLOTS
_WIDTH = 1 + 2 * N_SLOTS + N_STAGES


class GeneIndex:
    """Choice-index rows of OFA-MobileNetV3 `space`, their breeding, values and `SlotIndex`
    (for `indexer`'s tables). `supports(space)` says whether it applies."""

    @staticmethod
    def supports(space) -> bool:
        if not tabulable(space):
            return False
        table, counts = _gene_table(space)
        n_ks, n_e = len(space.ks_choices), len(space.e_choices)
        return (table.shape[0] == _WIDTH and int(counts.max()) < 64  # indices and masks are int8
                and (n_ks + 1) * (n_e + 1) < 128 and len(space.d_choices) ** N_STAGES < 2 ** 15)

    def __init__(self, space, indexer: SlotIndexer) -> None:
        self.space = space
        table, counts = _gene_table(space)
        self.counts = counts.astype(np.float64)
        nd = len(space.d_choices)
        depth = np.asarray(space.d_choices)
        # values: [columns, max choices + 1], the extra index of a slot gene is its filler
        stride = table.shape[1] + 1
        vals = np.zeros((_WIDTH, stride), dtype=np.int32)
        vals[:, :table.shape[1]] = table
        n_ks, n_e = len(space.ks_choices), len(space.e_choices)
        vals[_KS0:_E0, n_ks] = PAD_KS
        vals[_E0:_D0, n_e] = PAD_E
        self._vals = vals.ravel()
        self._val_off = np.arange(_WIDTH, dtype=np.intp) * stride
        # value -> index, per column (for rows that come in as values)
        top = int(max(table.max(), PAD_KS, PAD_E)) + 1
        v2i = np.full((_WIDTH, top), -1, dtype=np.int8)
        for c in range(_WIDTH):
            v2i[c, table[c, :counts[c]]] = np.arange(counts[c])
        self._v2i = v2i
        self._v2i_off = np.arange(_WIDTH, dtype=np.intp) * top
        # active masks (-1 = the gene changes the network) per depth combination, last row: all
        self.n_combos = nd ** N_STAGES
        self.fresh = self.n_combos
        self._dc_w = (nd ** np.arange(N_STAGES)).astype(np.int16)
        combos = (np.arange(self.n_combos)[:, None] // (nd ** np.arange(N_STAGES))) % nd  # [combos, 5]
        used = (np.arange(MAX_DEPTH)[None, None, :] < depth[combos][:, :, None]).reshape(-1, N_SLOTS)
        act = np.full((self.n_combos + 1, _WIDTH), -1, dtype=np.int8)
        act[:-1, _KS0:_E0] = act[:-1, _E0:_D0] = np.where(used, -1, 0)
        self._act = act
        pad = np.zeros(_WIDTH, dtype=np.int8)
        pad[_KS0:_E0], pad[_E0:_D0] = n_ks, n_e
        self._pad = pad
        # SlotIndex: flat fused-table row of (resolution, slot, kernel index, expand index), the
        # zero row for the filler pair
        ke = (n_ks + 1) * (n_e + 1)
        self._ke_w = n_e + 1
        flat = np.full((len(space.r_choices), N_SLOTS, n_ks + 1, n_e + 1), indexer.n_rows, dtype=np.intp)
        for ri, r in enumerate(space.r_choices):
            for i, k in enumerate(space.ks_choices):
                for j, e in enumerate(space.e_choices):
                    flat[ri, :, i, j] = indexer._r_off[r] + indexer._slot_off + indexer._ke[k, e]
        self._flat = flat.ravel()
        self._r_stride = N_SLOTS * ke
        self._slot_base = np.arange(N_SLOTS, dtype=np.intp) * ke

    # -- conversions ---------------------------------------------------------------------------
    def combos(self, rows: np.ndarray) -> np.ndarray:
        """int [n]: each index row's depth combination (its active-mask row)."""
        return rows[:, _D0:] @ self._dc_w

    def canonical(self, rows: np.ndarray, combos: np.ndarray | None = None) -> np.ndarray:
        """Index rows with the filler index in every slot their depths leave unused."""
        act = self._act.take(self.combos(rows) if combos is None else combos, axis=0)
        return self._pad ^ ((rows ^ self._pad) & act)

    def to_index(self, m: np.ndarray) -> np.ndarray:
        """int8 canonical index rows of canonical value rows `m` (of this space)."""
        rows = self._v2i.take(np.asarray(m, dtype=np.intp) + self._v2i_off)
        return self.canonical(rows)

    def values(self, rows: np.ndarray) -> np.ndarray:
        """int32 canonical value rows of index rows."""
        return self._vals.take(rows + self._val_off)

    def slot_index(self, rows: np.ndarray) -> SlotIndex:
        """The `SlotIndex` `SlotIndexer(space)(values(rows))` gives, from one lookup."""
        ri = rows[:, 0].astype(np.intp)
        ke = rows[:, _KS0:_E0] * self._ke_w + rows[:, _E0:_D0]
        return SlotIndex(ri, self._flat.take(ke + (ri * self._r_stride)[:, None] + self._slot_base))

    # -- breeding ------------------------------------------------------------------------------
    def breed(self, parents: np.ndarray, parent_combos: np.ndarray, k_mut: int, k_cross: int,
              rng: np.random.Generator, prob: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """`operators.breed` on index rows: (children's canonical index rows, their depth
        combinations). Same draws from `rng`, same children."""
        k = k_mut + k_cross
        n_par, width = len(parents), _WIDTH
        draw = rng.random((k, 2 * width + 2))
        p = np.empty((k, width), dtype=bool)
        np.less(draw[:k_mut, :width], prob, out=p[:k_mut])
        np.less(draw[k_mut:, :width], 0.5, out=p[k_mut:])
        p = np.negative(p.view(np.int8))  # -1: the gene comes from y
        fresh = (draw[:, width:2 * width] * self.counts).astype(np.int8)
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
