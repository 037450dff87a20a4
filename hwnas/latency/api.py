"""What `hwnas latency fit | predict | eval` call: table in, predictor/table/report out.

Tables are CSV (or Parquet) with the family's flat arch columns (`Family.flat_columns`: ``r`` and
each gene, as values) and a latency column in milliseconds;
other columns are ignored. Every user mistake is a one-line
`TableError`/`InputError` that names the file, row and column.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from hwnas.errors import InputError, TableError, shown
from hwnas.families import DEFAULT_FAMILY, Family, NetworkSpec, get_family
from hwnas.families.tables import read_table_frame
from hwnas.fileio import read_parquet
from hwnas.latency.analytic import AnalyticPredictor
from hwnas.latency.base import LatencyPredictor, load_predictor
from hwnas.latency.lut import LookupTablePredictor
from hwnas.latency.metrics import summary, within
from hwnas.latency.select import fit_best
from hwnas.run import RunFiles, open_run

__all__ = ["read_latency_table", "fit_from_table", "predict_table", "evaluate_predictor",
           "fit_from_run", "LEARNING_CURVE_SIZES"]

LEARNING_CURVE_SIZES = (10, 20, 50, 100, 200, 500)
#: what every learning-curve point is scored beside: a FLOPs-only line, and the predictor hwnas
#: chose before issue 31 (no runtime priors, the within-10 criterion)
BASELINES = ("flops_baseline", "today_baseline")


def _target(df, column: str, source: str, family: Family) -> np.ndarray:
    import pandas as pd

    if column not in df.columns:
        others = [c for c in df.columns if c not in family.flat_columns()][:8]
        raise TableError(f"{source} has no latency column {column!r}; its other columns: "
                         f"{', '.join(map(str, others)) or 'none'}")
    raw = df[column]
    y = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(y) | (y <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise TableError(f"{source} row {i + 1}, column {column}: {shown(raw.iat[i])} is not a positive "
                         "latency in ms")
    return y


def _family_name(family) -> str:
    return family if isinstance(family, str) else family.name


def read_latency_table(path, target_column: str, family: str | Family) -> tuple[np.ndarray, np.ndarray, Any]:
    """(`family`'s canonical flat rows, int64 [n, columns] (`Family.table_codes`), latencies ms
    [n], the full DataFrame) of a measured table: a CSV/Parquet path, or a DataFrame already read."""
    fam = get_family(_family_name(family))
    source = str(path) if isinstance(path, (str, Path)) else "the measurements"
    df = read_table_frame(path) if isinstance(path, (str, Path)) else path
    m = fam.table_codes(df, source)
    if not len(m):
        raise TableError(f"table {source} has no rows")
    return m.astype(np.int64), _target(df, target_column, source, fam), df


def evaluate_run(run_dir: str | Path, device: str, target: str = "corrected_ms", **settings: Any
                 ) -> dict[str, Any]:
    """`evaluate_predictor` on a run's subnet measurements of `device` (its family, width and
    classes; `settings` as there)."""
    from hwnas.profiling.store import read_measurements

    run = open_run(run_dir, create=False)
    df = read_measurements(run_dir, device=device, kind="subnet")
    if df.empty:
        raise InputError(f"run {run_dir} has no subnet measurements for {device!r}; run "
                         f"`hwnas profile --run {run_dir} --device {device}` first")
    return evaluate_predictor(df, target, net=run.network, **settings)


def _load_base(base: str | Path | LatencyPredictor | None) -> LatencyPredictor | None:
    if base is None or isinstance(base, LatencyPredictor):
        return base
    return load_predictor(base)


def _load_entries(entries: str | Path | None, net: NetworkSpec) -> LookupTablePredictor | None:
    if entries is None:
        return None
    import pandas as pd

    path = Path(entries)
    if not path.exists():
        raise TableError(f"entries table {path} does not exist")
    df = read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, skipinitialspace=True)
    return LookupTablePredictor.from_entries(df, net=net, source=str(path))


def fit_from_table(table_csv: str | Path, target_column: str, out_json: str | Path, *, net: NetworkSpec,
                   base: str | Path | LatencyPredictor | None = None,
                   kinds: Iterable[str] | None = None, entries: str | Path | None = None,
                   device: str = "", folds: int | None = None, seed: int = 0
                   ) -> tuple[LatencyPredictor, dict[str, Any]]:
    """Fit the best predictor (by cross-validation, `fit_best`) to a measured table of `net`'s
    subnets; save it.

    `base`: a source device's predictor JSON, for few-shot transfer (10-50 rows suffice).
    `entries`: a per-block entries CSV (`hwnas.latency.lut`) to add lookup-table candidates.
    `kinds`: restrict the candidate kinds (analytic, lut, hybrid, mlp, transfer).
    Returns (predictor, cross-validation report)."""
    m, y, _ = read_latency_table(table_csv, target_column, net.family)
    pred, report = fit_best(m, y, net=net, kinds=kinds, base=_load_base(base),
                            entries_lut=_load_entries(entries, net),
                            folds=folds, seed=seed, device=device, target=target_column)
    pred.meta.notes.table = str(table_csv)
    pred.save(out_json)
    return pred, report


def predict_table(predictor_json: str | Path, in_csv: str | Path, out_csv: str | Path,
                  column: str = "predicted_ms") -> Any:
    """Write `in_csv`'s rows with an added `column` of predicted ms to `out_csv` (atomically)."""
    from hwnas.fileio import atomic_path

    pred = load_predictor(predictor_json)
    df = read_table_frame(in_csv).copy()
    m = get_family(pred.meta.family).table_codes(df, str(in_csv))
    df[column] = pred.predict(m) if len(m) else []
    out = Path(out_csv)
    with atomic_path(out, suffix=out.suffix) as tmp:
        if out.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)
    return df


