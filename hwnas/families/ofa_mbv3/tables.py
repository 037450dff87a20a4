"""OFA-MobileNetV3's archs as table rows (CSV or Parquet, the flat columns `FLAT_COLUMNS`): reading
them with errors that name row and column, writing them atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from hwnas.errors import InputError, TableError, shown
from hwnas.families.ofa_mbv3.arch import FLAT_COLUMNS, Arch
from hwnas.families.ofa_mbv3.space import SearchSpace, check_matrix
from hwnas.families.tables import read_table_frame

__all__ = ["archs_to_frame", "archs_from_frame", "reason_to_column", "read_arch_table", "write_arch_table"]


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


def read_arch_table(path: str | Path, space: SearchSpace | None = None, w: float | None = None):
    """Read a CSV (or Parquet) of flat rows -> (archs, DataFrame with all the file's columns)."""
    df = read_table_frame(path)
    return archs_from_frame(df, space, w, source=str(path)), df


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
