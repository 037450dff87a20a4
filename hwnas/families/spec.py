"""`NetworkSpec`: which networks a predictor, cost layout or table is about, as one value.

A family's subnets at one width multiplier with an `n_classes`-way classifier: the three always
travel together, and none has a default, so a call cannot forget the family and silently get
MobileNetV3's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["NetworkSpec"]


@dataclass(frozen=True)
class NetworkSpec:
    """A family (registry name), its width multiplier and the classifier's class count. Hashable:
    per-network tables are cached on it."""

    family: str
    width_mult: float
    n_classes: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "family", str(getattr(self.family, "name", self.family)))
        object.__setattr__(self, "width_mult", float(self.width_mult))
        object.__setattr__(self, "n_classes", int(self.n_classes))

    def get_family(self) -> Any:
        """The registered `hwnas.families.base.Family`."""
        from hwnas.families.registry import get_family

        return get_family(self.family)

    def cost_layout(self) -> Any:
        """The family's `hwnas.families.parts.CostLayout` for these networks (cached)."""
        return self.get_family().cost_layout(self.width_mult, self.n_classes)