def _fit(kind: str | None, m: np.ndarray, y: np.ndarray, net: NetworkSpec, base: LatencyPredictor | None,
         seed: int) -> LatencyPredictor:
    return fit_best(m, y, net=net, kinds=None if kind is None else [kind], base=base, seed=seed)[0]


def evaluate_predictor(table_csv, target_column: str, *, net: NetworkSpec,
                       predictor_json: str | Path | None = None, kind: str | None = None,
                       sizes: Sequence[int] = LEARNING_CURVE_SIZES, test_fraction: float = 0.25,
                       repeats: int = 1, repeat_column: str | None = None,
                       base: str | Path | LatencyPredictor | None = None, seed: int = 0,
                       out_json: str | Path | None = None) -> dict[str, Any]:
    """Held-out accuracy of latency prediction on a measured table (a path or a DataFrame) of
    `net`'s subnets.

    - With `predictor_json`: that predictor's metrics on every row of the table (``heldout``).
    - Learning curve: rows are shuffled (`seed`), the last `test_fraction` held out, and for each
      N in `sizes` (those <= the rest) a predictor is fitted on N rows (`fit_best`, or the
      candidates of one `kind`) and scored on the held-out rows, beside `BASELINES`: a FLOPs-only
      linear fit and today's default (``fit_best(priors=(), criterion="within-10")``), so the
      curve shows what each extra measurement buys;
      `repeats` > 1 averages over reshuffles.
    - `repeat_column`: a second measurement of the same subnets; its agreement with the target
      (``repeatability``: fraction within +-5/10%) is the bar a predictor should reach.
    Metrics: within_5, within_10 (fractions), rmse_ms, mape (%), rmse_log, kendall_tau, spearman_rho.
    """
    from hwnas.fileio import atomic_write_json

    if not 0 < test_fraction < 1:
        raise InputError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if repeats < 1:
        raise InputError(f"repeats must be at least 1, got {repeats}")
    m, y, df = read_latency_table(table_csv, target_column, net.family)
    base_pred = _load_base(base)
    source = str(table_csv) if isinstance(table_csv, (str, Path)) else "the run's measurements"
    report: dict[str, Any] = {"table": source, "target": target_column, "rows": int(len(y)),
                              "width_mult": net.width_mult, "n_classes": net.n_classes, "seed": seed,
                              "family": net.family}
    if repeat_column is not None:
        y2 = _target(df, repeat_column, source, net.get_family())
        report["repeatability"] = {"column": repeat_column, "within_5": within(y2, y, 0.05),
                                   "within_10": within(y2, y, 0.10), **{
                                       k: v for k, v in summary(y2, y).items()
                                       if k in ("kendall_tau", "mape")}}
    if predictor_json is not None:
        pred = load_predictor(predictor_json)
        report["predictor"] = {"path": str(predictor_json), "kind": pred.kind, "name": pred.describe()}
        report["heldout"] = summary(pred.predict(m), y)
    n_test = max(1, int(round(len(y) * test_fraction)))
    pool = len(y) - n_test
    usable = [int(n) for n in sizes if 2 <= int(n) <= pool]
    curve = []
    for n in usable:
        runs = []
        for rep in range(repeats):
            order = np.random.default_rng(seed + rep).permutation(len(y))
            train, test = order[:n], order[pool:]
            pred = _fit(kind, m[train], y[train], net, base_pred, seed)
            flops = AnalyticPredictor("macs", "linear", 0.0, net=net).fit(m[train], y[train])
            # hwnas before runtime priors and the one-SE choice: what the new default must beat
            today = fit_best(m[train], y[train], net=net, kinds=None if kind is None else [kind], base=base_pred,
                             seed=seed, priors=(), criterion="within-10")[0]
            runs.append({"chosen": pred.describe(), **summary(pred.predict(m[test]), y[test]),
                         "flops_baseline": summary(flops.predict(m[test]), y[test]),
                         "today_baseline": summary(today.predict(m[test]), y[test])})
        curve.append({"n_train": n, "n_test": n_test, **_mean_runs(runs)})
    report["learning_curve"] = curve
    report["kind"] = kind or "fit_best"
    if out_json is not None:

        atomic_write_json(out_json, report)
    return report


