"""Turn an additive per-block cost model into a dense table, checked exact, for fast search.

Lookup-table latency predictors, linear analytic ones, MACs and parameter counts all have the form
``cost = F(r) + sum over used slots of B(r, slot, k, e)`` (a block's shapes depend only on its slot,
kernel, expand and the input resolution). Such a model is fully known from a few thousand probe
archs, one batched call; afterwards a search scores a generation with one fancy-index gather
instead of calling the model (which may rebuild its tables per call).

`tabulate` never guesses: it checks the table against the model on random archs and returns None
(use the model directly) when the model is not additive, e.g. a log-space or tree model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwnas.search.operators import D, E, KS, sample_mixed, used_mask
from hwnas.space import MAX_DEPTH, N_SLOTS, N_STAGES, SearchSpace

__all__ = ["AdditiveTable", "tabulate"]

CostFn = Callable[[np.ndarray], np.ndarray]


@dataclass
class AdditiveTable:
    """``fixed[r_idx] + sum(block[r_idx, slot, k_idx, e_idx] over used slots)``.

    Rows the table cannot express (r, k or e not among the space's choices, a stage shallower than
    the smallest depth choice) go to `fallback`, the tabulated model: never silently wrong."""

    space: SearchSpace
    fixed: np.ndarray  # [n_r]
    block: np.ndarray  # [n_r, 20, n_k, n_e]
    fallback: CostFn

    def __post_init__(self) -> None:
        self._r_index = _index(self.space.r_choices)
        self._k_index = _index(self.space.ks_choices)
        self._e_index = _index(self.space.e_choices)
        self._d0 = min(self.space.d_choices)  # shallower stages drop blocks `fixed` counts

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        ri = _lookup(self._r_index, m[:, 0])
        ki = _lookup(self._k_index, m[:, KS])
        ei = _lookup(self._e_index, m[:, E])
        used = used_mask(m)
        bad = (ri < 0) | (((ki < 0) | (ei < 0)) & used).any(axis=1) | (m[:, D] < self._d0).any(axis=1)
        n_slots, nk, ne = self.block.shape[1:]
        flat = ((np.maximum(ri, 0)[:, None] * n_slots + np.arange(n_slots)) * nk
                + np.maximum(ki, 0)) * ne + np.maximum(ei, 0)
        vals = np.take(self.block, flat)
        out = np.take(self.fixed, np.maximum(ri, 0)) + (vals * used).sum(axis=1)
        if bad.any():
            out[bad] = np.asarray(self.fallback(m[bad]), dtype=np.float64)
        return out


def _index(choices: tuple[int, ...]) -> np.ndarray:
    """Value -> choice position, -1 for anything else. Position 0 and the last one are sentinels
    (choices are positive), so `np.take(..., mode="clip")` maps every out-of-range value to -1."""
    idx = np.full(max(choices) + 2, -1, dtype=np.int64)
    idx[np.asarray(choices)] = np.arange(len(choices))
    return idx


def _lookup(index: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.take(index, values, mode="clip")


def _probes(space: SearchSpace) -> np.ndarray:
    """Probe rows, for every resolution (in this order): the base arch (minimum depth, first kernel
    and expand everywhere); each slot at each (k, e) -- an optional slot is brought into use by
    deepening its stage to hold it, earlier optional slots at the base choices; and, per slot, the
    arch it is compared with (the base, or its stage one block shallower)."""
    d0 = min(space.d_choices)
    base = np.zeros(1 + 2 * N_SLOTS + N_STAGES, dtype=np.int32)
    base[KS], base[E], base[D] = space.ks_choices[0], space.e_choices[0], d0
    blocks, refs = [], []
    for slot in range(N_SLOTS):
        stage, j = divmod(slot, MAX_DEPTH)
        ref = base.copy()
        if j > d0:
            ref[D.start + stage] = j
        refs.append(ref)
        for k in space.ks_choices:
            for e in space.e_choices:
                row = base.copy()
                if j >= d0:
                    row[D.start + stage] = j + 1
                row[KS.start + slot], row[E.start + slot] = k, e
                blocks.append(row)
    per_r = np.concatenate([base[None], np.stack(blocks), np.stack(refs)])
    out = np.tile(per_r, (len(space.r_choices), 1))
    out[:, 0] = np.repeat(np.asarray(space.r_choices, dtype=np.int32), len(per_r))
    return out


def tabulate(fn: CostFn, space: SearchSpace, *, n_check: int = 512, rtol: float = 1e-6,
             seed: int = 0) -> AdditiveTable | None:
    """An exact `AdditiveTable` of `fn` (cost of each row of an [n, 46] matrix) over `space`,
    or None when `fn` is not additive per block."""
    nk, ne = len(space.ks_choices), len(space.e_choices)
    n_block = N_SLOTS * nk * ne
    y = np.asarray(fn(_probes(space)), dtype=np.float64).reshape(len(space.r_choices), -1)
    base = y[:, 0]
    block = y[:, 1:1 + n_block].reshape(-1, N_SLOTS, nk, ne)
    ref = y[:, 1 + n_block:]  # [n_r, 20]
    # an always-used slot's entry is its change from the base (whose blocks sit in `fixed`); an
    # optional slot's entry is what adding it costs
    table = AdditiveTable(space, base.copy(), block - ref[:, :, None, None], fn)
    check = sample_mixed(space, n_check, np.random.default_rng(seed))
    want = np.asarray(fn(check), dtype=np.float64)
    got = table.predict(check)
    if not np.allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max(initial=0)))):
        return None
    return table
