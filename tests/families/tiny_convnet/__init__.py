"""TinyConvNet: a family defined only in the test folder, registered at test time
(`hwnas.families.registered_family`), so the registry-driven tests run every stage on a family
hwnas's own code has never heard of.

Genes, in arch-dict order: ``ks`` (3 or 5) and ``e`` (expand 2 or 4) of 4 block slots (2 stages of
up to 2 blocks), ``d`` (1 or 2) of the 2 stages. A slot past its stage's depth does not change the
network (`active_mask`). No Once-for-All original: its checkpoint layout is its own supernet's.
This module needs numpy only; torch is imported when a network or a module to time is asked for.
"""

from __future__ import annotations

import functools

import numpy as np

from hwnas.families.base import Family, GeneGroup, check_n_classes
from hwnas.families.genes import ShrinkPhase

from .plan import D_CHOICES, E_CHOICES, KS_CHOICES, MAX_DEPTH, N_SLOTS, N_STAGES

__all__ = ["TinyConvFamily"]

_STAGE_OF_SLOT = np.arange(N_SLOTS) // MAX_DEPTH
_INDEX_OF_SLOT = np.arange(N_SLOTS) % MAX_DEPTH
_D0 = 1 + 2 * N_SLOTS  # first depth column of a flat row


@functools.lru_cache(maxsize=None)
def _slot_layout():
    from hwnas.families.slots import Slot, SlotLayout

    return SlotLayout(tuple(Slot((1 + s, 1 + N_SLOTS + s), depth=_D0 + int(stage), after=int(j))
                            for s, (stage, j) in enumerate(zip(_STAGE_OF_SLOT, _INDEX_OF_SLOT))))


class TinyConvFamily(Family):
    name = "tiny-convnet"
    title = "TinyConvNet"
    widths = (1.0,)
    shrink_phases = (ShrinkPhase("kernel", "ks", gradual=False), ShrinkPhase("depth", "d"),
                     ShrinkPhase("expand", "e", sorts_channels=True))

    # -- genes ----------------------------------------------------------------------------
    def gene_groups(self) -> tuple[GeneGroup, ...]:
        return (GeneGroup("ks", N_SLOTS, KS_CHOICES), GeneGroup("e", N_SLOTS, E_CHOICES),
                GeneGroup("d", N_STAGES, D_CHOICES))

    def active_mask(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        used = _INDEX_OF_SLOT[None, :] < m[:, _D0 + _STAGE_OF_SLOT]
        return np.concatenate([used, used, np.ones((len(m), N_STAGES), dtype=bool)], axis=1)

    def networks_per_resolution(self) -> int:
        per_block = len(KS_CHOICES) * len(E_CHOICES)
        return sum(per_block ** d for d in D_CHOICES) ** N_STAGES

    # -- networks -------------------------------------------------------------------------
    def build_supernet(self, n_classes: int = 1000, width_mult: float | None = None, dropout: float = 0.0):
        from .network import TinyConvSupernet

        self.check_width(width_mult)
        return TinyConvSupernet(self, n_classes, dropout)

    def static_subnet(self, arch, n_classes: int = 1000):
        import torch

        from .network import TinyConvSubnet

        torch.manual_seed(0)  # fixed random weights keep profiling repeatable
        return TinyConvSubnet(self.resolve_arch(arch, arch.w), n_classes).eval()

    def count_params_macs(self, m: np.ndarray, width_mult: float, n_classes: int):
        from .costs import count_params_macs

        self.check_width(width_mult)
        return count_params_macs(self.check_rows(m), check_n_classes(n_classes))

    def cost_layout_class(self):
        from .parts import TinyCostLayout

        return TinyCostLayout

    def slot_layout(self):
        """4 slots, each owning its kernel and expand gene, running while its stage's depth is above
        its index."""
        return _slot_layout()
