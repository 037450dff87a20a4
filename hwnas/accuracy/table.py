"""The run's accuracy table: sampled subnets of its supernet, evaluated for real.

`<run>/accuracy.csv` (the family's flat arch columns as values -- ResNet50's expand ratios as
0.2/0.25/0.35 --, id, top1, loss, n) holds subnets evaluated on the held-out
validation split after BN recalibration (`hwnas.supernet.evaluation.evaluate_subnets`); the test
split is kept for verifying search results. A subnet takes about a second, so the table is built in
chunks, each appended atomically under the run's lock, and a rerun evaluates only what is missing.
The sample is prefix-stable: asking for more subnets later extends the same list.

Under ``torchrun --nproc_per_node N -m hwnas accuracy build ...`` every rank evaluates its share of
each chunk and rank 0, the only writer, merges them (torch.distributed over gloo: subnets are
evaluated on the CPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwnas.distributed import init_distributed
from hwnas.errors import InputError, TableError
from hwnas.fileio import atomic_path
from hwnas.run import RunFiles

__all__ = ["ACCURACY_TABLE", "accuracy_sample", "anchor_rows", "read_accuracy_table", "table_codes_top1",
           "build_accuracy_table", "measured_accuracy", "evaluate_into_table", "table_columns", "frame_codes",
           "values_frame"]

ACCURACY_TABLE = RunFiles(Path("")).accuracy.name
_BLOCK = 50  # archs per seeded block of the prefix-stable sample
ANCHOR_RESOLUTIONS = 8  # resolutions whose smallest and largest subnets the sample holds


def table_columns(space) -> list[str]:
    """The accuracy table's columns for a run of `space`'s family (`bn_images`: the training images
    BN was recalibrated on, which moves top-1: one table holds one setting)."""
    return [*space.flat_columns, "id", "top1", "loss", "n", "bn_images"]


def frame_codes(space, df, source: str = "table") -> np.ndarray:
    """The int matrix of a table's flat columns (values in the file; codes in the matrix), with
    one-line errors naming row and column for other families."""
    return space.family.table_codes(df, source)


def values_frame(space, m: np.ndarray):
    """A DataFrame of int rows `m` in the family's flat columns, as values (the CSV layout)."""
    import pandas as pd

    m = np.asarray(m)
    out = pd.DataFrame(m, columns=list(space.flat_columns))
    for g, sl in zip(space.family.gene_groups(), space.family.group_slices().values()):
        if g.by_index:
            values = np.asarray(g.choices)[m[:, sl]]
            for j, col in enumerate(g.columns):
                out[col] = values[:, j]
    return out


