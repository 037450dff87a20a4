"""OFA-MobileNetV3's archs as table rows (CSV or Parquet, the flat columns `FLAT_COLUMNS`): reading
them with errors that name row and column, writing them atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from hwnas.families.ofa_mbv3.arch import FLAT_COLUMNS, Arch
from hwnas.families.ofa_mbv3.space import SearchSpace, archs_from_frame, reason_to_column
from hwnas.families.tables import read_table_frame

__all__ = ["archs_to_frame", "archs_from_frame", "reason_to_column", "read_arch_table", "write_arch_table"]


def archs_to_frame(archs: Sequence[Arch]):
    """A pandas DataFrame with the flat columns, one row per arch."""
    import pandas as pd

    return pd.DataFrame(SearchSpace.to_matrix(archs), columns=list(FLAT_COLUMNS))


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
