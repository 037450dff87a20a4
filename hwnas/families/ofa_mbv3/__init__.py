"""OFA-MobileNetV3 (Once-for-All's ``OFAMobileNetV3``): the family hwnas started with.

Its arch and space (`arch.Arch`, `space.SearchSpace`; also `hwnas.space.Arch` / `.SearchSpace`) are a
`GeneArch` and a `FamilySpace` that predate the others and keep their own fields. `plan` is the
layout, `network` the supernet and static subnet, `costs` the exact counts, `parts` the cost
layout, `tables` the CSV rows.

This module needs numpy only; torch is imported when a network is asked for.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

import numpy as np

from hwnas.families.base import Family, GeneGroup
from hwnas.families.genes import ShrinkPhase
from hwnas.families.ofa_mbv3.arch import Arch
from hwnas.families.ofa_mbv3.plan import (
    D_CHOICES,
    E_CHOICES,
    KS_CHOICES,
    MAX_DEPTH,
    N_SLOTS,
    N_STAGES,
    ofa_layout,
    slots_used,
)
from hwnas.families.ofa_mbv3.space import SearchSpace

__all__ = ["OFAMobileNetV3Family"]


@functools.lru_cache(maxsize=None)
def _slot_layout():
    from hwnas.families.slots import Slot, SlotLayout

    first_depth = 1 + 2 * N_SLOTS
    return SlotLayout(tuple(Slot((1 + s, 1 + N_SLOTS + s), depth=first_depth + s // MAX_DEPTH,
                                 after=s % MAX_DEPTH) for s in range(N_SLOTS)))


class OFAMobileNetV3Family(Family):
    name = "ofa-mbv3"
    ofa_class = "OFAMobileNetV3"
    title = "OFA-MobileNetV3"
    widths = (1.0, 1.2)
    published = {1.0: "ofa_mbv3_d234_e346_k357_w1.0", 1.2: "ofa_mbv3_d234_e346_k357_w1.2"}
    shrink_phases = (ShrinkPhase("kernel", "ks", gradual=False), ShrinkPhase("depth", "d"),
                     ShrinkPhase("expand", "e", sorts_channels=True))
    any_width = True  # the plan is width-parametric; 1.0 and 1.2 are the published supernets
    compact_summary = "stages"  # its compact accuracy features predate families: per stage
    open_latency_rows = True  # its measured tables hold smaller networks (depth 1, other kernels)

    def gene_groups(self) -> tuple[GeneGroup, ...]:
        return (GeneGroup("ks", N_SLOTS, KS_CHOICES), GeneGroup("e", N_SLOTS, E_CHOICES),
                GeneGroup("d", N_STAGES, D_CHOICES))

    def active_mask(self, m: np.ndarray) -> np.ndarray:
        d = np.asarray(m)[:, -N_STAGES:]
        slots = slots_used(d)
        return np.concatenate([slots, slots, np.ones_like(d, dtype=bool)], axis=1)

    def networks_per_resolution(self) -> int:
        return SearchSpace().size(per_resolution=True)  # Once-for-All's choices

    def sample_matrix(self, n: int, rng: np.random.Generator, resolutions) -> np.ndarray:
        return SearchSpace(r_choices=tuple(resolutions)).sample_matrix(n, rng).astype(np.int64)

    def arch_from_dict(self, obj: Mapping[str, Any], w: float | None = None):
        if isinstance(obj, Mapping) and isinstance(obj.get("w"), (int, float)):
            w = obj["w"]  # OFA-MobileNetV3 JSON may name its width (`Arch.to_json`)
        return Arch.from_ofa_dict(obj, self.default_width if w is None else w)

    def default_space(self, width_mult: float | None = None):
        return SearchSpace(width_mult=self.check_width(width_mult))

    def space_from_dict(self, obj: Mapping[str, Any]):
        return SearchSpace.from_dict(obj)

    def table_codes(self, df, source: str = "table") -> np.ndarray:
        """Tables of this family may hold any network's values (odd kernels, expands 1..32,
        depths 1..4: `SearchSpace.for_tables`), as they always could."""
        from hwnas.families.ofa_mbv3.tables import archs_from_frame

        archs = archs_from_frame(df, SearchSpace.for_tables(), source=source)
        return SearchSpace.to_matrix(archs).astype(np.int64)

    def build_supernet(self, n_classes: int = 1000, width_mult: float | None = None, dropout: float = 0.0):
        from hwnas.families.ofa_mbv3.network import OFAMobileNetV3

        w = self.default_width if width_mult is None else width_mult
        return OFAMobileNetV3(SearchSpace(width_mult=w), n_classes=n_classes, dropout=dropout)  # OFA's choices

    def supernet_for(self, space, n_classes: int, dropout: float = 0.0):
        from hwnas.families.ofa_mbv3.network import OFAMobileNetV3

        return OFAMobileNetV3(space, n_classes=n_classes, dropout=dropout)  # its space may be narrower

    def static_subnet(self, arch, n_classes: int = 1000):
        import torch

        from hwnas.families.ofa_mbv3.network import MobileNetV3Subnet

        torch.manual_seed(0)  # fixed random weights keep profiling repeatable
        return MobileNetV3Subnet(arch, n_classes=n_classes).eval()

    def count_params_macs(self, m: np.ndarray, width_mult: float, n_classes: int):
        from hwnas.families.ofa_mbv3.costs import count_params_macs

        return count_params_macs(np.asarray(m, dtype=np.int64), float(width_mult), n_classes)

    def memory_trace(self, row, width_mult: float, n_classes: int, precision: str = "fp32"):
        from hwnas.families.ofa_mbv3.memory import memory_trace

        return memory_trace(row, float(width_mult), n_classes, precision)

    def cost_layout_class(self):
        from hwnas.families.ofa_mbv3.parts import MBV3CostLayout

        return MBV3CostLayout

    def slot_layout(self):
        """20 slots (5 stages of up to 4 blocks), each owning its kernel and expand gene; slot j of a
        stage runs while the stage's depth is above j."""
        return _slot_layout()

    def ofa_layout(self, width_mult: float, n_classes: int = 1000) -> dict[str, tuple[int, ...]]:
        return ofa_layout(width_mult, n_classes)
