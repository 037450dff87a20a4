"""Architecture encoding for the learned latency models (MLP, residual ridge).

Per gene, one-hot over its choices, all zero where the gene does not change the network (so
configs that build the same network encode the same); then the standardised resolution and its
square, all read from the family (`Family.gene_groups`, `active_mask`), so a model never needs a
space object at load time. Models fit today encode *by gene*: the genes in flat-column order over
every choice of the family, saved as the family's name and the resolution's scale.

Predictor files of format version 1 may hold the *by slot* layout OFA-MobileNetV3's first models
were fitted with (each slot's genes, slot after slot, then the depths, over the choices the training
rows held; saved as those choices per gene group, ``ks``, ``es``, ``ds``): they still read as saved.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["GeneEncoder", "encoder_from_dict"]

#: the saved names of the by-slot encoding's choices, one per gene group (its first models')
SLOT_CHOICE_KEYS = ("ks", "es", "ds")


class GeneEncoder:
    """One-hot genes + standardised r and r^2 of one family's flat rows (see the module docstring).

    `choices` (by slot only): the codes each gene group is one-hot over; None: every choice of the
    family, genes in flat-column order."""

    def __init__(self, family: str, choices: Sequence[Sequence[int]] | None = None,
                 r_center: float = 176.0, r_scale: float = 28.0) -> None:
        from hwnas.families import get_family

        self.family, self.r_center, self.r_scale = family, float(r_center), float(r_scale)
        fam = self._fam = get_family(family)
        groups = fam.gene_groups()
        if choices is None:
            self.choices = None
            order = list(range(1, 1 + len(fam.gene_columns())))
            codes = [g.to_codes(g.choices) for g in groups]
        else:
            self.choices = tuple(tuple(int(v) for v in c) for c in choices)
            owned = [c for s in fam.slot_layout().slots for c in s.genes]
            order = owned + [c for c in range(1, 1 + len(fam.gene_columns())) if c not in set(owned)]
            codes = [list(c) for c in self.choices]
        # per gene group: its genes' flat columns and where each gene's one-hot starts, in `order`
        group_of = {c: i for i, sl in enumerate(fam.group_slices().values()) for c in range(sl.start, sl.stop)}
        starts, at = {}, 0
        for c in order:
            starts[c] = at
            at += len(codes[group_of[c]])
        self._groups = []
        for i, sl in enumerate(fam.group_slices().values()):
            first = np.array([starts[c] for c in range(sl.start, sl.stop)])
            step = np.unique(np.diff(first))
            # evenly spaced (both layouts of the built-in families): written through a strided view
            where = int(step[0]) if len(step) == 1 else (first[:, None] + np.arange(len(codes[i]))).ravel()
            self._groups.append((sl, np.asarray(codes[i], dtype=np.int64), int(first[0]), where))
        self.width = at + 2

    @classmethod
    def from_rows(cls, family: str, m: np.ndarray) -> GeneEncoder:
        """The family's encoder (by gene) with r's scale of training rows `m`."""
        r = m[:, 0].astype(np.float64)
        return cls(family, None, float(r.mean()), float(max(r.std(), 1.0)))

    def __call__(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        active = self._fam.active_mask(m)
        out = np.zeros((len(m), self.width), dtype=np.float64)
        for sl, codes, first, where in self._groups:
            genes, act = m[:, sl], active[:, sl.start - 1:sl.stop - 1]
            if isinstance(where, int):  # gene i's one-hot starts at first + i * where: a strided view
                hot = np.lib.stride_tricks.as_strided(out[:, first:], (len(m), sl.stop - sl.start, len(codes)),
                                                      (out.strides[0], where * out.strides[1], out.strides[1]),
                                                      writeable=True)
                for j, code in enumerate(codes):  # one choice at a time: [n, genes] operands
                    hot[:, :, j] = (genes == code) & act
            else:
                out[:, where] = ((genes[:, :, None] == codes) & act[:, :, None]).reshape(len(m), -1)
        r = (m[:, 0].astype(np.float64) - self.r_center) / self.r_scale
        out[:, -2], out[:, -1] = r, r**2
        return out

    def to_dict(self) -> dict[str, Any]:
        scale = {"r_center": self.r_center, "r_scale": self.r_scale}
        if self.choices is None:
            return {"family": self.family, **scale}
        return {**{k: list(c) for k, c in zip(SLOT_CHOICE_KEYS, self.choices)}, **scale}


def encoder_from_dict(obj: Mapping[str, Any], family: str) -> GeneEncoder:
    """The `GeneEncoder` a predictor of `family` saved (`GeneEncoder.to_dict`)."""
    scale = float(obj["r_center"]), float(obj["r_scale"])
    if "family" in obj:
        return GeneEncoder(str(obj["family"]), None, *scale)
    return GeneEncoder(family, [obj[k] for k in SLOT_CHOICE_KEYS], *scale)
