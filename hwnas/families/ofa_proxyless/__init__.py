"""OFA-ProxylessNAS: Once-for-All's ``OFAProxylessNASNets`` (published as
``ofa_proxyless_d234_e346_k357_w1.3``).

Genes, in OFA's arch-dict order: ``ks`` and ``e`` for 21 blocks (5 stages of up to 4 blocks, then a
last stage of one), ``d`` for 6 stages. OFA runs ``min(len(stage), d)`` blocks of a stage, so the last
stage is always one block and ``d_5`` never changes the network: it is canonicalised to the filler,
and an OFA dict may hold any of 1 (what OFA's own sampler writes), 2, 3, 4 there.

This module needs numpy only; torch is imported when a network, a layout or a cost is asked for.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from hwnas.errors import InputError
from hwnas.families.base import Family, GeneArch, GeneGroup, check_n_classes
from hwnas.families.genes import ShrinkPhase
from hwnas.families.ofa_proxyless.plan import N_SLOTS, N_STAGES, STAGE_DEPTHS

if TYPE_CHECKING:
    import torch.nn as nn

__all__ = ["OFAProxylessFamily"]

KS_CHOICES = (3, 5, 7)
E_CHOICES = (3, 4, 6)
D_CHOICES = (2, 3, 4)
#: values of the last stage's depth gene accepted in an arch dict (all mean one block)
LAST_D_ACCEPTED = (1,) + D_CHOICES

# per gene slot: its stage and its index in the stage (slot = 4 * stage + index)
_STAGE_OF_SLOT = np.array([s for s, depth in enumerate(STAGE_DEPTHS) for _ in range(depth)])
_INDEX_OF_SLOT = np.array([j for depth in STAGE_DEPTHS for j in range(depth)])


@functools.lru_cache(maxsize=None)
def _slot_layout():
    from hwnas.families.slots import Slot, SlotLayout

    first_depth = 1 + 2 * N_SLOTS
    return SlotLayout(tuple(
        Slot((1 + s, 1 + N_SLOTS + s),
             depth=first_depth + int(stage) if STAGE_DEPTHS[stage] > 1 else None, after=int(j))
        for s, (stage, j) in enumerate(zip(_STAGE_OF_SLOT, _INDEX_OF_SLOT))))


class OFAProxylessFamily(Family):
    name = "ofa-proxyless"
    ofa_class = "OFAProxylessNASNets"
    title = "OFA-ProxylessNAS"
    #: 1.3 is the published supernet; the layout is width-parametric, 1.0 is OFA's default width
    widths = (1.3, 1.0)
    published = {1.3: "ofa_proxyless_d234_e346_k357_w1.3"}
    shrink_phases = (ShrinkPhase("kernel", "ks", gradual=False), ShrinkPhase("depth", "d"),
                     ShrinkPhase("expand", "e", sorts_channels=True))

    # -- genes ------------------------------------------------------------------------------
    def gene_groups(self) -> tuple[GeneGroup, ...]:
        return (GeneGroup("ks", N_SLOTS, KS_CHOICES), GeneGroup("e", N_SLOTS, E_CHOICES),
                GeneGroup("d", N_STAGES, D_CHOICES))

    @staticmethod
    def runtime_depths(d: np.ndarray) -> np.ndarray:
        """int [n, 6]: blocks each stage runs (OFA's ``runtime_depth = min(len(stage), d)``)."""
        return np.minimum(np.asarray(d), np.asarray(STAGE_DEPTHS)[None, :])

    def active_mask(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        depth = self.runtime_depths(m[:, 1 + 2 * N_SLOTS:])
        used = _INDEX_OF_SLOT[None, :] < depth[:, _STAGE_OF_SLOT]
        d_active = np.broadcast_to(np.asarray(STAGE_DEPTHS) > 1, (len(m), N_STAGES))
        return np.concatenate([used, used, d_active], axis=1)

    def sample_matrix(self, n: int, rng: np.random.Generator | int | None,
                      resolutions: Sequence[int]) -> np.ndarray:
        """`n` canonical rows, uniform over distinct networks: a stage of depth d has (|ks|*|e|)^d
        configurations, so its depth is drawn with that weight, then every used slot uniformly."""
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        resolutions = np.asarray(list(resolutions), dtype=np.int64)
        if resolutions.size == 0:
            raise InputError("sample_matrix needs at least one resolution")
        ks_g, e_g, d_g = self.gene_groups()
        d_values = np.asarray(d_g.choices)
        weights = (float(len(ks_g.choices) * len(e_g.choices))) ** d_values
        elastic = [s for s, depth in enumerate(STAGE_DEPTHS) if depth > 1]
        d = np.full((n, N_STAGES), d_g.filler, dtype=np.int64)
        d[:, elastic] = rng.choice(d_values, size=(n, len(elastic)), p=weights / weights.sum())
        rows = np.concatenate([rng.choice(resolutions, size=(n, 1)),
                               rng.choice(np.asarray(ks_g.choices), size=(n, N_SLOTS)),
                               rng.choice(np.asarray(e_g.choices), size=(n, N_SLOTS)), d], axis=1)
        return self.canonical(rows)

    def networks_per_resolution(self) -> int:
        """Each elastic stage has sum over d of (|ks|*|e|)^d configurations; the last block |ks|*|e|."""
        per_block = len(KS_CHOICES) * len(E_CHOICES)
        stage = sum(per_block ** d for d in D_CHOICES)
        return stage ** sum(1 for depth in STAGE_DEPTHS if depth > 1) * per_block

    # -- archs ------------------------------------------------------------------------------
    def arch_from_dict(self, obj: Mapping[str, Any], w: float | None = None) -> GeneArch:
        """OFA's arch dict plus ``"r"``; the last stage's depth may be any of 1, 2, 3, 4."""
        if isinstance(obj, Mapping) and isinstance(obj.get("d"), (list, tuple)) \
                and len(obj["d"]) == N_STAGES:
            last = obj["d"][-1]
            if not isinstance(last, bool) and isinstance(last, (int, np.integer, float, np.floating)) \
                    and last in LAST_D_ACCEPTED:
                obj = {**obj, "d": [*obj["d"][:-1], D_CHOICES[0]]}
            else:
                raise InputError(f"{self.name} arch d[{N_STAGES - 1}]={last!r} (the one-block last "
                                 f"stage) must be one of {list(LAST_D_ACCEPTED)}")
        return super().arch_from_dict(obj, w)

    # -- networks ---------------------------------------------------------------------------
    def build_supernet(self, n_classes: int = 1000, width_mult: float | None = None,
                       dropout: float = 0.0) -> "nn.Module":
        from hwnas.families.ofa_proxyless.network import OFAProxylessNASNets

        return OFAProxylessNASNets(n_classes=n_classes, width_mult=self.check_width(width_mult),
                                   dropout=dropout)

    def static_subnet(self, arch, n_classes: int = 1000):
        import torch

        from hwnas.families.ofa_proxyless.network import ProxylessNASSubnet

        torch.manual_seed(0)  # fixed random weights keep profiling repeatable
        return ProxylessNASSubnet(arch, n_classes=n_classes).eval()

    def count_params_macs(self, m: np.ndarray, width_mult: float, n_classes: int
                          ) -> tuple[np.ndarray, np.ndarray]:
        from hwnas.families.ofa_proxyless.costs import count_params_macs

        return count_params_macs(self.check_rows(m), self.check_width(width_mult), n_classes)

    def memory_trace(self, row, width_mult: float, n_classes: int, precision: str = "fp32"):
        from hwnas.families.ofa_proxyless.memory import memory_trace

        return memory_trace(row, float(width_mult), n_classes, precision)

    def cost_layout_class(self):
        from hwnas.families.ofa_proxyless.parts import ProxylessCostLayout

        return ProxylessCostLayout

    def slot_layout(self):
        """21 slots, each owning its kernel and expand gene: slot j of an elastic stage runs while
        the stage's depth is above j; the last stage's one block always runs."""
        return _slot_layout()

    # -- Once-for-All checkpoints -----------------------------------------------------------
    def ofa_layout(self, width_mult: float, n_classes: int = 1000) -> dict[str, tuple[int, ...]]:
        from hwnas.families.ofa_proxyless.plan import ofa_layout
        return ofa_layout(self.check_width(width_mult), check_n_classes(n_classes), KS_CHOICES, E_CHOICES)