def _mean_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    if len(runs) == 1:
        return runs[0]
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    out: dict[str, Any] = {k: float(np.mean([r[k] for r in runs])) for k in keys}
    out["chosen"] = [r["chosen"] for r in runs]
    for baseline in BASELINES:
        out[baseline] = {k: float(np.mean([r[baseline][k] for r in runs])) for k in runs[0][baseline]}
    out["repeats"] = len(runs)
    return out


def _block_entries(blocks, target: str, columns: Sequence[str]):
    """Entries table (`columns` + target) from block rows, or None when they describe none."""
    import json

    import pandas as pd

    columns = list(columns)
    if all(c in blocks.columns for c in columns):
        return blocks[columns + [target]]
    if "block" not in blocks.columns:
        return None
    rows = []
    for text, ms in zip(blocks["block"], blocks[target]):
        try:
            desc = json.loads(text) if isinstance(text, str) else dict(text)
        except (ValueError, TypeError):
            continue
        if isinstance(desc, dict) and all(c in desc for c in columns):
            rows.append({**{c: desc[c] for c in columns}, target: ms})
    return pd.DataFrame(rows) if rows else None


def _open_run(run_dir: str | Path):
    """The run's `RunConfig` (`hwnas.run.open_run`), or None for a folder without a config (a
    measurement store copied alone)."""
    return open_run(run_dir, create=False) if RunFiles(Path(run_dir)).config.exists() else None


