"""OFA-ResNet50: Once-for-All's ``OFAResNets`` with its published choices (``ofa_resnet50``).

Genes, in Once-for-All's arch-dict order: ``d`` (5: the stem's residual conv, then the extra depth
0/1/2 of each of the 4 stages), ``e`` (18: expand ratio 0.2/0.25/0.35 of every block slot) and ``w``
(6: width index into 0.65/0.8/1.0 for the stem's two widths and the 4 stages). The supernet has one
build width (1.0); the width multipliers are genes.

Equivalent configs share one canonical row: e genes of blocks past a stage's depth are set to the
filler, ``d_0`` 1 becomes 0 (Once-for-All drops the stem's residual conv whenever ``d_0`` is not the
maximum 2) and ``w_0`` 1 becomes 0 (0.65 and 0.8 give the stem the same 24 hidden channels).

torch is imported only by `build_supernet` (``network.py``); genes, costs and layout need numpy.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from hwnas.errors import InputError
from hwnas.families.base import Family, GeneArch, GeneGroup, check_n_classes
from hwnas.families.genes import ShrinkPhase
from hwnas.families.ofa_resnet50 import costs, plan

if TYPE_CHECKING:
    from hwnas.families.ofa_resnet50.network import OFAResNet50

__all__ = ["OFAResNet50Family"]

_GROUPS = (GeneGroup("d", 5, plan.D_CHOICES), GeneGroup("e", plan.N_BLOCKS, plan.E_CHOICES),
           GeneGroup("w", 6, tuple(range(len(plan.W_CHOICES)))))
_N_GENES = sum(g.count for g in _GROUPS)
_D, _E, _W = 1, 1 + 5, 1 + 5 + plan.N_BLOCKS  # first flat column of each group

# Canonical code of each code of d_0 and w_0 (the genes whose choices collide):
# d_0: the stem's residual conv runs only at the maximum depth; w_0: same stem hidden width.
_TOP_D = max(plan.D_CHOICES)
_D0_CANON = np.array([c if c == _TOP_D else min(plan.D_CHOICES) for c in plan.D_CHOICES])
_W0_CANON = np.array([plan.STEM_MID.index(c) for c in plan.STEM_MID])


def _depth_weights() -> np.ndarray:
    """P(d) of a stage's extra depth, uniform over networks: d adds d blocks of |e| choices each."""
    weights = np.array([len(plan.E_CHOICES) ** d for d in plan.D_CHOICES], dtype=float)
    return weights / weights.sum()


@functools.lru_cache(maxsize=None)
def _slot_layout():
    from hwnas.families.slots import Slot, SlotLayout

    width = [_W + i for i in range(6)]  # w_0, w_1 (stem), then one width per stage
    slots = [Slot((_D, _W), shared=(width[1],))]
    for i, (s, j) in enumerate(zip(plan.BLOCK_STAGE, plan.BLOCK_POS)):
        shared = (width[s + 1], width[s + 2]) if j == 0 else (width[s + 2],)
        after = j - plan.BASE_DEPTHS[s]
        slots.append(Slot((_E + i,), shared, depth=_D + 1 + s if after >= 0 else None, after=after))
    return SlotLayout(tuple(slots), shared=tuple(width[1:]))


