"""The OFA-MobileNetV3 search space: `Arch` (one subnet config) and `SearchSpace` (the choices).

An arch has 5 searchable stages of up to 4 blocks = 20 slots; slot ``4*s + j`` is used only when
``j < d[s]``. Slots past a stage's depth do not change the network, so `Arch` normalises them to a
fixed filler (kernel 3, expand 3): two configs that build the same network compare equal and share
one id. Formats that round-trip exactly (for canonical archs):

- OFA's dict ``{"ks": [20], "e": [20], "d": [5], "r": [r]}``,
- JSON (the OFA dict, plus ``"w"`` when the width multiplier is not 1.0),
- one flat table row ``r, ks_0..ks_19, e_0..e_19, d_0..d_4`` (published OFA latency datasets).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from hwnas.errors import ConfigError, InputError, TableError

__all__ = [
    "N_STAGES",
    "MAX_DEPTH",
    "N_SLOTS",
    "FLAT_COLUMNS",
    "Arch",
    "SearchSpace",
    "archs_to_frame",
    "archs_from_frame",
    "check_matrix",
    "read_arch_table",
    "read_table_frame",
    "write_arch_table",
]

N_STAGES = 5
MAX_DEPTH = 4
N_SLOTS = N_STAGES * MAX_DEPTH
PAD_KS = 3  # filler of unused slots; any value builds the same network
PAD_E = 3

FLAT_COLUMNS: tuple[str, ...] = (
    ("r",)
    + tuple(f"ks_{i}" for i in range(N_SLOTS))
    + tuple(f"e_{i}" for i in range(N_SLOTS))
    + tuple(f"d_{s}" for s in range(N_STAGES))
)
_ROW_LEN = len(FLAT_COLUMNS)  # 46

# Boolean mask [depth 0..4, slot j 0..3] -> is slot j used at that depth; handy for vectorising.
_USED = np.array([[j < d for j in range(MAX_DEPTH)] for d in range(MAX_DEPTH + 1)])


def _as_int(value: Any, what: str) -> int:
    """Accept ints (and integral floats/numpy ints from tables); reject bools, strings, fractions."""
    if isinstance(value, bool):
        raise InputError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    raise InputError(f"{what} must be an integer, got {value!r}")


@dataclass(frozen=True)
class Arch:
    """One subnet: per-slot kernel sizes `ks` and expand ratios `e`, per-stage depths `d`,
    input resolution `r`, and the supernet's width multiplier `w`.

    Construction validates shapes and normalises unused slots; it does not check the values
    against a particular space (use `SearchSpace.validate`).
    """

    ks: tuple[int, ...]
    e: tuple[int, ...]
    d: tuple[int, ...]
    r: int
    w: float = 1.0
    _key: tuple = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        ks = tuple(_as_int(v, f"ks[{i}]") for i, v in enumerate(self.ks))
        e = tuple(_as_int(v, f"e[{i}]") for i, v in enumerate(self.e))
        d = tuple(_as_int(v, f"d[{i}]") for i, v in enumerate(self.d))
        if len(ks) != N_SLOTS or len(e) != N_SLOTS:
            raise InputError(f"an arch needs {N_SLOTS} kernel sizes and {N_SLOTS} expand ratios, "
                             f"got {len(ks)} and {len(e)}")
        if len(d) != N_STAGES:
            raise InputError(f"an arch needs {N_STAGES} stage depths, got {len(d)}")
        for s, depth in enumerate(d):
            if not 1 <= depth <= MAX_DEPTH:
                raise InputError(f"d[{s}]={depth} is outside 1..{MAX_DEPTH}")
        r = _as_int(self.r, "r")
        if r <= 0:
            raise InputError(f"resolution r={r} must be positive")
        w = float(self.w)
        if not w > 0:
            raise InputError(f"width multiplier w={w} must be positive")
        used = [j < d[i // MAX_DEPTH] for i, j in zip(range(N_SLOTS), itertools.cycle(range(MAX_DEPTH)))]
        ks = tuple(k if u else PAD_KS for k, u in zip(ks, used))
        e = tuple(x if u else PAD_E for x, u in zip(e, used))
        object.__setattr__(self, "ks", ks)
        object.__setattr__(self, "e", e)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "r", r)
        object.__setattr__(self, "w", w)
        object.__setattr__(self, "_key", (ks, e, d, r, w))

    # -- identity -------------------------------------------------------------------------
    @property
    def family(self):
        """Its `hwnas.families.Family` (OFA-MobileNetV3), as `GeneArch.family` for other families."""
        from hwnas.families import get_family

        return get_family("ofa-mbv3")

    family_name = "ofa-mbv3"

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
        if len(row) != _ROW_LEN:
            raise InputError(f"a flat arch row has {_ROW_LEN} values (r, ks_0..ks_19, e_0..e_19, "
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


def _choices(values: Iterable[Any], name: str) -> tuple[int, ...]:
    try:
        out = tuple(sorted({_as_int(v, name) for v in values}))
    except TypeError:
        raise ConfigError(f"{name} choices must be a list of integers, got {values!r}") from None
    if not out:
        raise ConfigError(f"{name} needs at least one choice")
    if any(v <= 0 for v in out):
        raise ConfigError(f"{name} choices must be positive, got {list(out)}")
    return out


@dataclass(frozen=True)
class SearchSpace:
    """The choices of the OFA-MobileNetV3 space. Defaults are Once-for-All's own."""

    ks_choices: tuple[int, ...] = (3, 5, 7)
    e_choices: tuple[int, ...] = (3, 4, 6)
    d_choices: tuple[int, ...] = (2, 3, 4)
    r_choices: tuple[int, ...] = tuple(range(128, 225, 4))
    width_mult: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "ks_choices", _choices(self.ks_choices, "ks"))
        object.__setattr__(self, "e_choices", _choices(self.e_choices, "e"))
        object.__setattr__(self, "d_choices", _choices(self.d_choices, "d"))
        object.__setattr__(self, "r_choices", _choices(self.r_choices, "r"))
        object.__setattr__(self, "width_mult", float(self.width_mult))
        if any(k % 2 == 0 for k in self.ks_choices):
            raise ConfigError(f"kernel sizes must be odd, got {list(self.ks_choices)}")
        if max(self.d_choices) > MAX_DEPTH:
            raise ConfigError(f"depths must be within 1..{MAX_DEPTH}, got {list(self.d_choices)}")
        if not self.width_mult > 0:
            raise ConfigError(f"width multiplier must be positive, got {self.width_mult}")

    # -- construction / persistence -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"ks": list(self.ks_choices), "e": list(self.e_choices), "d": list(self.d_choices),
                "r": list(self.r_choices), "width_mult": self.width_mult}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> "SearchSpace":
        if not isinstance(obj, Mapping):
            raise ConfigError("a search space must be a mapping with keys ks, e, d, r, width_mult")
        unknown = set(obj) - {"ks", "e", "d", "r", "width_mult"}
        if unknown:
            raise ConfigError(f"unknown search-space keys {sorted(unknown)}; "
                              "allowed: ks, e, d, r, width_mult")
        default = cls()
        lists = {}
        for key, fallback in (("ks", default.ks_choices), ("e", default.e_choices),
                              ("d", default.d_choices), ("r", default.r_choices)):
            value = obj.get(key, fallback)
            if key == "r" and isinstance(value, str):  # "32:64:4" = range 32..64 step 4, inclusive
                value = _parse_range(value)
            if isinstance(value, int) and not isinstance(value, bool):
                value = [value]
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"search-space '{key}' must be a list of integers, got {value!r}")
            lists[key] = tuple(value)
        width = obj.get("width_mult", default.width_mult)
        if not isinstance(width, (int, float)) or isinstance(width, bool):
            raise ConfigError(f"search-space 'width_mult' must be a number, got {width!r}")
        return cls(lists["ks"], lists["e"], lists["d"], lists["r"], width)

    @classmethod
    def from_file(cls, path: str | Path) -> "SearchSpace":
        from hwnas.fileio import parse_yaml

        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"search-space file {path} does not exist") from None
        return cls.from_dict(parse_yaml(text, f"search-space file {path}") or {})

    # -- size -----------------------------------------------------------------------------
    def stage_count(self) -> int:
        """Distinct blocks configurations of one stage: sum over depths of (|ks|*|e|)^d."""
        per_block = len(self.ks_choices) * len(self.e_choices)
        return sum(per_block**d for d in self.d_choices)

    def size(self, per_resolution: bool = False) -> int:
        """Exact number of distinct networks (7371^5 per resolution for the default lists)."""
        n = self.stage_count() ** N_STAGES
        return n if per_resolution else n * len(self.r_choices)

    # -- validation -----------------------------------------------------------------------
    def check(self, arch: Arch) -> str | None:
        """Why `arch` is not in this space, or None when it is."""
        found = check_matrix(self.to_matrix([arch]), self)
        if found is not None:
            return found[1]
        if arch.w != self.width_mult:
            return f"width multiplier {arch.w} differs from the space's {self.width_mult}"
        return None

    @classmethod
    def for_tables(cls, width_mult: float = 1.0) -> SearchSpace:
        """The space arch rows are checked against when no run or space is given (tables for
        `hwnas latency fit/predict`, `hwnas supernet stats`): Once-for-All's kernel sizes and
        expand ratios, depths 1..4 and resolutions 16..512."""
        return cls(ks_choices=(3, 5, 7), e_choices=(3, 4, 6), d_choices=(1, 2, 3, 4),
                   r_choices=tuple(range(16, 513)), width_mult=width_mult)

    def validate(self, arch: Arch) -> Arch:
        reason = self.check(arch)
        if reason:
            raise InputError(f"arch {arch.id} is outside the search space: {reason}")
        return arch

    def __contains__(self, arch: object) -> bool:
        return isinstance(arch, Arch) and self.check(arch) is None

    # -- special members ------------------------------------------------------------------
    def _make(self, k: int, e: int, d: int, r: int) -> Arch:
        return Arch((k,) * N_SLOTS, (e,) * N_SLOTS, (d,) * N_STAGES, r, self.width_mult)

    def min_arch(self, r: int | None = None) -> Arch:
        return self._make(min(self.ks_choices), min(self.e_choices), min(self.d_choices),
                          min(self.r_choices) if r is None else r)

    def max_arch(self, r: int | None = None) -> Arch:
        return self._make(max(self.ks_choices), max(self.e_choices), max(self.d_choices),
                          max(self.r_choices) if r is None else r)

    # -- sampling -------------------------------------------------------------------------
    def _rng(self, rng: np.random.Generator | int | None) -> np.random.Generator:
        return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def sample_matrix(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """`n` flat rows (int32 [n, 46]) drawn uniformly over distinct networks.

        Uniform over networks, not per slot: a stage of depth d has (|ks|*|e|)^d configurations, so
        depth d is drawn with that weight; then each used slot is uniform. Unused slots get filler.
        """
        rng = self._rng(rng)
        per_block = len(self.ks_choices) * len(self.e_choices)
        depths = np.array(self.d_choices)
        weights = np.array([float(per_block) ** d for d in self.d_choices])
        d = rng.choice(depths, size=(n, N_STAGES), p=weights / weights.sum())
        used = _USED[d].reshape(n, N_SLOTS)
        ks = np.where(used, rng.choice(np.array(self.ks_choices), size=(n, N_SLOTS)), PAD_KS)
        e = np.where(used, rng.choice(np.array(self.e_choices), size=(n, N_SLOTS)), PAD_E)
        r = rng.choice(np.array(self.r_choices), size=(n, 1))
        return np.concatenate([r, ks, e, d], axis=1).astype(np.int32)

    def sample(self, n: int | None = None, rng: np.random.Generator | int | None = None
               ) -> Arch | list[Arch]:
        """One arch (n=None) or a list of n archs, uniform over distinct networks."""
        rows = self.sample_matrix(1 if n is None else n, rng)
        archs = self.from_matrix(rows)
        return archs[0] if n is None else archs

    def from_matrix(self, rows: np.ndarray) -> list[Arch]:
        return [Arch.from_row(row.tolist(), self.width_mult) for row in np.asarray(rows)]

    def mutate(self, arch: Arch, rng: np.random.Generator | int | None = None,
               prob: float = 0.1) -> Arch:
        """Resample each depth, each used slot's kernel and expand, and the resolution with
        probability `prob` (Once-for-All's mutation). Newly used slots get random values."""
        rng = self._rng(rng)
        d = [int(rng.choice(self.d_choices)) if rng.random() < prob else v for v in arch.d]
        ks, e = list(arch.ks), list(arch.e)
        for i in range(N_SLOTS):
            newly_used = i % MAX_DEPTH >= arch.d[i // MAX_DEPTH]
            if newly_used or rng.random() < prob:
                ks[i] = int(rng.choice(self.ks_choices))
            if newly_used or rng.random() < prob:
                e[i] = int(rng.choice(self.e_choices))
        r = int(rng.choice(self.r_choices)) if rng.random() < prob else arch.r
        return Arch(tuple(ks), tuple(e), tuple(d), r, self.width_mult)

    def crossover(self, a: Arch, b: Arch, rng: np.random.Generator | int | None = None) -> Arch:
        """Uniform crossover gene by gene; a slot takes its value from a parent that uses it."""
        rng = self._rng(rng)
        d = tuple(x if rng.random() < 0.5 else y for x, y in zip(a.d, b.d))
        ks, e = [], []
        for i in range(N_SLOTS):
            parents = [p for p in (a, b) if p.used(i)]
            if not parents:  # slot unused by both parents but used by the child
                ks.append(int(rng.choice(self.ks_choices)))
                e.append(int(rng.choice(self.e_choices)))
                continue
            pk = parents[int(rng.integers(len(parents)))]
            pe = parents[int(rng.integers(len(parents)))]
            ks.append(pk.ks[i])
            e.append(pe.e[i])
        r = a.r if rng.random() < 0.5 else b.r
        return Arch(tuple(ks), tuple(e), d, r, self.width_mult)

    # -- the matrix interface every stage uses (shared with `hwnas.families.space.FamilySpace`)
    @property
    def family(self):
        from hwnas.families import get_family

        return get_family("ofa-mbv3")

    @property
    def flat_columns(self) -> tuple[str, ...]:
        return FLAT_COLUMNS

    def column_choices(self) -> tuple[tuple[int, ...], ...]:
        """The values each flat column may hold: r's choices, then every gene's."""
        return ((self.r_choices,) + (self.ks_choices,) * N_SLOTS + (self.e_choices,) * N_SLOTS
                + (self.d_choices,) * N_STAGES)

    @staticmethod
    def active_mask(m: np.ndarray) -> np.ndarray:
        """bool [n, 45] (the gene columns): True where the gene changes the network."""
        m = np.asarray(m)
        out = np.ones((len(m), 2 * N_SLOTS + N_STAGES), dtype=bool)
        out[:, :N_SLOTS] = out[:, N_SLOTS:2 * N_SLOTS] = _USED[m[:, 41:46]].reshape(len(m), N_SLOTS)
        return out

    @staticmethod
    def canonical(m: np.ndarray) -> np.ndarray:
        """A copy of `m` with the filler in unused slots (same dtype)."""
        m = np.array(m, copy=True)  # rows of valid depths 1..4 (checked where they come in)
        unused = ~_USED[m[:, 41:46]].reshape(len(m), N_SLOTS)
        m[:, 1:21][unused] = PAD_KS
        m[:, 21:41][unused] = PAD_E
        return m

    def check_matrix(self, m: np.ndarray) -> tuple[int, str] | None:
        """The first row of `m` outside this space as (row, reason), or None (`check_matrix`)."""
        return check_matrix(m, self)

    # -- encoding -------------------------------------------------------------------------
    @staticmethod
    def to_matrix(archs: Sequence[Arch] | np.ndarray) -> np.ndarray:
        """Flat rows as an int32 [n, 46] matrix (accepts such a matrix unchanged)."""
        if isinstance(archs, np.ndarray):
            return archs.astype(np.int32, copy=False)
        flat = itertools.chain.from_iterable(a.to_row() for a in archs)
        return np.fromiter(flat, dtype=np.int32, count=len(archs) * _ROW_LEN).reshape(-1, _ROW_LEN)

    def encoding_names(self, kind: str = "onehot") -> list[str]:
        if kind == "ordinal":
            return [f"ks_{i}" for i in range(N_SLOTS)] + [f"e_{i}" for i in range(N_SLOTS)] + \
                   [f"d_{s}" for s in range(N_STAGES)] + ["r"]
        if kind == "onehot":
            names = []
            for i in range(N_SLOTS):
                names += [f"ks_{i}={k}" for k in self.ks_choices] + [f"e_{i}={v}" for v in self.e_choices]
            names += [f"d_{s}={v}" for s in range(N_STAGES) for v in self.d_choices]
            return names + [f"r={v}" for v in self.r_choices]
        raise InputError(f"unknown encoding {kind!r}; use 'onehot' or 'ordinal'")

    def encode(self, archs: Sequence[Arch] | np.ndarray, kind: str = "onehot") -> np.ndarray:
        """Vectorised float32 features of many archs.

        onehot (Once-for-All's accuracy-predictor style): per slot, one-hot kernel and expand
        (all zero when the slot is unused), one-hot depth per stage, one-hot resolution.
        ordinal: kernel and expand per slot (0 when unused), depth per stage, resolution.
        """
        m = self.to_matrix(archs)
        n = m.shape[0]
        r, ks, e, d = m[:, 0], m[:, 1:21], m[:, 21:41], m[:, 41:46]
        used = _USED[np.clip(d, 0, MAX_DEPTH)].reshape(n, N_SLOTS)
        if kind == "ordinal":
            return np.concatenate([ks * used, e * used, d, r[:, None]], axis=1).astype(np.float32)
        if kind != "onehot":
            raise InputError(f"unknown encoding {kind!r}; use 'onehot' or 'ordinal'")
        ksc, ec = np.array(self.ks_choices), np.array(self.e_choices)
        k_oh = (ks[:, :, None] == ksc) & used[:, :, None]  # [n, 20, |ks|]
        e_oh = (e[:, :, None] == ec) & used[:, :, None]  # [n, 20, |e|]
        slots = np.concatenate([k_oh, e_oh], axis=2).reshape(n, -1)
        d_oh = (d[:, :, None] == np.array(self.d_choices)).reshape(n, -1)
        r_oh = r[:, None] == np.array(self.r_choices)
        return np.concatenate([slots, d_oh, r_oh], axis=1).astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {**self.to_dict(), "size": self.size(), "size_per_resolution": self.size(True),
                "log10_size": math.log10(self.size())}


def _parse_range(text: str) -> list[int]:
    try:
        parts = [int(p) for p in text.split(":")]
        lo, hi, step = (parts + [4])[:3] if len(parts) in (2, 3) else (None, None, None)
        if lo is None or step <= 0 or hi < lo:
            raise ValueError
    except ValueError:
        raise ConfigError(f"resolution range {text!r} must look like LOW:HIGH[:STEP], e.g. 32:64:4") from None
    return list(range(lo, hi + 1, step))


def _fmt_choices(values: Sequence[int]) -> str:
    if len(values) > 6:
        steps = {b - a for a, b in zip(values, values[1:])}
        if len(steps) == 1:  # a range: say so
            step = steps.pop()
            return f"{values[0]}..{values[-1]}" + (f" (step {step})" if step != 1 else "")
        return f"[{values[0]}, {values[1]}, ..., {values[-1]}]"
    return str(list(values))


# -- the one check of arch values ----------------------------------------------------------
#: bounds every network has, whatever its space (they also keep counts far from int64 overflow)
MAX_KS, MAX_E, MAX_R = 31, 32, 4096


def check_matrix(m: np.ndarray, space: SearchSpace | None = None) -> tuple[int, str] | None:
    """The first flat row of `m` ([n, 46] ints, `FLAT_COLUMNS`) that is not a valid arch, as
    (row index, reason like "ks[3]=9 is not one of [3, 5, 7]"), or None when all are valid.

    The one check of arch values behind `SearchSpace.check`/`validate`, table reading
    (`read_arch_table`, `archs_from_frame`: every CLI table) and `stats_frame`. With `space`,
    depths, used slots and resolutions must be among its choices; without, only what any
    network needs (depth 1..4, odd kernel 1..31, expand 1..32, resolution 1..4096). Within a
    row, depths come first, then slots in order (ks before e), then r."""
    m = np.asarray(m)
    if m.ndim != 2 or m.shape[1] != _ROW_LEN or len(m) == 0:
        return None
    m = m.astype(np.int64, copy=False)
    r, ks, e, d = m[:, 0], m[:, 1:21], m[:, 21:41], m[:, 41:46]
    bad_d = (d < 1) | (d > MAX_DEPTH)
    if space is not None:
        bad_d |= ~np.isin(d, space.d_choices)
    used = np.repeat(np.clip(d, 0, MAX_DEPTH), MAX_DEPTH, axis=1) > np.tile(np.arange(MAX_DEPTH),
                                                                           N_STAGES)
    if space is not None:
        bad_ks, bad_e = ~np.isin(ks, space.ks_choices), ~np.isin(e, space.e_choices)
        bad_r = ~np.isin(r, space.r_choices)
    else:
        bad_ks, bad_e = (ks < 1) | (ks > MAX_KS) | (ks % 2 == 0), (e < 1) | (e > MAX_E)
        bad_r = (r < 1) | (r > MAX_R)
    bad_ks &= used
    bad_e &= used
    # columns in reporting order: d_0..d_4, ks_0, e_0, ks_1, e_1, ..., r
    slots = np.stack([bad_ks, bad_e], axis=2).reshape(len(m), -1)
    bad = np.concatenate([bad_d, slots, bad_r[:, None]], axis=1)
    rows = np.flatnonzero(bad.any(axis=1))
    if len(rows) == 0:
        return None
    i = int(rows[0])
    j = int(np.argmax(bad[i]))
    if j < N_STAGES:
        allowed = list(space.d_choices) if space is not None else f"1..{MAX_DEPTH}"
        return i, f"d[{j}]={d[i, j]} is not one of {allowed}"
    if j < N_STAGES + 2 * N_SLOTS:
        slot, which = divmod(j - N_STAGES, 2)
        if which == 0:
            allowed = list(space.ks_choices) if space is not None else f"the odd sizes 1..{MAX_KS}"
            return i, f"ks[{slot}]={ks[i, slot]} is not one of {allowed}"
        allowed = list(space.e_choices) if space is not None else f"1..{MAX_E}"
        return i, f"e[{slot}]={e[i, slot]} is not one of {allowed}"
    if space is not None:
        return i, f"r={r[i]} is not one of the space's resolutions {_fmt_choices(space.r_choices)}"
    return i, f"r={r[i]} is not one of 1..{MAX_R}"


# -- tables ---------------------------------------------------------------------------------
def archs_to_frame(archs: Sequence[Arch]):
    """A pandas DataFrame with the flat columns, one row per arch."""
    import pandas as pd

    return pd.DataFrame(SearchSpace.to_matrix(archs), columns=list(FLAT_COLUMNS))


def archs_from_frame(df, space: SearchSpace | None = None, w: float | None = None,
                     source: str = "table") -> list[Arch]:
    """Parse the flat columns of `df` into archs. Extra columns are ignored.

    Errors name the row (1-based, as in the data rows of the file) and the column.
    Used slots, depths and resolution must be among the choices of `space`, or without one of
    `SearchSpace.for_tables(w)` (the check is `check_matrix`).
    """
    import pandas as pd

    missing = [c for c in FLAT_COLUMNS if c not in df.columns]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise TableError(f"{source} lacks the column(s) {shown}; it needs r, ks_0..ks_19, "
                         "e_0..e_19, d_0..d_4")
    if w is None:
        w = space.width_mult if space is not None else 1.0
    values = df[list(FLAT_COLUMNS)]
    numeric = values.apply(pd.to_numeric, errors="coerce")
    bad = numeric.isna() | (numeric != numeric.round())
    if bad.to_numpy().any():
        i, j = np.argwhere(bad.to_numpy())[0]
        raise TableError(f"{source} row {i + 1}, column {FLAT_COLUMNS[j]}: "
                         f"{values.iat[i, j]!r} is not an integer")
    huge = (numeric.abs() > 2**31 - 1).to_numpy()
    if huge.any():  # before the int64 cast, which would wrap (or raise OverflowError) on them
        i, j = np.argwhere(huge)[0]
        raise TableError(f"{source} row {i + 1}, column {FLAT_COLUMNS[j]}: "
                         f"{values.iat[i, j]} is out of range")
    m = numeric.to_numpy(dtype=np.int64)
    found = check_matrix(m, space if space is not None else SearchSpace.for_tables(w))
    if found is not None:
        raise TableError(f"{source} row {found[0] + 1}: {_reason_to_column(found[1])}")
    if space is not None and len(m) and float(w) != space.width_mult:
        raise TableError(f"{source}: width multiplier {float(w)} differs from the space's "
                         f"{space.width_mult}")
    archs = []
    for i, row in enumerate(m):
        try:
            archs.append(Arch.from_row(row.tolist(), w))
        except InputError as err:
            raise TableError(f"{source} row {i + 1}: {err.message}") from None
    return archs


def _reason_to_column(reason: str) -> str:
    """'ks[3]=9 is not ...' -> 'column ks_3: 9 is not ...' so table errors name columns."""
    import re

    m = re.match(r"(ks|e|d)\[(\d+)\]=(\S+) (.*)", reason)
    if m:
        return f"column {m.group(1)}_{m.group(2)}: {m.group(3)} {m.group(4)}"
    m = re.match(r"r=(\S+) (.*)", reason)
    if m:
        return f"column r: {m.group(1)} {m.group(2)}"
    return reason


def read_arch_table(path: str | Path, space: SearchSpace | None = None, w: float | None = None):
    """Read a CSV (or Parquet) of flat rows -> (archs, DataFrame with all the file's columns)."""
    df = read_table_frame(path)
    return archs_from_frame(df, space, w, source=str(path)), df


def read_table_frame(path: str | Path):
    """A CSV (or Parquet) file as a DataFrame with stripped column names; one-line TableErrors."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise TableError(f"table {path} does not exist")
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TableError(f"table {path} cannot be read as CSV: {first}") from None
    df.columns = [str(c).strip() for c in df.columns]
    repeated = _repeated_columns(list(df.columns) if path.suffix == ".parquet" else _csv_header(path))
    if repeated:  # which of two `r` columns is meant cannot be guessed
        raise TableError(f"table {path} has more than one column named {', '.join(repeated)}; "
                         "keep one of each")
    return df


def _csv_header(path: Path) -> list[str]:
    """A CSV's column names as written: pandas renames a repeated one ("r", "r.1"), hiding it."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return [c.strip() for c in next(csv.reader(f, skipinitialspace=True), [])]
    except (csv.Error, UnicodeDecodeError):  # pandas read it; nothing more to learn here
        return []


def _repeated_columns(names: Sequence[str]) -> list[str]:
    """Names given to more than one column (unnamed ones, e.g. from trailing commas, aside)."""
    from collections import Counter

    return sorted(name for name, n in Counter(names).items() if n > 1 and name)


def write_arch_table(path: str | Path, archs: Sequence[Arch], extra=None) -> None:
    """Write archs as flat rows (plus optional extra columns, a dict or DataFrame), atomically."""
    from hwnas.fileio import atomic_path

    df = archs_to_frame(archs)
    if extra is not None:
        for k, v in dict(extra).items():
            df[k] = list(v)
    with atomic_path(path, suffix=Path(path).suffix) as tmp:
        if Path(path).suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