def fit_from_run(run_dir: str | Path, device: str, *, out_json: str | Path | None = None,
                 target: str = "corrected_ms", width_mult: float | None = None, n_classes: int = 1000,
                 base: str | Path | LatencyPredictor | None = None, kinds: Iterable[str] | None = None,
                 folds: int | None = None, seed: int = 0, family: str | None = None
                 ) -> tuple[LatencyPredictor, dict[str, Any]]:
    """Fit `device`'s latency predictor from a run's measurement store; save it.

    `family`: the run's search-space family (default: its config's; a folder without a config, e.g.
    a measurement store copied alone, is read as the default family's unless `family` names one).

    Reads ``hwnas.profiling.store.read_measurements(run_dir, device=device)``: a DataFrame with the
    flat arch columns, ``device``, ``kind`` ("subnet" | "block" | "model"), ``corrected_ms`` and
    ``median_ms``. Subnet rows are the training table (repeated measurements of one arch are
    merged by their median). Block rows that describe a lookup-table entry (the cost layout's
    `entry_columns`: as columns, or as keys of the JSON ``block`` column) become a lookup table, which
    joins the candidates, calibrated on the subnets. Other rows are ignored.
    Default output: the run's ``predictors/latency-<device>.json`` (`RunFiles.latency_predictor`).
    `width_mult` defaults to the store's (a ``width_mult`` column), else the run's, else the
    family's default."""
    try:
        store = importlib.import_module("hwnas.profiling.store")
    except ModuleNotFoundError as err:
        if err.name != "hwnas.profiling.store":  # a missing extra (e.g. pandas): say that one
            raise
        raise InputError("this hwnas has no measurement store (hwnas.profiling.store); fit from a "
                         "table with `hwnas latency fit TABLE --target COLUMN`") from None
    df = store.read_measurements(run_dir, device=device)
    if df is None or len(df) == 0:
        raise InputError(f"run {run_dir} has no measurements for device {device!r}; "
                         f"run `hwnas profile` for it first")
    if "device" in df.columns:
        df = df[df["device"] == device]
    if target not in df.columns:
        raise TableError(f"the measurements of run {run_dir} have no column {target!r}")
    run = _open_run(run_dir)
    family = (_family_name(family) if family is not None else run.family.name if run is not None
              else DEFAULT_FAMILY)
    fam = get_family(family)
    missing = [c for c in fam.flat_columns() if c not in df.columns]
    if missing:
        raise TableError(f"the measurements of run {run_dir} lack {fam.name}'s arch column(s) "
                         f"{', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}; name the run's "
                         "family (fit_from_run(..., family=NAME))")
    if width_mult is None:
        width_mult = (float(df["width_mult"].iloc[0]) if "width_mult" in df.columns
                      else run.space.width_mult if run is not None else fam.default_width)
    kinds_col = df["kind"].astype(str) if "kind" in df.columns else None
    subnets = df if kinds_col is None else df[kinds_col == "subnet"]
    blocks = None if kinds_col is None else df[kinds_col == "block"]
    if len(subnets) == 0:
        raise InputError(f"run {run_dir} has block measurements but no whole subnets for device "
                         f"{device!r}; profile some subnets (a lookup table is calibrated on them)")
    source = f"measurements of {run_dir} ({device})"
    _target(subnets, target, source, fam)
    grouped = subnets.groupby(list(fam.flat_columns()), as_index=False, sort=False)[target].median()
    m = fam.table_codes(grouped, source)
    net = NetworkSpec(fam.name, width_mult, n_classes)
    entry_columns = net.cost_layout().entry_columns
    y = _target(grouped, target, source, fam)
    entries_lut = None
    entries = _block_entries(blocks, target, entry_columns) if blocks is not None and len(blocks) else None
    if entries is not None:
        merged = entries.groupby(list(entry_columns), as_index=False)[target].median()
        entries_lut = LookupTablePredictor.from_entries(merged, net=net, ms_column=target, device=device,
                                                        source=source)
    pred, report = fit_best(m, y, net=net, kinds=kinds, base=_load_base(base), entries_lut=entries_lut,
                            folds=folds, seed=seed, device=device, target=target)
    # which subnets it was fitted on, by id: every held-out figure is computed from this, not from file times
    fitted_on = sorted(set(subnets["key"].astype(str))) if "key" in subnets.columns else None
    notes = pred.meta.notes
    notes.run, notes.fitted_on = str(run_dir), fitted_on
    notes.block_entries = 0 if entries_lut is None else int(entries_lut.meta.notes.entries or 0)
    out = Path(out_json) if out_json is not None else RunFiles(Path(run_dir)).latency_predictor(device)
    pred.save(out)
    report["path"] = str(out)
    return pred, report