class OFAResNet50Family(Family):
    name = "ofa-resnet50"
    ofa_class = "OFAResNets"
    title = "OFA-ResNet50"
    widths = (1.0,)
    published = {1.0: "ofa_resnet50"}
    shrink_phases = (ShrinkPhase("depth", "d"), ShrinkPhase("expand", "e", sorts_channels=True),
                     ShrinkPhase("width", "w"))

    # -- genes ----------------------------------------------------------------------------
    def gene_groups(self) -> tuple[GeneGroup, ...]:
        return _GROUPS

    def active_mask(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m)
        mask = np.ones((len(m), _N_GENES), dtype=bool)
        stage, pos = np.asarray(plan.BLOCK_STAGE), np.asarray(plan.BLOCK_POS)
        depth = np.asarray(plan.BASE_DEPTHS)[stage][None, :] + m[:, _D + 1 + stage]
        mask[:, _E - 1:_W - 1] = pos[None, :] < depth
        return mask

    def canonical(self, m: np.ndarray) -> np.ndarray:
        """The base's canonical form, plus d_0 1 -> 0 and w_0 1 -> 0 (same networks). Codes out of
        range are kept, for validation to report."""
        m = super().canonical(m)
        for col, canon in ((_D, _D0_CANON), (_W, _W0_CANON)):
            ok = (m[:, col] >= 0) & (m[:, col] < len(canon))
            m[ok, col] = canon[m[ok, col]]
        return m

    def sample_matrix(self, n: int, rng: np.random.Generator, resolutions: Sequence[int]) -> np.ndarray:
        """`n` canonical rows uniform over distinct networks (at a uniform resolution): d_0 and w_0
        uniform over their distinct networks, a stage's extra depth d with weight 3^d, then every
        other gene uniform."""
        n_choices = len(plan.E_CHOICES)
        cols = [rng.choice(np.asarray(resolutions), size=n),
                rng.choice(np.unique(_D0_CANON), size=n)]
        cols += [rng.choice(np.asarray(plan.D_CHOICES), size=n, p=_depth_weights()) for _ in range(4)]
        cols += list(rng.integers(0, n_choices, size=(plan.N_BLOCKS, n)))
        cols.append(rng.choice(np.unique(_W0_CANON), size=n))
        cols += list(rng.integers(0, len(plan.W_CHOICES), size=(5, n)))
        return self.canonical(np.stack(cols, axis=1))

    def networks_per_resolution(self) -> int:
        """d_0 skips the stem's residual block or not (2), w_0 0.65/0.8 build the same stem (2),
        w_1..w_5 (3 each), and a stage of base depth b runs b + d blocks of |e| choices each."""
        per_stage = [sum(len(plan.E_CHOICES) ** (b + d) for d in plan.D_CHOICES) for b in plan.BASE_DEPTHS]
        return 2 * 2 * len(plan.W_CHOICES) ** 5 * int(np.prod(per_stage, dtype=object))

    # -- archs ----------------------------------------------------------------------------
    def arch_spec(self, arch: GeneArch) -> plan.SubnetSpec:
        """The layers of a (checked) arch: widths of the stem, every active block and the head."""
        codes = arch.codes
        return plan.subnet_spec(codes[_D - 1:_E - 1], codes[_E - 1:_W - 1], codes[_W - 1:])

    # -- networks -------------------------------------------------------------------------
    def build_supernet(self, n_classes: int = 1000, width_mult: float | None = None,
                       dropout: float = 0.0) -> "OFAResNet50":
        self.check_width(width_mult)
        from hwnas.families.ofa_resnet50.network import OFAResNet50

        return OFAResNet50(n_classes=n_classes, dropout=dropout, family=self)

    def static_subnet(self, arch, n_classes: int = 1000):
        import torch

        from hwnas.families.ofa_resnet50.network import ResNet50Subnet

        torch.manual_seed(0)  # fixed random weights keep profiling repeatable
        return ResNet50Subnet(arch, n_classes=n_classes).eval()

    def count_params_macs(self, m: np.ndarray, width_mult: float, n_classes: int
                          ) -> tuple[np.ndarray, np.ndarray]:
        self.check_width(width_mult)
        check_n_classes(n_classes)
        m = np.asarray(m, dtype=np.int64)
        self.check_rows(m)
        return costs.count_params_macs(m, int(n_classes))

    def memory_trace(self, row, width_mult: float, n_classes: int, precision: str = "fp32"):
        from hwnas.families.ofa_resnet50.memory import memory_trace, row_spec

        spec, r = row_spec(self, row, width_mult)
        return memory_trace(spec, r, n_classes, precision)

    def cost_layout_class(self):
        from hwnas.families.ofa_resnet50.parts import ResNet50CostLayout

        return ResNet50CostLayout

    def slot_layout(self):
        """The stem owns d_0 and w_0 (and reads w_1); bottleneck i owns e_i and reads its stage's
        width (a stage's first block also the width before it) and runs while its stage's extra
        depth d_{s+1} reaches it. The widths w_1..w_5, read by several parts, are shared."""
        return _slot_layout()

    # -- Once-for-All checkpoints ---------------------------------------------------------
    def ofa_layout(self, width_mult: float, n_classes: int = 1000) -> dict[str, tuple[int, ...]]:
        self.check_width(width_mult)
        check_n_classes(n_classes)
        return plan.ofa_layout(int(n_classes))
