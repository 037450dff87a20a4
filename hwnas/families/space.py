"""The choices of one family's search space: a subset of each gene group's choices, resolutions
and the supernet's width multiplier. Its dict form is what checkpoints and runs store:
``{<group>: [choices], ..., "r": [...], "width_mult": w}``. OFA-MobileNetV3's space is the subclass
`hwnas.families.ofa_mbv3.space.SearchSpace` (its own fields, the same dict form)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from hwnas.errors import ConfigError, TableError
from hwnas.families.genes import OFA_RESOLUTIONS, GeneArch, GeneGroup

__all__ = ["FamilySpace", "space_info", "parse_range"]


def parse_range(text: str) -> list[int]:
    """Resolutions written as "LOW:HIGH[:STEP]" (inclusive, step 4 by default), as every space reads them."""
    try:
        parts = [int(p) for p in text.split(":")]
        lo, hi, step = (parts + [4])[:3] if len(parts) in (2, 3) else (None, None, None)
        if lo is None or step <= 0 or hi < lo:
            raise ValueError
    except ValueError:
        raise ConfigError(f"resolution range {text!r} must look like LOW:HIGH[:STEP], e.g. 32:64:4") from None
    return list(range(lo, hi + 1, step))


@dataclass(frozen=True)
class FamilySpace:
    family: Any  # its `hwnas.families.base.Family`
    choices: tuple[tuple[Any, ...], ...]  # per gene group, in the family's order
    r_choices: tuple[int, ...]
    width_mult: float

    @classmethod
    def published(cls, family: Any, width_mult: float | None = None) -> "FamilySpace":
        """Once-for-All's space of the family: every choice, r 128..224 step 4."""
        return cls(family, tuple(g.choices for g in family.gene_groups()), OFA_RESOLUTIONS,
                   family.check_width(width_mult))

    def groups(self) -> tuple[GeneGroup, ...]:
        """The family's gene groups restricted to this space's choices (for their values; codes
        of index-coded groups are indices into the *family's* choices: `group_codes`)."""
        return tuple(GeneGroup(g.name, g.count, c) for g, c in zip(self.family.gene_groups(), self.choices))

    def group_codes(self) -> tuple[tuple[int, ...], ...]:
        """Per gene group, the int-matrix codes of this space's choices."""
        return tuple(tuple(g.to_codes(c)) for g, c in zip(self.family.gene_groups(), self.choices))

    # -- the matrix interface every stage uses (shared with OFA-MobileNetV3's `SearchSpace`) ------
    @property
    def flat_columns(self) -> tuple[str, ...]:
        return self.family.flat_columns()

    def column_choices(self) -> tuple[tuple[int, ...], ...]:
        """The codes each flat column may hold: r's choices, then every gene's."""
        out: list[tuple[int, ...]] = [self.r_choices]
        for g, codes in zip(self.family.gene_groups(), self.group_codes()):
            out += [codes] * g.count
        return tuple(out)

    def active_mask(self, m: np.ndarray) -> np.ndarray:
        return self.family.active_mask(m)

    def canonical(self, m: np.ndarray) -> np.ndarray:
        return self.family.canonical(m)

    def to_matrix(self, archs) -> np.ndarray:
        """Flat rows as int64 [n, columns] (a matrix is returned as int64)."""
        if isinstance(archs, np.ndarray):
            return archs.astype(np.int64, copy=False)
        width = len(self.flat_columns)
        return np.asarray([a.to_row() for a in archs], dtype=np.int64).reshape(-1, width)

    def check_matrix(self, m: np.ndarray) -> tuple[int, str] | None:
        """The first row of `m` outside this space as (row, reason like "e[3]=0.2 is not one of
        [0.25, 0.35]"), or None. Inactive genes are not checked (they do not change the network)."""
        m = np.asarray(m)
        if m.ndim != 2 or m.shape[1] != len(self.flat_columns) or len(m) == 0:
            return None
        m = m.astype(np.int64, copy=False)
        ok = [np.isin(m[:, :1], self.r_choices)]
        for codes, sl in zip(self.group_codes(), self.family.group_slices().values()):
            ok.append(np.isin(m[:, sl], codes))
        bad = ~np.concatenate(ok, axis=1)
        bad[:, 1:] &= self.family.active_mask(m)
        rows = np.flatnonzero(bad.any(axis=1))
        if len(rows) == 0:
            return None
        i = int(rows[0])
        j = int(np.argmax(bad[i]))
        if j == 0:
            return i, f"r={m[i, 0]} is not one of the space's resolutions {list(self.r_choices)}"
        name = self.flat_columns[j]
        group, _, index = name.rpartition("_")
        g = next(g for g in self.family.gene_groups() if g.name == group)
        value = m[i, j]
        shown = g.choices[value] if g.by_index and 0 <= value < len(g.choices) else value
        allowed = list(self.choices[[x.name for x in self.family.gene_groups()].index(group)])
        return i, f"{group}[{index}]={shown} is not one of {allowed}"

    def encoding_names(self, kind: str = "onehot") -> list[str]:
        if kind == "ordinal":
            return list(self.family.gene_columns()) + ["r"]
        if kind != "onehot":
            from hwnas.errors import InputError

            raise InputError(f"unknown encoding {kind!r}; use 'onehot' or 'ordinal'")
        names = [f"{c}={v}" for g, vals in zip(self.family.gene_groups(), self.choices)
                 for c in g.columns for v in vals]
        return names + [f"r={v}" for v in self.r_choices]

    def encode(self, archs, kind: str = "onehot") -> np.ndarray:
        """float32 features: onehot = per gene one-hot over this space's choices (all zero when
        the gene is inactive) then one-hot r; ordinal = each gene's value (0 when inactive), r."""
        m = self.to_matrix(archs)
        active = self.family.active_mask(m)
        parts = []
        for g, codes, sl in zip(self.family.gene_groups(), self.group_codes(),
                                self.family.group_slices().values()):
            genes, act = m[:, sl], active[:, sl.start - 1: sl.stop - 1]
            if kind == "ordinal":
                values = np.asarray(g.choices, dtype=np.float64)[genes] if g.by_index else genes
                parts.append(values * act)
            else:
                parts.append(((genes[:, :, None] == np.asarray(codes)) & act[:, :, None]).reshape(len(m), -1))
        if kind == "ordinal":
            return np.concatenate(parts + [m[:, :1]], axis=1).astype(np.float32)
        if kind != "onehot":
            self.encoding_names(kind)  # raises the one-line error
        return np.concatenate(parts + [m[:, :1] == np.asarray(self.r_choices)], axis=1).astype(np.float32)

    def size(self, per_resolution: bool = False) -> int | None:
        """Distinct networks (None when the family cannot count them); exact for the full space."""
        n = self.family.networks_per_resolution()
        if n is None or any(c != g.choices for c, g in zip(self.choices, self.family.gene_groups())):
            return None
        return n if per_resolution else n * len(self.r_choices)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {g.name: list(c) for g, c in zip(self.family.gene_groups(), self.choices)}
        out["r"] = list(self.r_choices)
        out["width_mult"] = self.width_mult
        return out

    @classmethod
    def from_dict(cls, family: Any, obj: Mapping[str, Any]) -> "FamilySpace":
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
        if isinstance(r, str):  # "32:64:4" = range 32..64 step 4, inclusive (as SearchSpace)
            r = parse_range(r)
        if not isinstance(r, (list, tuple)) or not r or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in r):
            raise ConfigError(f"search-space 'r' must be a list of positive integers, got {r!r}")
        try:
            width = family.check_width(obj.get("width_mult"))
        except Exception as err:
            raise ConfigError(str(err)) from None
        return cls(family, tuple(choices), tuple(sorted(set(r))), width)

    # -- members (the interface training and sampling use, as OFA-MobileNetV3's `SearchSpace`) ----
    def _uniform_row(self, pick, r: int | None) -> list[int]:
        row = [max(self.r_choices) if r is None else int(r)]
        for g, codes in zip(self.groups(), self.group_codes()):
            values = dict(zip(g.choices, codes))
            row += [values[pick(g.choices)]] * g.count
        return row

    def max_arch(self, r: int | None = None) -> GeneArch:
        """Every gene at its largest choice (the network every other one is a part of)."""
        return GeneArch.from_codes(self.family, self._uniform_row(max, r), self.width_mult)

    def min_arch(self, r: int | None = None) -> GeneArch:
        row = self._uniform_row(min, r)
        row[0] = min(self.r_choices) if r is None else int(r)
        return GeneArch.from_codes(self.family, row, self.width_mult)

    def sample_matrix(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """`n` canonical rows, every gene uniform over this space's choices (Once-for-All's
        ``sample_active_subnet``; the family's `sample_matrix` is uniform over networks instead)."""
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        cols = [rng.choice(np.asarray(self.r_choices), size=(n, 1))]
        for g, codes in zip(self.groups(), self.group_codes()):
            cols.append(rng.choice(np.asarray(codes), size=(n, g.count)))
        return self.family.canonical(np.concatenate(cols, axis=1))

    def sample_genes_matrix(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Every gene uniform over its choices: what `sample_matrix` draws already (training's draw)."""
        return self.sample_matrix(n, rng)

    def from_matrix(self, rows: np.ndarray) -> list[GeneArch]:
        return [GeneArch.from_codes(self.family, row, self.width_mult) for row in np.asarray(rows)]

    def archs_from_frame(self, df, source: str = "table") -> list[GeneArch]:
        """The archs of a DataFrame of flat rows (values, extra columns ignored), each within this
        space: one-line TableErrors naming row and column."""
        m = self.family.table_codes(df, source)
        found = self.check_matrix(m)
        if found is not None:
            raise TableError(f"{source} row {found[0] + 1}: {found[1]}")
        return self.from_matrix(m)

    def sample(self, n: int | None = None, rng: np.random.Generator | int | None = None
               ) -> GeneArch | list[GeneArch]:
        archs = self.from_matrix(self.sample_matrix(1 if n is None else n, rng))
        return archs[0] if n is None else archs

    def check(self, arch: GeneArch) -> str | None:
        """Why `arch` is not in this space (another family, a gene or r outside the choices), or None."""
        if not isinstance(arch, GeneArch) or arch.family_name != self.family.name:
            return f"it is not an {self.family.name} arch"
        if arch.r not in self.r_choices:
            return f"r={arch.r} is not one of the space's resolutions"
        for g in self.groups():
            for i, v in enumerate(arch.group(g.name)):
                if v not in g.choices and self.family.active_mask(np.asarray([arch.to_row()]))[
                        0, self.family.gene_columns().index(f"{g.name}_{i}")]:
                    return f"{g.name}[{i}]={v} is not one of {list(g.choices)}"
        if abs(arch.w - self.width_mult) > 1e-9:
            return f"width multiplier {arch.w} differs from the space's {self.width_mult}"
        return None

    def validate(self, arch: GeneArch) -> GeneArch:
        reason = self.check(arch)
        if reason:
            from hwnas.errors import InputError

            raise InputError(f"arch {arch.id} is outside the search space: {reason}")
        return arch


def space_info(space) -> dict[str, Any]:
    """What `hwnas space info` prints, for a `FamilySpace` of any family: the family's facts, with
    this space's gene choices, resolutions, width, exact size (None where the family cannot count
    it) and its smallest and largest subnets."""
    family = space.family
    info = family.info()
    groups = family.gene_groups()
    for g, c in zip(groups, space.choices):
        info["genes"][g.name]["choices"] = list(c)
    size = space.size(per_resolution=True)
    info.update(resolutions=list(space.r_choices), width_mult=space.width_mult,
                networks_per_resolution=size, size_per_resolution=size,
                size=None if size is None else size * len(space.r_choices),
                min_arch=space.min_arch().to_ofa_dict(), max_arch=space.max_arch().to_ofa_dict(),
                smallest=space.min_arch().describe(), largest=space.max_arch().describe())
    return info
