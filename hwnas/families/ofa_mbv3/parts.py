"""OFA-MobileNetV3's additive cost layout (`hwnas.families.parts`), wrapping the per-block costs of
`hwnas.families.ofa_mbv3.blocks` (gathered for every latency model by `hwnas.latency.layout.PartGather`):
the stem (stem conv + the fixed first block, keyed by r), the 20 searchable positions (keyed by r,
their kernel and expand genes; active while the stage's depth reaches them) and the head (final
expand, pool, feature mix, classifier; keyed by r). Torch-free except `entry_module`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hwnas.families.ofa_mbv3.plan import KS_CHOICES, MAX_DEPTH, N_SLOTS, N_STAGES
from hwnas.families.parts import CostLayout, Part

__all__ = ["MBV3CostLayout"]


class MBV3CostLayout(CostLayout):
    n_stages = N_STAGES
    kernels = KS_CHOICES

    def __init__(self, family: Any, width_mult: float, n_classes: int) -> None:
        super().__init__(family, width_mult, n_classes)
        self._parts = ((Part("stem", -1, 0, (0,)),)
                       + tuple(Part("block", s // MAX_DEPTH, s % MAX_DEPTH, (0, 1 + s, 1 + N_SLOTS + s))
                               for s in range(N_SLOTS))
                       + (Part("head", N_STAGES, 0, (0,)),))

    @property
    def parts(self) -> tuple[Part, ...]:
        return self._parts

    def active(self, m: np.ndarray) -> np.ndarray:
        from hwnas.families.ofa_mbv3.plan import slots_used

        m = np.asarray(m)
        ones = np.ones((len(m), 1), dtype=bool)
        return np.concatenate([ones, slots_used(m[:, 41:46]), ones], axis=1)

    def cost(self, p: int, key: tuple[int, ...]) -> np.ndarray:
        from hwnas.families.ofa_mbv3.blocks import block_cost, head_cost, slot_sizes, stem_cost

        r = int(key[0])
        if p == 0:
            return stem_cost(self.width_mult, r)
        if p == N_SLOTS + 1:
            return head_cost(self.width_mult, slot_sizes(r)[2], self.n_classes)
        return block_cost(self.width_mult, p - 1, int(key[1]), int(key[2]), r)

    def kernel(self, p: int, key: tuple[int, ...]) -> int:
        return int(key[1]) if self._parts[p].kind == "block" else 0

    def entry(self, p: int, key: tuple[int, ...]) -> tuple[Any, ...]:
        from hwnas.families.ofa_mbv3.blocks import slot_sizes, slot_specs

        r = int(key[0])
        sizes, _, head = slot_sizes(r)
        specs = slot_specs(self.width_mult)
        if p == 0:
            return ("stem", -1, 0, 3, 3, 0, r)
        if p == N_SLOTS + 1:
            return ("head", N_STAGES, 0, specs[-1].out_channels, 0, 0, head)
        spec = specs[p - 1]
        return ("block", spec.stage, min(spec.index, 1), spec.in_channels, int(key[1]), int(key[2]),
                sizes[p - 1])

    def entry_module(self, entry: Mapping[str, Any]):
        from hwnas.families.ofa_mbv3.blocks import entry_module

        return entry_module(entry, self.width_mult, self.n_classes)