def _run_columns(run_dir: Path) -> list[str]:
    """The flat columns of the run at `run_dir` (the default family's when it has no config)."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.run import CONFIG, open_run

    if not (Path(run_dir) / CONFIG).exists():
        return list(get_family(DEFAULT_FAMILY).flat_columns())
    return list(open_run(run_dir, create=False).space.flat_columns)

Progress = Callable[..., Any]  # progress(event, **fields)


def accuracy_sample(space, n: int, seed: int = 0) -> np.ndarray:
    """`n` distinct canonical subnets (the space's int matrix, any family): the space's min and max,
    then seeded blocks, each half uniform over networks and half graded small-to-large
    (`sample_graded`), so the predictor also sees the small subnets tight budgets select; after the
    first block, the smallest and largest subnet at other resolutions (`anchor_rows`). The first k
    rows of a larger sample are the same k rows."""
    from hwnas.families.sampling import sample_graded, unique_rows

    if n < 1:
        raise InputError(f"the accuracy table needs at least 1 subnet, got n={n}")
    # the space's min and max, one seeded block, then the other anchors: a small table stays spread
    parts = [space.to_matrix([space.min_arch(), space.max_arch()])]
    total, b = 2, 0
    while total < n + 2 * _BLOCK:  # margin: duplicates are dropped below
        rng = np.random.default_rng([seed, b])
        half = _BLOCK // 2
        parts += [space.sample_matrix(_BLOCK - half, rng), sample_graded(space, half, rng)]
        if b == 0:
            parts.append(anchor_rows(space))
        total, b = total + _BLOCK, b + 1
    m = np.concatenate(parts)
    m = m[unique_rows(m)]
    return m[:n]


def read_accuracy_table(run_dir: str | Path, name: str = ACCURACY_TABLE, space=None):
    """The run's accuracy table (an empty DataFrame when there is none). Its flat columns are those
    of `space`'s family (default: the run's)."""
    import pandas as pd

    path = Path(run_dir) / name
    flat = list(space.flat_columns) if space is not None else _run_columns(run_dir)
    if not path.exists():
        return pd.DataFrame(columns=[*flat, "id", "top1", "loss", "n", "bn_images"])
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise TableError(f"accuracy table {path} is unreadable ({str(err).splitlines()[0]}); "
                         "move it away and rebuild it with `hwnas accuracy build`") from None
    missing = [c for c in (*flat, "id", "top1") if c not in df.columns]
    if missing:
        raise TableError(f"{path} is not an hwnas accuracy table (missing {', '.join(missing[:4])})")
    bad = ~np.isfinite(pd.to_numeric(df["top1"], errors="coerce").to_numpy(dtype=float))
    if bad.any() or not df["top1"].between(0, 100).all():
        raise TableError(f"{path} has top-1 values that are not percentages (row {int(np.argmax(bad)) + 2}); "
                         "move it away and rebuild it with `hwnas accuracy build`")
    return df


def table_codes_top1(run) -> tuple[Any, np.ndarray, np.ndarray]:
    """(the run's accuracy table, its rows as the family's int matrix, their top-1 in %): what the
    accuracy predictors are fitted on."""
    df = read_accuracy_table(run.run_dir, space=run.space)
    return df, frame_codes(run.space, df, str(run.files.accuracy)), df["top1"].to_numpy(dtype=np.float64)


def _gather(rows: list[dict[str, Any]], world: int) -> list[dict[str, Any]]:
    if world == 1:
        return rows
    import torch.distributed as dist

    parts: list[Any] = [None] * world
    dist.all_gather_object(parts, rows)
    return [r for part in parts for r in part]


def anchor_rows(space, most: int = ANCHOR_RESOLUTIONS) -> np.ndarray:
    """The smallest and largest subnet at each resolution (`most` of them, evenly spread, the two
    ends included). Sandwich training trains these at every step's resolution, so they can score
    above what their neighbours predict; they are also the front's two ends, where a tight budget or the
    hand-designed baselines are judged."""
    small, large = space.to_matrix([space.min_arch(), space.max_arch()])
    rs = sorted(space.column_choices()[0])
    rs = [rs[i] for i in sorted({round(x) for x in np.linspace(0, len(rs) - 1, min(most, len(rs)))})]
    return np.asarray([np.concatenate([[r], row[1:]]) for row in (small, large) for r in rs],
                      dtype=np.asarray(small).dtype)


def build_accuracy_table(run, n: int = 1000, *, seed: int = 0, bn_images: int | None = None,
                         max_batches: int | None = None, chunk: int = 25,
                         progress: Progress | None = None):
    """Evaluate `n` sampled subnets of the run's supernet on the validation split into
    `<run>/accuracy.csv` and return the table's rows for them. Already evaluated subnets are
    skipped; each chunk is appended atomically, so an interrupted build loses at most one chunk.
    Under torchrun, ranks share every chunk."""
    archs = run.space.from_matrix(accuracy_sample(run.space, n, seed))
    return evaluate_into_table(run, archs, ACCURACY_TABLE, split="val", seed=seed, bn_images=bn_images,
                               max_batches=max_batches, chunk=chunk, progress=progress, event="accuracy")


def measured_accuracy(run, archs, *, split: str = "test", bn_images: int | None = None, seed: int = 0,
                      progress: Progress | None = None) -> np.ndarray:
    """Top-1 (%) of `archs` measured on `split` (default: the test split, which no accuracy
    table is fitted on), exactly as `hwnas supernet eval` computes it; kept in
    `<run>/accuracy-<split>.csv` so a rerun does not evaluate the same subnet twice."""
    table = evaluate_into_table(run, list(archs), RunFiles(Path("")).accuracy_split(split).name, split=split, seed=seed,
                                bn_images=bn_images, chunk=10, progress=progress, event="verify-accuracy")
    by_id = dict(zip(table["id"].astype(str), table["top1"].astype(float)))
    return np.array([by_id[a.id] for a in archs], dtype=np.float64)


def evaluate_into_table(run, archs, name: str, *, split: str, seed: int, bn_images: int | None,
                        max_batches: int | None = None, chunk: int = 25, progress: Progress | None = None,
                        event: str = "accuracy"):
    """Evaluate the subnets of `archs` that `<run>/<name>` lacks and append them in chunks
    (one writer under the run's lock); returns the table's rows for `archs`."""
    import pandas as pd

    from hwnas.run import run_lock
    from hwnas.supernet.data import BN_IMAGES, build_loaders
    from hwnas.supernet.evaluation import evaluate_subnets
    from hwnas.supernet.pretrained import data_config_of, load_supernet

    path = Path(run.run_dir) / name
    rank, world = init_distributed("cpu")  # subnets are evaluated on the CPU: gloo gathers their rows
    space = run.space
    table = read_accuracy_table(run.run_dir, name, space)
    done = set(table["id"].astype(str))
    todo = list({a.id: a for a in archs if a.id not in done}.values())
    bn_images = bn_images or BN_IMAGES
    if todo:
        _check_one_setting(table, path, bn_images)
        todo = _take_precomputed(run, todo, path, name, split=split, seed=seed,
                                 bn_images=bn_images, max_batches=max_batches, write=rank == 0)
    if progress and rank == 0:
        progress(event, done=len(archs) - len(todo), total=len(archs))
    if todo:
        model, meta = load_supernet(run.supernet)
        loaders = build_loaders(data_config_of(meta, run.data))
        step = chunk * world
        for lo in range(0, len(todo), step):
            part = todo[lo:lo + step]
            mine = part[rank::world]
            rows = evaluate_subnets(model, mine, loaders, split=split, bn_images=bn_images, seed=seed,
                                    max_batches=max_batches) if mine else []
            if mine:
                values = values_frame(space, space.to_matrix(mine)).to_dict("records")
                for v, r in zip(values, rows):
                    r.update(v, bn_images=bn_images)
            rows = _gather(rows, world)
            if rank != 0:
                continue
            new = pd.DataFrame(rows)[table_columns(space)]
            with run_lock(run.run_dir, name):  # one writer; keep what another process appended
                table = read_accuracy_table(run.run_dir, name, space)
                new = new[~new["id"].isin(set(table["id"].astype(str)))]
                table = new if table.empty else pd.concat([table, new], ignore_index=True)
                with atomic_path(path, suffix=".csv") as tmp:
                    table.to_csv(tmp, index=False)
            if progress:
                progress(event, done=len(archs) - len(todo) + lo + len(part), total=len(archs))
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
    table = read_accuracy_table(run.run_dir, name, space)  # what every writer (and the shipped rows) left
    wanted = {a.id for a in archs}
    return table[table["id"].astype(str).isin(wanted)].reset_index(drop=True)


def _check_one_setting(table, path: Path, bn_images: int) -> None:
    """Refuse to add rows evaluated with another BN recalibration than the table's (tables from
    before the column hold no setting and take any)."""
    if "bn_images" not in table.columns:
        return
    held = sorted({int(v) for v in table["bn_images"].dropna()})
    if held and held != [bn_images]:
        raise InputError(f"{path} holds subnets evaluated with BN recalibrated on {', '.join(map(str, held))} "
                         f"training images; adding some on {bn_images} would mix two settings in one table: "
                         f"use --bn-images {held[0]}, or build into a new run")


def _take_precomputed(run, todo: list, path: Path, name: str, *, write: bool, **key: Any) -> list:
    """Append the shipped evaluations of `todo`'s subnets (`hwnas.accuracy.precomputed`) to the
    table; returns the subnets still to evaluate."""
    import pandas as pd

    from hwnas.accuracy.precomputed import precomputed_table
    from hwnas.run import run_lock

    path_shipped = precomputed_table(run, **key)
    if path_shipped is None:
        return todo
    shipped = read_accuracy_table(path_shipped.parent, path_shipped.name, run.space)
    hit = shipped[shipped["id"].astype(str).isin({a.id for a in todo})].assign(bn_images=key["bn_images"])
    hit = hit[table_columns(run.space)]
    if write and not hit.empty:
        with run_lock(run.run_dir, name):
            table = read_accuracy_table(run.run_dir, name, run.space)
            hit = hit[~hit["id"].isin(set(table["id"].astype(str)))]
            table = hit if table.empty else pd.concat([table, hit], ignore_index=True)
            with atomic_path(path, suffix=".csv") as tmp:
                table.to_csv(tmp, index=False)
    have = set(hit["id"].astype(str))
    return [a for a in todo if a.id not in have]
