"""OFA-MobileNetV3's arch: `Arch` (one subnet config) and its flat-row layout.

An arch has 5 searchable stages of up to 4 blocks = 20 slots; slot ``4*s + j`` is used only when
``j < d[s]``. Slots past a stage's depth do not change the network, so `Arch` normalises them to a
fixed filler (kernel 3, expand 3): two configs that build the same network compare equal and share
one id. Formats that round-trip exactly (for canonical archs):

- OFA's dict ``{"ks": [20], "e": [20], "d": [5], "r": [r]}``,
- JSON (the OFA dict, plus ``"w"`` when the width multiplier is not 1.0),
- one flat table row ``r, ks_0..ks_19, e_0..e_19, d_0..d_4`` (published OFA latency datasets).

It is a `hwnas.families.GeneArch` (``codes`` = ``ks + e + d``) that predates the others: it keeps its
own fields, equality, hash, id and JSON (``"w"``); `hwnas.space` re-exports it under its old name.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from hwnas.errors import InputError
from hwnas.families.base import Family, GeneArch
from hwnas.families.ofa_mbv3.plan import MAX_DEPTH, N_SLOTS, N_STAGES, RUNS

__all__ = ["PAD_KS", "PAD_E", "FLAT_COLUMNS", "ROW_LEN", "as_int", "Arch"]

PAD_KS = 3  # filler of unused slots; any value builds the same network
PAD_E = 3

FLAT_COLUMNS: tuple[str, ...] = (
    ("r",)
    + tuple(f"ks_{i}" for i in range(N_SLOTS))
    + tuple(f"e_{i}" for i in range(N_SLOTS))
    + tuple(f"d_{s}" for s in range(N_STAGES))
)
ROW_LEN = len(FLAT_COLUMNS)  # 46


def as_int(value: Any, what: str) -> int:
    """Accept ints (and integral floats/numpy ints from tables); reject bools, strings, fractions."""
    if isinstance(value, bool):
        raise InputError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    raise InputError(f"{what} must be an integer, got {value!r}")


def _family() -> Family:
    from hwnas.families import get_family

    return get_family("ofa-mbv3")


# Equality, hash and repr are written out (not generated) so they stay what they were before `Arch`
# became a `GeneArch`: over (ks, e, d, r, w) only, a hash without strings (the same in every process).
class FieldIdentity:
    """Equality and hash from `_fields()` alone (a plain tuple: the same hash in every process),
    for the family's arch and space, whose other attributes derive from those fields."""

    def _fields(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Arch(FieldIdentity, GeneArch):
    """One subnet: per-slot kernel sizes `ks` and expand ratios `e`, per-stage depths `d`,
    input resolution `r`, and the supernet's width multiplier `w`.

    Construction validates shapes and normalises unused slots; it does not check the values
    against a particular space (use `SearchSpace.validate`).
    """

    # GeneArch's fields, derived from ks/e/d rather than passed
    family: Family = field(init=False, compare=False, repr=False)
    codes: tuple[int, ...] = field(init=False, repr=False)
    family_name: str = field(init=False, default="ofa-mbv3")
    ks: tuple[int, ...] = ()
    e: tuple[int, ...] = ()
    d: tuple[int, ...] = ()

    def __init__(self, ks: Sequence[Any], e: Sequence[Any], d: Sequence[Any], r: Any, w: float = 1.0) -> None:
        ks = tuple(as_int(v, f"ks[{i}]") for i, v in enumerate(ks))
        e = tuple(as_int(v, f"e[{i}]") for i, v in enumerate(e))
        d = tuple(as_int(v, f"d[{i}]") for i, v in enumerate(d))
        if len(ks) != N_SLOTS or len(e) != N_SLOTS:
            raise InputError(f"an arch needs {N_SLOTS} kernel sizes and {N_SLOTS} expand ratios, "
                             f"got {len(ks)} and {len(e)}")
        if len(d) != N_STAGES:
            raise InputError(f"an arch needs {N_STAGES} stage depths, got {len(d)}")
        for s, depth in enumerate(d):
            if not 1 <= depth <= MAX_DEPTH:
                raise InputError(f"d[{s}]={depth} is outside 1..{MAX_DEPTH}")
        r = as_int(r, "r")
        if r <= 0:
            raise InputError(f"resolution r={r} must be positive")
        w = float(w)
        if not w > 0:
            raise InputError(f"width multiplier w={w} must be positive")
        used = [u for depth in d for u in RUNS[depth]]
        ks = tuple(k if u else PAD_KS for k, u in zip(ks, used))
        e = tuple(x if u else PAD_E for x, u in zip(e, used))
        for name, value in (("ks", ks), ("e", e), ("d", d), ("r", r), ("w", w), ("codes", ks + e + d),
                            ("family", _family()), ("family_name", "ofa-mbv3")):
            object.__setattr__(self, name, value)

    # -- identity -------------------------------------------------------------------------
    def _fields(self) -> tuple:
        return self.ks, self.e, self.d, self.r, self.w

    def __repr__(self) -> str:
        return f"Arch(ks={self.ks!r}, e={self.e!r}, d={self.d!r}, r={self.r!r}, w={self.w!r})"

    def __reduce__(self):  # rebuilt through __init__: the family is the registry's own object
        return type(self), self._fields()

    @classmethod
    def from_codes(cls, family: Family, row: Sequence[Any], w: float) -> "Arch":
        """`GeneArch.from_codes` for this family (its codes are its values): `from_row`."""
        return cls.from_row(list(row), w)

    @property
    def id(self) -> str:
        """Short stable id: a hash of the canonical form (same network <=> same id)."""
        text = json.dumps({"ks": self.ks, "e": self.e, "d": self.d, "r": self.r, "w": self.w},
                          separators=(",", ":"))
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def used(self, slot: int) -> bool:
        return slot % MAX_DEPTH < self.d[slot // MAX_DEPTH]

    def blocks(self) -> list[tuple[int, int, int, int]]:
        """The active blocks in order: (stage, slot, kernel, expand)."""
        return [(s, 4 * s + j, self.ks[4 * s + j], self.e[4 * s + j])
                for s in range(N_STAGES) for j in range(self.d[s])]

    # -- formats --------------------------------------------------------------------------
    def to_ofa_dict(self) -> dict[str, list[int]]:
        return {"ks": list(self.ks), "e": list(self.e), "d": list(self.d), "r": [self.r]}

    @classmethod
    def from_ofa_dict(cls, obj: Mapping[str, Any], w: float | None = None) -> "Arch":
        """An arch from Once-for-All's dict plus ``"r"``. Dicts of the other families (ResNet50's
        ``d, e, w`` lists, ProxylessNAS's 21 ``ks``) give that family's `GeneArch`."""
        if not isinstance(obj, Mapping):
            raise InputError(f"an OFA arch must be a dict with keys ks, e, d, r; got {type(obj).__name__}")
        other = _other_family(obj)
        if other is not None:  # e.g. a ResNet50 dict (d, e, w lists): that family's arch
            from hwnas.families import get_family

            return get_family(other).arch_from_dict(obj, w)  # type: ignore[return-value]
        missing = [k for k in ("ks", "e", "d", "r") if k not in obj]
        if missing:
            raise InputError(f"OFA arch dict is missing {', '.join(missing)}; it needs ks, e, d and r")
        r = obj["r"]
        if isinstance(r, (list, tuple)):
            if len(r) != 1:
                raise InputError(f"OFA arch 'r' must hold one resolution, got {r!r}")
            r = r[0]
        for key in ("ks", "e", "d"):
            if not isinstance(obj[key], (list, tuple)):
                raise InputError(f"OFA arch '{key}' must be a list of integers, got {obj[key]!r}")
        if w is None:
            w = obj.get("w", 1.0)
        return cls(tuple(obj["ks"]), tuple(obj["e"]), tuple(obj["d"]), r, w)

    def to_json(self) -> str:
        obj: dict[str, Any] = self.to_ofa_dict()
        if self.w != 1.0:
            obj["w"] = self.w
        return json.dumps(obj, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Arch":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"arch is not valid JSON: {err}") from None
        return cls.from_ofa_dict(obj)

    def to_row(self) -> tuple[int, ...]:
        """The flat row ``r, ks_0..ks_19, e_0..e_19, d_0..d_4``."""
        return (self.r, *self.ks, *self.e, *self.d)

    @classmethod
    def from_row(cls, row: Sequence[Any], w: float = 1.0) -> "Arch":
        if len(row) != ROW_LEN:
            raise InputError(f"a flat arch row has {ROW_LEN} values (r, ks_0..ks_19, e_0..e_19, "
                             f"d_0..d_4), got {len(row)}")
        return cls(tuple(row[1:21]), tuple(row[21:41]), tuple(row[41:46]), row[0], w)

    def describe(self) -> str:
        """Compact human-readable form, e.g. ``r160 | 7x6 5x4 / 3x3 ... ``"""
        stages = []
        for s in range(N_STAGES):
            stages.append(" ".join(f"{self.ks[4*s+j]}x{self.e[4*s+j]}" for j in range(self.d[s])))
        return f"r{self.r} | " + " / ".join(stages)


def _other_family(obj: Mapping[str, Any]) -> str | None:
    """The family of an arch dict that is not OFA-MobileNetV3's, told by its shape."""
    if isinstance(obj.get("w"), (list, tuple)):
        return "ofa-resnet50"
    if isinstance(obj.get("ks"), (list, tuple)) and len(obj["ks"]) == 21:
        return "ofa-proxyless"
    return None
