"""Flat CSV tables of any family's subnets: ``r`` then the genes in arch-dict order, as values.

`table_codes` turns such a table into the family's canonical int matrix with errors that name the
row and column; `stats_frame` adds Once-for-All's exact ``params`` and ``macs`` to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hwnas.errors import InputError, TableError, shown
from hwnas.fileio import read_parquet

__all__ = ["table_codes", "stats_frame", "read_arch_frame", "read_table_frame", "frame_archs", "archs_frame",
           "MIN_R", "MAX_R"]

MIN_R, MAX_R = 16, 512  # resolutions a table may hold (as OFA-MobileNetV3's `SearchSpace.for_tables`)


def table_codes(family: Any, df, source: str = "table") -> np.ndarray:
    """The canonical int matrix [n, 1 + genes] of a DataFrame's flat columns (others ignored).

    Every gene that changes the network must be one of its group's choices; genes that do not
    (slots past a stage's depth) may hold anything numeric and are normalised."""
    import pandas as pd

    columns = family.flat_columns()
    missing = [c for c in columns if c not in df.columns]
    if missing:
        names = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise TableError(f"{source} lacks the column(s) {names}; a {family.name} table needs r, "
                         + ", ".join(f"{g.name}_0..{g.name}_{g.count - 1}" for g in family.gene_groups()))
    values = df[list(columns)].apply(pd.to_numeric, errors="coerce")
    nan = values.isna().to_numpy()
    if nan.any():
        i, j = np.argwhere(nan)[0]
        raise TableError(f"{source} row {i + 1}, column {columns[j]}: {shown(df[columns[j]].iat[i])} is not a number")
    v = values.to_numpy(dtype=np.float64)
    r = v[:, 0]
    bad_r = (r != np.round(r)) | (r < MIN_R) | (r > MAX_R)
    if bad_r.any():
        i = int(np.flatnonzero(bad_r)[0])
        raise TableError(f"{source} row {i + 1}, column r: {shown(df['r'].iat[i])} is not a resolution in "
                         f"{MIN_R}..{MAX_R}")
    codes = np.full(v.shape, -1, dtype=np.int64)
    codes[:, 0] = r.astype(np.int64)
    for g, sl in zip(family.gene_groups(), family.group_slices().values()):
        block = v[:, sl]
        for code, choice in enumerate(g.choices):
            hit = np.isclose(block, float(choice), rtol=0.0, atol=1e-9)
            codes[:, sl][hit] = code if g.by_index else int(choice)  # a view: writes into codes
    invalid = codes[:, 1:] < 0
    filled = codes.copy()
    filled[:, 1:] = np.where(invalid, family.fillers()[None, :], codes[:, 1:])
    bad = invalid & family.active_mask(filled)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        col = columns[j + 1]
        group = next(g for g in family.gene_groups() if col in g.columns)
        raise TableError(f"{source} row {i + 1}, column {col}: {shown(df[col].iat[i])} is not one of "
                         f"{list(group.choices)}")
    return family.canonical(filled)


def stats_frame(family: Any, df, width_mult: float | None = None, n_classes: int = 1000,
                source: str = "table", precision: str | None = None):
    """A copy of `df` with exact ``params`` and ``macs`` columns (Once-for-All's convention) and,
    with a `precision` ("fp32", "bf16", "int8"), ``ram_kb`` (the planned activation arena at batch
    1) and ``flash_kb`` (weight bytes), kB = 1024 bytes (`hwnas.families.memory`)."""
    from hwnas.families.memory import KB, check_memory_model, check_precision, family_memory

    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
        raise InputError(f"--classes must be a positive integer, got {n_classes!r}")
    if precision is not None:
        check_precision(precision, "--precision")
        check_memory_model(family)
    width = family.check_width(width_mult)
    m = family.table_codes(df, source)
    params, macs = family.count_params_macs(m, width, n_classes) if len(m) else (np.zeros(0, np.int64),) * 2
    out = df.copy()
    out["params"] = np.asarray(params, dtype=np.int64)
    out["macs"] = np.asarray(macs, dtype=np.int64)
    if precision is not None:
        ram, flash = family_memory(family, m, width, n_classes, precision)
        out["ram_kb"] = ram / KB
        out["flash_kb"] = flash / KB
    return out


def read_arch_frame(space, path, source: str | None = None):
    """(archs, DataFrame with all the file's columns) of a CSV/Parquet table of flat rows, every
    arch within `space` (a run's or supernet's space, any family): one-line TableErrors naming
    row and column. Rows hold values (ResNet50's expand ratios as 0.2/0.25/0.35)."""
    df = read_table_frame(path)
    return space.archs_from_frame(df, source or str(path)), df


def read_table_frame(path: str | Path):
    """A CSV (or Parquet) file as a DataFrame with stripped column names; one-line TableErrors."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise TableError(f"table {path} does not exist")
    try:
        if path.suffix == ".parquet":
            df = read_parquet(path)
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


def frame_archs(space, df, source: str = "table") -> list:
    """The archs of a DataFrame of flat rows within `space` (any family)."""
    return space.archs_from_frame(df, source)


def archs_frame(archs, extra=None):
    """Flat rows of any family's archs (r, then the genes as values), plus `extra` columns."""
    import pandas as pd

    rows = []
    for a in archs:
        d = a.to_ofa_dict()
        row = {"r": d.pop("r")[0]}
        for group, values in d.items():
            row.update({f"{group}_{i}": v for i, v in enumerate(values)})
        rows.append(row)
    df = pd.DataFrame(rows)
    for k, v in dict(extra or {}).items():
        df[k] = list(v)
    return df
