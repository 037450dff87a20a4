"""Architecture encoding for the learned latency models (MLP, residual ridge).

Per slot, one-hot kernel and expand masked by "slot used" (an unused slot is all zero, so configs
that build the same network encode the same), one-hot depth per stage, and the standardised
resolution and its square. The choice lists are taken from the training rows and saved with the
predictor, so a model never depends on a `SearchSpace` object being around at load time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from hwnas.latency.layout import used_mask
from hwnas.space import N_SLOTS

__all__ = ["ArchEncoder", "FamilyEncoder", "encoder_from_dict"]


@dataclass
class ArchEncoder:
    ks: tuple[int, ...] = (3, 5, 7)
    es: tuple[int, ...] = (3, 4, 6)
    ds: tuple[int, ...] = (2, 3, 4)
    r_center: float = 176.0
    r_scale: float = 28.0

    @classmethod
    def from_rows(cls, m: np.ndarray) -> ArchEncoder:
        used = used_mask(m)
        r = m[:, 0].astype(np.float64)
        return cls(tuple(int(v) for v in np.unique(m[:, 1:21][used])),
                   tuple(int(v) for v in np.unique(m[:, 21:41][used])),
                   tuple(int(v) for v in np.unique(m[:, 41:46])),
                   float(r.mean()), float(max(r.std(), 1.0)))

    @property
    def width(self) -> int:
        return N_SLOTS * (len(self.ks) + len(self.es)) + 5 * len(self.ds) + 2

    def __call__(self, m: np.ndarray) -> np.ndarray:
        n, nk, ne = len(m), len(self.ks), len(self.es)
        used = used_mask(m)
        out = np.zeros((n, self.width), dtype=np.float64)
        per_slot = out[:, :N_SLOTS * (nk + ne)].reshape(n, N_SLOTS, nk + ne)  # a view
        for i, k in enumerate(self.ks):
            per_slot[:, :, i] = (m[:, 1:21] == k) & used
        for i, e in enumerate(self.es):
            per_slot[:, :, nk + i] = (m[:, 21:41] == e) & used
        base = N_SLOTS * (nk + ne)
        for i, d in enumerate(self.ds):
            out[:, base + i:base + 5 * len(self.ds):len(self.ds)] = m[:, 41:46] == d
        r = (m[:, 0].astype(np.float64) - self.r_center) / self.r_scale
        out[:, -2], out[:, -1] = r, r**2
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ks": list(self.ks), "es": list(self.es), "ds": list(self.ds),
                "r_center": self.r_center, "r_scale": self.r_scale}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> ArchEncoder:
        return cls(tuple(int(v) for v in obj["ks"]), tuple(int(v) for v in obj["es"]),
                   tuple(int(v) for v in obj["ds"]), float(obj["r_center"]), float(obj["r_scale"]))


class FamilyEncoder:
    """The learned models' encoding of another family's rows: its space's one-hot encoding over
    every choice of the family (`FamilySpace.encode`: per gene, all zero when the gene does not
    change the network), then the standardised resolution and its square. Saved as the family's
    name and the resolution's scale, so loading needs no space object."""

    def __init__(self, family: str, r_center: float = 176.0, r_scale: float = 28.0) -> None:
        from hwnas.families import get_family
        from hwnas.families.space import FamilySpace

        self.family, self.r_center, self.r_scale = family, float(r_center), float(r_scale)
        fam = get_family(family)
        # every choice; r's one-hot (the last column, one dummy resolution) is dropped
        self.space = FamilySpace(fam, tuple(g.choices for g in fam.gene_groups()), (1,), fam.default_width)
        self.width = sum(g.count * len(g.choices) for g in fam.gene_groups()) + 2

    @classmethod
    def from_rows(cls, family: str, m: np.ndarray) -> FamilyEncoder:
        r = m[:, 0].astype(np.float64)
        return cls(family, float(r.mean()), float(max(r.std(), 1.0)))

    def __call__(self, m: np.ndarray) -> np.ndarray:
        genes = self.space.encode(np.asarray(m))[:, :-1].astype(np.float64)
        r = (m[:, 0].astype(np.float64) - self.r_center) / self.r_scale
        return np.concatenate([genes, r[:, None], (r**2)[:, None]], axis=1)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "r_center": self.r_center, "r_scale": self.r_scale}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> FamilyEncoder:
        return cls(str(obj["family"]), float(obj["r_center"]), float(obj["r_scale"]))


def encoder_from_dict(obj: Mapping[str, Any]):
    """An `ArchEncoder` or `FamilyEncoder` from its saved dict."""
    if "family" in obj and obj["family"] != "ofa-mbv3":
        return FamilyEncoder.from_dict(obj)
    return ArchEncoder.from_dict(obj)
