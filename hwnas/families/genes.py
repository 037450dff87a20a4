"""A family's genes and its subnets, without the family: `GeneGroup` (a named group of categorical
genes), `GeneArch` (one subnet: resolution, canonical gene codes, width) and the checks every
family's networks share. `GeneArch` holds its `hwnas.families.base.Family`, so nothing here
imports the family base or the registry: spaces and tables build archs from this module alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np

from hwnas.errors import InputError

__all__ = ["GeneGroup", "GeneArch", "ShrinkPhase", "check_n_classes", "check_head_args", "arch_resolution", "IMAGENET_MEAN",
           "IMAGENET_STD", "OFA_RESOLUTIONS"]

class ShrinkPhase(NamedTuple):
    """One phase of progressive shrinking (`hwnas.supernet.train.build_phases`): the gene group it
    makes elastic, and how. `gradual`: open the two largest choices first, then all (when there are
    more than two); `sorts_channels`: sort channels by importance before the phase starts (phases
    that cut channels: expand ratios, widths)."""

    name: str
    group: str
    gradual: bool = True
    sorts_channels: bool = False


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OFA_RESOLUTIONS = tuple(range(128, 225, 4))


@dataclass(frozen=True)
class GeneGroup:
    """`count` genes named ``{name}_0..{name}_{count-1}``, each one of `choices`."""

    name: str
    count: int
    choices: tuple[Any, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f"{self.name}_{i}" for i in range(self.count))

    @property
    def by_index(self) -> bool:
        """True when the int matrix holds choice indices (non-integer choices) instead of values."""
        return not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in self.choices)

    @property
    def filler(self) -> Any:
        """The value inactive genes are normalised to (any value builds the same network)."""
        return self.choices[0]

    def to_codes(self, values: Sequence[Any], what: str = "") -> list[int]:
        """Values -> int-matrix codes, checking each is one of the choices."""
        codes = []
        for i, v in enumerate(values):
            code = _code_of(self, v)
            if code is None:
                raise InputError(f"{what or self.name}[{i}]={v!r} is not one of {list(self.choices)}")
            codes.append(code)
        return codes

    def to_values(self, codes: Sequence[int]) -> list[Any]:
        if self.by_index:
            return [self.choices[int(c)] for c in codes]
        return [int(c) for c in codes]


def _code_of(group: GeneGroup, value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if group.by_index:
        for i, c in enumerate(group.choices):
            if isinstance(value, (int, float, np.integer, np.floating)) and abs(float(value) - c) < 1e-9:
                return i
        return None
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    if isinstance(value, (int, np.integer)) and int(value) in group.choices:
        return int(value)
    return None


def check_n_classes(n_classes: Any) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise InputError(f"n_classes must be a positive integer, got {n_classes!r}")
    return int(n_classes)


def check_head_args(n_classes: Any, dropout: Any) -> None:
    """The classifier arguments every family's networks take."""
    check_n_classes(n_classes)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise InputError(f"dropout must be in [0, 1), got {dropout!r}")


def arch_resolution(r: Any) -> int:
    """An arch dict's "r" (a resolution or a one-element list of it) as a checked int."""
    if isinstance(r, (list, tuple)):
        if len(r) != 1:
            raise InputError(f"arch 'r' must hold one resolution, got {r!r}")
        r = r[0]
    if isinstance(r, (float, np.floating)) and float(r).is_integer():
        r = int(r)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r <= 0:
        raise InputError(f"arch 'r' must be a positive integer resolution, got {r!r}")
    return int(r)


@dataclass(frozen=True)
class GeneArch:
    """One subnet of a `Family`: resolution `r`, canonical gene codes, width multiplier `w`.

    Construct with `Family.arch_from_dict` or `GeneArch.from_codes`."""

    family: Any = field(compare=False, repr=False)  # its `hwnas.families.base.Family`
    codes: tuple[int, ...]
    r: int
    w: float
    family_name: str = ""

    @classmethod
    def from_codes(cls, family: Any, row: Sequence[Any], w: float) -> "GeneArch":
        row = [int(v) for v in row]
        if len(row) != 1 + len(family.gene_columns()):
            raise InputError(f"a {family.name} row has {1 + len(family.gene_columns())} values "
                             f"(r, {', '.join(g.name + '_*' for g in family.gene_groups())}), got {len(row)}")
        if row[0] <= 0:
            raise InputError(f"resolution r={row[0]} must be positive")
        canon = family.check_rows(family.canonical(np.asarray([row])))[0]
        return cls(family, tuple(int(v) for v in canon[1:]), int(canon[0]), float(w), family.name)

    def __hash__(self) -> int:
        return hash((self.family_name, self.codes, self.r, self.w))

    def group(self, name: str) -> list[Any]:
        """The values of one gene group (``arch.group("e") -> [0.25, 0.35, ...]``)."""
        sl = self.family.group_slices()[name]
        g = next(g for g in self.family.gene_groups() if g.name == name)
        return g.to_values(self.codes[sl.start - 1: sl.stop - 1])

    def to_row(self) -> tuple[int, ...]:
        return (self.r, *self.codes)

    def to_ofa_dict(self) -> dict[str, list[Any]]:
        out = {g.name: self.group(g.name) for g in self.family.gene_groups()}
        out["r"] = [self.r]
        return out

    def to_json(self) -> str:
        """Once-for-All's arch dict plus "r" (and "width" when not the family's default)."""
        obj: dict[str, Any] = self.to_ofa_dict()
        if abs(self.w - self.family.default_width) > 1e-9:
            obj["width"] = self.w
        return json.dumps(obj, separators=(",", ":"))

    @property
    def id(self) -> str:
        text = json.dumps({"family": self.family_name, **self.to_ofa_dict(), "width": self.w},
                          separators=(",", ":"))
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def describe(self) -> str:
        parts = [f"{g.name}={self.group(g.name)}" for g in self.family.gene_groups()]
        return f"{self.family_name} r{self.r} | " + " ".join(parts)
