"""The choices of one family's search space: a subset of each gene group's choices, resolutions
and the supernet's width multiplier. Its dict form is what checkpoints and runs store:
``{<group>: [choices], ..., "r": [...], "width_mult": w}`` (for OFA-MobileNetV3 exactly
`hwnas.space.SearchSpace.to_dict`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from hwnas.errors import ConfigError
from hwnas.families.base import OFA_RESOLUTIONS, Family, GeneGroup

__all__ = ["FamilySpace"]


@dataclass(frozen=True)
class FamilySpace:
    family: Family
    choices: tuple[tuple[Any, ...], ...]  # per gene group, in the family's order
    r_choices: tuple[int, ...]
    width_mult: float

    @classmethod
    def published(cls, family: Family, width_mult: float | None = None) -> "FamilySpace":
        """Once-for-All's space of the family: every choice, r 128..224 step 4."""
        return cls(family, tuple(g.choices for g in family.gene_groups()), OFA_RESOLUTIONS,
                   family.check_width(width_mult))

    def groups(self) -> tuple[GeneGroup, ...]:
        """The family's gene groups restricted to this space's choices."""
        return tuple(GeneGroup(g.name, g.count, c) for g, c in zip(self.family.gene_groups(), self.choices))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {g.name: list(c) for g, c in zip(self.family.gene_groups(), self.choices)}
        out["r"] = list(self.r_choices)
        out["width_mult"] = self.width_mult
        return out

    @classmethod
    def from_dict(cls, family: Family, obj: Mapping[str, Any]) -> "FamilySpace":
        if not isinstance(obj, Mapping):
            raise ConfigError(f"a {family.name} search space must be a mapping")
        names = [g.name for g in family.gene_groups()]
        unknown = set(obj) - set(names) - {"r", "width_mult"}
        if unknown:
            raise ConfigError(f"unknown {family.name} search-space keys {sorted(unknown)}; allowed: "
                              f"{', '.join(names)}, r, width_mult")
        choices = []
        for g in family.gene_groups():
            values = obj.get(g.name, list(g.choices))
            if not isinstance(values, (list, tuple)) or not values:
                raise ConfigError(f"search-space '{g.name}' must be a non-empty list, got {values!r}")
            codes = set()
            for v in values:
                try:
                    codes.add(g.to_codes([v], g.name)[0])
                except Exception:
                    raise ConfigError(f"search-space '{g.name}': {v!r} is not one of "
                                      f"{list(g.choices)}") from None
            choices.append(tuple(g.to_values(sorted(codes))))
        r = obj.get("r", list(OFA_RESOLUTIONS))
        if not isinstance(r, (list, tuple)) or not r or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in r):
            raise ConfigError(f"search-space 'r' must be a list of positive integers, got {r!r}")
        try:
            width = family.check_width(obj.get("width_mult"))
        except Exception as err:
            raise ConfigError(str(err)) from None
        return cls(family, tuple(choices), tuple(sorted(set(r))), width)
