"""OFA-MobileNetV3's search space: `SearchSpace` (the choices of each gene group, resolutions and
width) and `check_matrix`, the one check of arch values.

It is a `hwnas.families.space.FamilySpace` (``choices`` = ``(ks, e, d)``) that predates the others:
it keeps its own fields and constructor, samples uniformly over networks, and its `to_matrix` gives
int32 rows; `hwnas.space` re-exports it under its old name.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from hwnas.errors import ConfigError, InputError, TableError, shown
from hwnas.families.base import OFA_RESOLUTIONS, Family
from hwnas.families.ofa_mbv3.arch import FLAT_COLUMNS, PAD_E, PAD_KS, ROW_LEN, Arch, FieldIdentity, as_int
from hwnas.families.ofa_mbv3.plan import D_CHOICES, E_CHOICES, KS_CHOICES, MAX_DEPTH, N_SLOTS, N_STAGES, slots_used
from hwnas.families.space import FamilySpace, parse_range

__all__ = ["SearchSpace", "check_matrix", "MAX_KS", "MAX_E", "MAX_R", "archs_from_frame", "reason_to_column"]


def _choices(values: Iterable[Any], name: str) -> tuple[int, ...]:
    try:
        out = tuple(sorted({as_int(v, name) for v in values}))
    except TypeError:
        raise ConfigError(f"{name} choices must be a list of integers, got {values!r}") from None
    if not out:
        raise ConfigError(f"{name} needs at least one choice")
    if any(v <= 0 for v in out):
        raise ConfigError(f"{name} choices must be positive, got {list(out)}")
    return out


def _family() -> Family:
    from hwnas.families import get_family

    return get_family("ofa-mbv3")


# Constructor, equality, hash and repr are written out (not generated) so they stay what they were
# before `SearchSpace` became a `FamilySpace`: over (ks, e, d, r, width) only.
@dataclass(frozen=True, init=False, eq=False, repr=False)
class SearchSpace(FieldIdentity, FamilySpace):
    """The choices of the OFA-MobileNetV3 space. Defaults are Once-for-All's own."""

    # FamilySpace's fields, derived rather than passed
    family: Family = field(init=False, repr=False, compare=False)
    choices: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    ks_choices: tuple[int, ...] = KS_CHOICES
    e_choices: tuple[int, ...] = E_CHOICES
    d_choices: tuple[int, ...] = D_CHOICES

    def __init__(self, ks_choices: Iterable[Any] = KS_CHOICES, e_choices: Iterable[Any] = E_CHOICES,
                 d_choices: Iterable[Any] = D_CHOICES, r_choices: Iterable[Any] = OFA_RESOLUTIONS,
                 width_mult: float = 1.0) -> None:
        ks, e, d = _choices(ks_choices, "ks"), _choices(e_choices, "e"), _choices(d_choices, "d")
        r, width_mult = _choices(r_choices, "r"), float(width_mult)
        if any(k % 2 == 0 for k in ks):
            raise ConfigError(f"kernel sizes must be odd, got {list(ks)}")
        if max(d) > MAX_DEPTH:
            raise ConfigError(f"depths must be within 1..{MAX_DEPTH}, got {list(d)}")
        if not width_mult > 0:
            raise ConfigError(f"width multiplier must be positive, got {width_mult}")
        for name, value in (("ks_choices", ks), ("e_choices", e), ("d_choices", d), ("r_choices", r),
                            ("width_mult", width_mult), ("choices", (ks, e, d)), ("family", _family())):
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple:
        return self.ks_choices, self.e_choices, self.d_choices, self.r_choices, self.width_mult

    def __repr__(self) -> str:
        ks, e, d, r, w = self._fields()
        return (f"SearchSpace(ks_choices={ks!r}, e_choices={e!r}, d_choices={d!r}, r_choices={r!r}, "
                f"width_mult={w!r})")

    def __reduce__(self):  # rebuilt through __init__: the family is the registry's own object
        return type(self), self._fields()

    @classmethod
    def published(cls, family: Family | None = None, width_mult: float | None = None) -> "SearchSpace":
        """Once-for-All's space (every choice, r 128..224 step 4), as `FamilySpace.published`."""
        return cls(width_mult=_family().check_width(width_mult))

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
                value = parse_range(value)
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
        if not isinstance(arch, Arch):  # e.g. another family's dict given to a run of this one
            other = getattr(arch, "family_name", "") or type(arch).__name__
            return f"it is an {other} arch, not an ofa-mbv3 one (this supernet's family)"
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
        per_block = len(self.ks_choices) * len(self.e_choices)
        return self._draw(n, rng, [float(per_block) ** d for d in self.d_choices])

    def sample_genes_matrix(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """`n` flat rows with every gene uniform over its choices: each stage's depth, then each used
        slot (Once-for-All's ``sample_active_subnet``). Training draws this way: uniform over
        networks puts 98% of the stages at the largest depth, and the shallow subnets at the
        front's fast end would be trained by the sandwich's smallest alone."""
        return self._draw(n, rng, [1.0] * len(self.d_choices))

    def _draw(self, n: int, rng: np.random.Generator | int | None, depth_weights: list[float]) -> np.ndarray:
        rng = self._rng(rng)
        depths = np.array(self.d_choices)
        weights = np.asarray(depth_weights)
        d = rng.choice(depths, size=(n, N_STAGES), p=weights / weights.sum())
        used = slots_used(d)
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

    def archs_from_frame(self, df, source: str = "table") -> list[Arch]:
        """As every space's, with this family's table reader (its rows may hold any network's values
        and its errors name the slot's column)."""
        return archs_from_frame(df, self, source=source)

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
        out[:, :N_SLOTS] = out[:, N_SLOTS:2 * N_SLOTS] = slots_used(m[:, 41:46])
        return out

    @staticmethod
    def canonical(m: np.ndarray) -> np.ndarray:
        """A copy of `m` with the filler in unused slots (same dtype)."""
        m = np.array(m, copy=True)  # rows of valid depths 1..4 (checked where they come in)
        unused = ~slots_used(m[:, 41:46])
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
        return np.fromiter(flat, dtype=np.int32, count=len(archs) * ROW_LEN).reshape(-1, ROW_LEN)

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
        used = slots_used(d)
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
    if m.ndim != 2 or m.shape[1] != ROW_LEN or len(m) == 0:
        return None
    m = m.astype(np.int64, copy=False)
    r, ks, e, d = m[:, 0], m[:, 1:21], m[:, 21:41], m[:, 41:46]
    bad_d = (d < 1) | (d > MAX_DEPTH)
    if space is not None:
        bad_d |= ~np.isin(d, space.d_choices)
    used = slots_used(d)
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
        names = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise TableError(f"{source} lacks the column(s) {names}; it needs r, ks_0..ks_19, "
                         "e_0..e_19, d_0..d_4")
    if w is None:
        w = space.width_mult if space is not None else 1.0
    values = df[list(FLAT_COLUMNS)]
    numeric = values.apply(pd.to_numeric, errors="coerce")
    bad = numeric.isna() | (numeric != numeric.round())
    if bad.to_numpy().any():
        i, j = np.argwhere(bad.to_numpy())[0]
        raise TableError(f"{source} row {i + 1}, column {FLAT_COLUMNS[j]}: "
                         f"{shown(values.iat[i, j])} is not an integer")
    huge = (numeric.abs() > 2**31 - 1).to_numpy()
    if huge.any():  # before the int64 cast, which would wrap (or raise OverflowError) on them
        i, j = np.argwhere(huge)[0]
        raise TableError(f"{source} row {i + 1}, column {FLAT_COLUMNS[j]}: "
                         f"{values.iat[i, j]} is out of range")
    m = numeric.to_numpy(dtype=np.int64)
    found = check_matrix(m, space if space is not None else SearchSpace.for_tables(w))
    if found is not None:
        raise TableError(f"{source} row {found[0] + 1}: {reason_to_column(found[1])}")
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


def reason_to_column(reason: str) -> str:
    """'ks[3]=9 is not ...' -> 'column ks_3: 9 is not ...' so table errors name columns."""
    import re

    m = re.match(r"(ks|e|d)\[(\d+)\]=(\S+) (.*)", reason)
    if m:
        return f"column {m.group(1)}_{m.group(2)}: {m.group(3)} {m.group(4)}"
    m = re.match(r"r=(\S+) (.*)", reason)
    if m:
        return f"column r: {m.group(1)} {m.group(2)}"
    return reason
