"""What the dashboard reads: run-directory files only, never hidden state.

Every loader returns None (or an empty frame) when its file is missing, and the page then shows
the command that produces it. Loaders are keyed on file modification times by the app, so new
results appear while a search is still running.

One subnet is *the* recommendation everywhere: search.json's first ``best`` entry (the search's
pick, `search_pick`); `load_front` marks it in the front every page draws.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hwnas.dashboard import stats
from hwnas.export.budget import bundle_latency
from hwnas.export.manifest import BundleError, read_meta
from hwnas.export.record import BundleRecord
from hwnas.run import RunFiles
from hwnas.search.columns import MEASURED_TOP1, TOP1_PRED, TOP1_STD, measured_ms, ms_pred
from hwnas.search.record import SearchRecord, read_search

__all__ = ["RunFiles", "run_status", "load_pareto", "load_measurements", "load_accuracy",
           "load_search", "load_train_log", "latency_pairs", "device_matrix_all",
           "arch_grid", "find_runs", "search_pick", "load_front", "RunFront", "front_frame", "front_on",
           "latency_stats", "load_exports", "run_device", "search_history"]

TOP1_OBJECTIVE = "top1_objective"  # pareto.csv: what the search ranked on (predicted - risk * sigma)
MIN_SHARED = 10  # fewer shared subnets than this and a rank correlation is not worth reading


def find_runs(path: Path) -> list[Path]:
    """`path` itself when it is a run, else the runs directly inside it."""
    path = Path(path)
    if RunFiles(path).config.exists():
        return [path]
    return sorted(p for p in path.glob("*") if RunFiles(p).config.exists()) if path.is_dir() else []


def run_device(files: RunFiles, search: SearchRecord | None = None) -> str:
    """The device a run is about: the one it was searched for, else the first it measured, else
    cpu-ort (what the commands the pages suggest name)."""
    searched = searched_device(search if search is not None else load_search(files))
    if searched:
        return searched
    measured = load_measurements(files)
    return str(sorted(measured["device"].unique())[0]) if not measured.empty else "cpu-ort"


def run_status(files: RunFiles) -> list[dict[str, str]]:
    """One row per pipeline stage: its status (done, missing, or what is wrong), what is there and
    the command that makes (or remakes) it."""
    run = files.root
    search = load_search(files)
    measurements = load_measurements(files)
    devices = sorted(measurements["device"].unique()) if not measurements.empty else []
    dev = run_device(files, search)
    predictors = sorted(p.stem for p in files.predictors.glob("latency-*.json")) if files.predictors.exists() else []
    pick = search_pick(search)
    exports = exports_state(load_exports(files, search=search), dev)
    export_cmd = (f"hwnas export --run {run} --device {dev} --subnet {pick['id']}" if pick
                  else f"hwnas export --run {run} --device {dev} --pareto")
    rows = [
        ("measurements", f"{len(measurements)} rows on {', '.join(devices)}" if devices else "",
         f"hwnas profile --run {run} --device {dev} --samples 100"),
        ("latency predictors", ", ".join(predictors), f"hwnas latency fit --run {run} --device {dev}"),
        ("accuracy table", f"{len(load_accuracy(files))} subnets" if files.accuracy.exists() else "",
         f"hwnas accuracy build --run {run} --samples 150"),
        ("pareto front", f"{len(load_pareto(files))} subnets" if files.pareto.exists() else "",
         f"hwnas search --run {run} --device {dev} --latency-ms X --pareto"),
    ]
    out = [{"stage": s, "status": "done" if have else "missing", "what": have or "—",
            "command": "" if have else cmd} for s, have, cmd in rows]
    out.append({"stage": "exports", "status": exports["status"], "what": exports["text"],
                "command": "" if exports["status"] == "done" else export_cmd})
    return out


def exports_state(exports: pd.DataFrame, device: str) -> dict[str, Any]:
    """Whether the run's bundles ship what the current search recommends: `current` counts the
    verified bundles for `device` of a subnet in the current pareto.csv; the others are named by
    what is wrong with them (orphaned, another device, not verified)."""
    if exports.empty:
        return {"status": "missing", "current": 0, "total": 0, "text": "—"}
    ok = exports["status"].eq("verified") & exports["in_front"].astype(bool) & exports["device"].eq(device)
    problems = []
    for what, mask in (("orphaned (not in the current pareto.csv)", ~exports["in_front"].astype(bool)),
                       (f"for another device than {device}", ~exports["device"].eq(device)),
                       ("not verified", ~exports["status"].eq("verified"))):
        if mask.any():
            problems.append(f"{int(mask.sum())} {what}")
    text = f"{int(ok.sum())} of {len(exports)} current" + (f"; {', '.join(problems)}" if problems else "")
    return {"status": "done" if ok.any() else "none current", "current": int(ok.sum()),
            "total": int(len(exports)), "text": text}


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def load_measurements(files: RunFiles) -> pd.DataFrame:
    from hwnas.profiling.store import read_measurements

    return read_measurements(files.root)


def load_accuracy(files: RunFiles) -> pd.DataFrame:
    return _read_csv(files.accuracy)


def run_space(files: RunFiles):
    """The run's search space (of its family): the family's space interface."""
    mtime = files.config.stat().st_mtime if files.config.exists() else 0.0
    return _run_space(files.root, mtime)


@functools.lru_cache(maxsize=32)
def _run_space(root: Path, mtime: float):
    from hwnas.errors import HwnasError
    from hwnas.run import open_run
    from hwnas.families import DEFAULT_FAMILY, get_family

    try:
        return open_run(root, create=False).space
    except HwnasError:  # no or a broken config.yaml: the first family's columns
        return get_family(DEFAULT_FAMILY).default_space()


def arch_codes(files: RunFiles, df: pd.DataFrame) -> np.ndarray:
    """The int matrix of a table's flat rows in the run family's columns (what predictors take)."""
    return run_space(files).family.table_codes(df).astype(np.int32)


def load_pareto(files: RunFiles) -> pd.DataFrame:
    """pareto.csv with each subnet's `id`, its description (`arch`) and its int row (`arch_row`)."""
    df = _read_csv(files.pareto)
    if df.empty:
        return df
    space = run_space(files)
    if not set(space.flat_columns) <= set(df.columns):
        return df
    archs = space.from_matrix(arch_codes(files, df))
    if "id" not in df.columns:
        df["id"] = [a.id for a in archs]
    df["arch"] = [a.describe() for a in archs]
    df["arch_row"] = [list(a.to_row()) for a in archs]
    return df


def load_search(files: RunFiles) -> SearchRecord | None:
    """search.json read through its schema (`hwnas.search.record.read_search`): entries that do not
    fit it (a `best` id that is not 12 hex digits, say) are left out, since run folders come from
    other people and ids are shown in Markdown and used as keys."""
    return read_search(files.search)


def latency_trust(files: RunFiles, search: SearchRecord | None) -> dict[str, dict[str, Any]]:
    """search.json's `latency_trust` (each device's latency predictor on held-out subnets), only
    its numbers (the schema checked them), and the fix commands made here for this run (a run
    folder from someone else carries no command the dashboard shows)."""
    out: dict[str, dict[str, Any]] = {}
    for device, q in (search.latency_trust if search else {}).items():
        if q is None:
            continue
        out[device] = {"n": q.n, "within_10": q.within_10, "poor": q.poor, "kendall_tau": q.kendall_tau,
                       "median_abs_error": q.median_abs_error, "tau_apart": q.tau_apart, "pairs_apart": q.pairs_apart,
                       "fix": f"hwnas profile --run {files.root} --device {device} --samples auto",
                       "refit": f"hwnas latency fit --run {files.root} --device {device}"}
    return out


def load_train_log(path: Path | None) -> pd.DataFrame:
    """Supernet training curves from a `train_log.jsonl` (one JSON record per epoch)."""
    if path is None or not Path(path).exists():
        return pd.DataFrame()
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    df = pd.DataFrame(rows)
    if not df.empty:
        df["epoch_total"] = np.arange(1, len(df) + 1)
    return df


def latency_pairs(files: RunFiles, device: str) -> pd.DataFrame:
    """Measured vs. predicted latency of the device's measured subnets (needs its predictor)."""
    path = files.latency_predictor(device)
    df = load_measurements(files)
    if df.empty or not path.exists():
        return pd.DataFrame()
    from hwnas.latency import load_predictor

    df = df[(df["device"] == device) & (df["kind"] == "subnet")].copy()
    if df.empty:
        return df
    predictor = load_predictor(path)
    df["predicted_ms"] = predictor.predict(arch_codes(files, df))
    df["measured_ms"] = df["corrected_ms"]
    df["error_pct"] = 100 * (df["predicted_ms"] / df["measured_ms"] - 1)
    return df


def arch_grid(arch) -> pd.DataFrame:
    """Long table for the per-block picture: row, column, colour value, label, used.

    A family whose searchable blocks all sit under a depth gene (its `slot_layout`): stages x
    blocks, each cell labelled with its own genes (first letter and value: k5 e6) and coloured by
    the last (the expand ratio of the MBConv families). Other families: one row per gene group,
    one cell per gene. Blocks or genes that do not run show —."""
    family = arch.family
    row = np.asarray([arch.to_row()])
    names = family.flat_columns()
    values = [arch.r] + [v for g in family.gene_groups() for v in arch.group(g.name)]
    layout = family.slot_layout()
    rows = []
    if layout is not None and all(s.depth is not None for s in layout.slots):
        used = layout.used(row)[0]
        stages = {d: k for k, d in enumerate(layout.depth_columns)}
        blocks: dict[int, int] = {}
        for s, slot in enumerate(layout.slots):
            blocks[slot.depth] = blocks.get(slot.depth, 0) + 1
            label = " ".join(f"{names[c][0]}{values[c]:g}" for c in slot.genes)  # e.g. "k5 e6"
            rows.append({"stage": f"stage {stages[slot.depth] + 1}", "block": blocks[slot.depth],
                         "expand": float(values[slot.genes[-1]]) if used[s] else None,
                         "used": bool(used[s]), "label": label if used[s] else "—"})
        return pd.DataFrame(rows)
    active = family.active_mask(row)[0]
    k = 0
    for g in family.gene_groups():
        for i, value in enumerate(arch.group(g.name)):
            used = bool(active[k])
            k += 1
            rows.append({"stage": g.name, "block": i + 1, "expand": float(value) if used else None,
                         "used": used, "label": f"{value:g}" if used else "—"})
    return pd.DataFrame(rows)


# -- the search's report and the recommended subnet ------------------------------------------------
def searched_device(search: SearchRecord | None, front: pd.DataFrame | None = None) -> str | None:
    devices = search.settings.devices if search else []
    if devices:
        return devices[0]
    if front is not None and not front.empty:
        named = [c.split(":", 1)[1] for c in front.columns if c.startswith("ms_pred:")]
        if named:
            return named[0]
    return None


def budget_of(search: SearchRecord | None, device: str | None) -> float | None:
    return search.settings.budgets_ms.get(device) if search and device else None


def search_pick(search: SearchRecord | None) -> dict[str, Any] | None:
    """The subnet the search recommends: search.json's first ``best`` entry (measured within the
    budget and best by measured top-1 when the search verified), or None."""
    return search.best[0].model_dump(mode="json") if search and search.best else None


def test_top1_n(files: RunFiles, search: SearchRecord | None) -> dict[str, float]:
    """id -> how many test images its measured top-1 was counted on (accuracy-<split>.csv)."""
    df = _read_csv(files.accuracy_split(search.accuracy_split if search else "test"))
    if df.empty or not {"id", "n"} <= set(df.columns):
        return {}
    return dict(zip(df["id"].astype(str), df["n"].astype(float)))


def latency_stats(files: RunFiles, device: str | None = None) -> pd.DataFrame:
    """Per measured subnet and device: median drift-corrected ms, p90, relative standard error
    (NaN when one round could not estimate it), timed runs, rounds and measurements."""
    df = load_measurements(files)
    if df.empty:
        return pd.DataFrame(columns=["key", "device", "corrected_ms", "p90_ms", "rel_se", "n", "rounds",
                                     "measurements"])
    df = df[df["kind"] == "subnet"]
    if device is not None:
        df = df[df["device"] == device]
    for col in ("p90_ms", "rel_se", "n", "rounds"):
        if col not in df.columns:
            df = df.assign(**{col: np.nan})
    out = df.groupby(["key", "device"], as_index=False).agg(
        corrected_ms=("corrected_ms", "median"), p90_ms=("p90_ms", "median"), rel_se=("rel_se", "median"),
        n=("n", "sum"), rounds=("rounds", "max"), measurements=("corrected_ms", "size"))
    out.loc[~(out["rel_se"] > 0), "rel_se"] = np.nan  # one round: no standard error
    return out


def latency_se(files: RunFiles, search: SearchRecord | None, device: str) -> pd.DataFrame:
    """id -> (rel_se, ucb_ms) of its measured latency on `device`: the search's verification
    records (the acceptance bound it was judged by), else the measurement store."""
    records = pd.DataFrame([v.model_dump(mode="json") for v in search.verification] if search else [])
    out = pd.DataFrame(columns=["rel_se", "ucb_ms"])
    if not records.empty and {"id", "device", "rel_se"} <= set(records.columns):
        mine = records[records["device"] == device].drop_duplicates("id", keep="last").set_index("id")
        out = mine.reindex(columns=["rel_se", "ucb_ms"]).astype(float)
    store = latency_stats(files, device).set_index("key")["rel_se"]
    out = out.reindex(out.index.union(store.index))
    out["rel_se"] = out["rel_se"].where(out["rel_se"] > 0, store.reindex(out.index))
    return out


def front_frame(front: pd.DataFrame, device: str | None, budget: float | None, *,
                pick: dict[str, Any] | None = None, test_n: dict[str, float] | None = None,
                se: pd.DataFrame | None = None) -> pd.DataFrame:
    """pareto.csv with what the pages need, one row per subnet:

    `ms` / `measured` (predicted / measured ms on `device`), `top1_pred`, `top1_std`, `objective`
    (what the search ranked on: predicted - risk x sigma, clipped; `top1_pred` for files without
    it), `measured_top1` with `top1_n` test images and its 95 % interval `top1_lo`..`top1_hi`,
    `rel_se` / `ucb_ms` of the measured latency and its interval `ms_lo`..`ms_hi`, `on_front`,
    `pick` (the search's recommendation), `budget_state`, `measured_state` (both / latency /
    top-1 / none) and `x1`, `y1`: where the subnet sits as measured (measured values where
    measured, else predicted)."""
    df = front.copy()
    if df.empty:
        return df
    ms_col = ms_pred(device) if device and ms_pred(device) in df.columns else "ms_pred"
    meas_col = measured_ms(device) if device and measured_ms(device) in df.columns else "measured_ms"
    df["ms"] = df[ms_col].astype(float)
    df["measured"] = df[meas_col].astype(float) if meas_col in df.columns else np.nan
    for col in (MEASURED_TOP1, TOP1_STD):
        df[col] = df[col].astype(float) if col in df.columns else np.nan
    df["objective"] = df[TOP1_OBJECTIVE].astype(float) if TOP1_OBJECTIVE in df.columns else df[TOP1_PRED]
    df["on_front"] = df["on_front"].astype(bool) if "on_front" in df.columns else True
    df["pick"] = df["id"].astype(str).eq(str(pick["id"])) if pick else False
    if pick and "precision" in df.columns and pick.get("precision"):
        df["pick"] &= df["precision"].eq(pick["precision"])
    df["top1_n"] = df["id"].astype(str).map(test_n or {}).astype(float)
    df["top1_lo"], df["top1_hi"] = stats.wilson_interval(df[MEASURED_TOP1], df["top1_n"])
    se = se if se is not None else pd.DataFrame(columns=["rel_se", "ucb_ms"])
    df["rel_se"] = df["id"].map(se["rel_se"]).astype(float)
    df["ucb_ms"] = df["id"].map(se["ucb_ms"]).astype(float).where(df["measured"].notna())
    df["ms_lo"], df["ms_hi"] = stats.latency_interval(df["measured"], df["rel_se"])
    effective = df["measured"].fillna(df["ms"])
    if budget is not None:
        df["budget_state"] = np.where(effective <= budget, "within budget", "over budget")
    else:
        df["budget_state"] = "no budget"
    df["latency_source"] = np.where(df["measured"].notna(), "measured", "predicted")
    has_ms, has_top1 = df["measured"].notna(), df[MEASURED_TOP1].notna()
    df["measured_state"] = np.select([has_ms & has_top1, has_ms, has_top1], ["both", "latency", "top-1"], "none")
    df["x1"] = df["measured"].fillna(df["ms"])
    return df.sort_values(["ms", TOP1_PRED]).reset_index(drop=True)


@dataclass(frozen=True)
class RunFront:
    """A run's front as every page shows it: the frame (`front_frame`) on one device, the search's
    report, its recommendation and the budget."""

    files: RunFiles
    search: SearchRecord | None
    device: str | None  # the device `df`'s latencies are of
    searched: str | None  # the device the search ran for
    budget: float | None
    df: pd.DataFrame

    @property
    def pick(self) -> dict[str, Any] | None:
        return search_pick(self.search)

    @property
    def pick_id(self) -> str | None:
        return self.pick["id"] if self.pick else None

    @property
    def pick_row(self) -> pd.Series | None:
        hit = self.df[self.df["pick"]] if not self.df.empty else self.df
        return None if hit.empty else hit.iloc[0]

    @property
    def ranked_on_objective(self) -> bool:
        """Whether pareto.csv says what the search ranked on (top1_objective)."""
        return TOP1_OBJECTIVE in self.df.columns

    @property
    def risk(self) -> float:
        return self.search.settings.accuracy_risk if self.search else 0.0

    @property
    def clip(self) -> list[float] | None:
        return list(self.search.accuracy_predictor.clip) if self.search and self.search.accuracy_predictor.clip else None

    def objective_text(self) -> str:
        """One line: what the front's top-1 is (the search's objective) and the predictor's clip."""
        if not self.ranked_on_objective:
            return "top-1 as predicted (this pareto.csv predates the risk-adjusted objective)"
        clip = f"; predictions are clipped to {self.clip[0]:.4g}–{self.clip[1]:.4g} % (the accuracy " \
               "table's range)" if self.clip else ""
        return f"the search ranked subnets on predicted top-1 − {self.risk:g} σ{clip}"

    def hypervolume(self, budget: float | None = None) -> float | None:
        """`stats.hypervolume_2d` of the front on the search's objective up to `budget` (default the
        run's): search.json's own number for its device and budget."""
        budget = self.budget if budget is None else budget
        if budget is None or self.df.empty:
            return None
        return stats.hypervolume_2d(self.df["ms"], self.df["objective"], budget)


def load_front(files: RunFiles, device: str | None = None) -> RunFront:
    """The run's front on `device` (default: the searched one). On a device the search did not
    cover, latency is predicted by that device's latency predictor and the front is recomputed on
    it (empty frame when it has none)."""
    search = load_search(files)
    raw = load_pareto(files)
    searched = searched_device(search, raw)
    device = device or searched
    empty = RunFront(files, search, device, searched, budget_of(search, device), pd.DataFrame())
    if raw.empty or TOP1_PRED not in raw.columns or "id" not in raw.columns:
        return empty
    if device and ms_pred(device) not in raw.columns and device != searched:
        try:
            from hwnas.latency import load_predictor

            pred = load_predictor(files.latency_predictor(device))
            raw = raw.assign(**{ms_pred(device): np.asarray(pred.predict(arch_codes(files, raw)), float)})
        except Exception:  # no (readable) predictor for that device: nothing to draw there
            return empty
        raw = raw.drop(columns=["on_front"], errors="ignore")
    df = front_frame(raw, device, empty.budget, pick=search_pick(search), test_n=test_top1_n(files, search),
                     se=latency_se(files, search, device) if device else None)
    if "on_front" not in raw.columns:
        df["on_front"] = stats.front_mask_2d(df["ms"], df["objective"])
    return RunFront(files, search, device, searched, empty.budget, df)


def search_history(search: SearchRecord | None) -> pd.DataFrame:
    """The search's progress per generation, as search.json's ``history`` holds it: records
    (``generation``, ``hypervolume``, ``best_top1_objective``, ...) or one best value per
    generation; long format (generation, measure, value), empty when the search kept none."""
    history = search.history if search else []
    if not history:
        return pd.DataFrame(columns=["generation", "measure", "value"])
    if all(isinstance(h, (int, float)) for h in history):
        df = pd.DataFrame({"best top-1 objective": history})
    else:
        df = pd.DataFrame([h for h in history if isinstance(h, dict)])
    if "generation" not in df.columns:
        df.insert(0, "generation", np.arange(1, len(df) + 1))
    values = [c for c in df.columns if c != "generation" and pd.api.types.is_numeric_dtype(df[c])]
    return df.melt(id_vars=["generation"], value_vars=values, var_name="measure").dropna()


def front_on(files: RunFiles, device: str) -> pd.DataFrame:
    """The run's front re-read for `device` (`load_front(files, device).df`)."""
    return load_front(files, device).df


def explored_points(files: RunFiles, device: str, n: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The subnets the last search scored (`explored.csv`, written with pareto.csv: predicted
    top-1, the search's `objective` when the file has it, and `device` latency), at most `n`; for
    a run searched before that file existed, or on a device it did not search, a random sample of
    the space scored by the run's predictors. Empty when a predictor is missing."""
    path = files.explored
    if path.exists():
        try:
            df = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            df = pd.DataFrame()
        if ms_pred(device) in df.columns and TOP1_PRED in df.columns:
            df = df.rename(columns={ms_pred(device): "ms", TOP1_OBJECTIVE: "objective"})
            df = df[[c for c in ("ms", TOP1_PRED, "objective") if c in df.columns]]
            step = max(1, len(df) // n)
            return df.iloc[::step].reset_index(drop=True).assign(source="search")
    from hwnas.accuracy import load_accuracy_predictor
    from hwnas.run import open_run
    from hwnas.search.problem import load_latency_predictor

    try:
        run = open_run(files.root, create=False)
        latency = load_latency_predictor(files.root, device, run.space.width_mult)
        accuracy = load_accuracy_predictor(files.root)
    except Exception:  # a missing or unreadable predictor: the page says so elsewhere
        return pd.DataFrame()
    m = run.space.sample_matrix(n, seed).astype(np.int32)
    return pd.DataFrame({"ms": np.asarray(latency.predict(m), float),
                         "top1_pred": np.asarray(accuracy.predict(m), float), "source": "space sample"})


def references(files: RunFiles, device: str, search: SearchRecord | None = None) -> pd.DataFrame:
    """Reference models measured on `device` (name, ms), but the search's baselines (points of their own)."""
    from hwnas.search.plot import reference_models

    from hwnas.baselines import profile_key

    keys = [profile_key(b.name, b.resolution) for b in (search.baselines if search else [])]
    rows = reference_models(files.root, device, keys) if files.measurements.exists() else []
    return pd.DataFrame(rows, columns=["name", "ms"])


def baselines(search: SearchRecord | None, device: str | None) -> pd.DataFrame:
    """The search's baselines measured on `device`: name (with its resolution), ms, top1, n_test,
    beaten_by (a subnet id or "none"), its_top1, its_ms, gain (points), ratio (its latency over the
    baseline's, timed together; None when judged on the measurements alone)."""
    cols = ["name", "ms", "top1", "n_test", "beaten_by", "its_top1", "its_ms", "gain", "ratio"]
    rows = []
    for b in search.baselines if search else []:
        if device not in b.measured_ms:
            continue  # not measured on this device
        rows.append({"name": f"{b.name} r{b.resolution}", "ms": b.measured_ms[device], "top1": b.top1,
                     "n_test": b.n_test, "beaten_by": b.dominated_by or "none",
                     "its_top1": _number(b.dominated_by_top1), "its_ms": _number(b.dominated_by_ms),
                     "gain": _number(b.top1_gain),
                     "ratio": _number(b.latency_ratio.ratio) if b.latency_ratio else None})
    return pd.DataFrame(rows, columns=cols)


def _number(value: Any) -> float | None:
    """A finite number from a run file, or None (the file may come from someone else)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value) else None


def tight_domain(values, pad: float = 0.05) -> list[float] | None:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    span = (hi - lo) or max(abs(hi), 1e-3) * 0.1
    return [lo - pad * span, hi + pad * span]


# -- exports ---------------------------------------------------------------------------------------
def _bundle_device(folder: Path, meta: dict[str, Any], verify: dict[str, Any]) -> str:
    if verify.get("device"):
        return str(verify["device"])
    if meta.get("id") and folder.name.startswith(meta["id"] + "-"):
        return folder.name[len(meta["id"]) + 1:]
    return folder.name.rsplit("-", 2)[-1]


def load_exports(files: RunFiles, front: pd.DataFrame | None = None,
                 search: SearchRecord | None = None) -> pd.DataFrame:
    """One row per bundle under RUN/exports: its verification status, measured and predicted
    numbers, and flags: not in the current pareto.csv (orphaned), from an earlier search (stale),
    for another device than the searched one, measured over the current budget of its device."""
    cols = ["bundle", "id", "device", "status", "measured_top1", "top1_n", "int8_drop", "measured_ms",
            "predicted_top1", "predicted_ms", "budget_ms", "over_budget", "search_id", "current_search",
            "in_front", "flags", "path"]
    if not files.exports.exists():
        return pd.DataFrame(columns=cols)
    front = load_pareto(files) if front is None else front
    search = load_search(files) if search is None else search
    searched = searched_device(search, front)
    current = search.search_id if search else None
    if current is None and not front.empty and "search_id" in front.columns:
        current = str(front["search_id"].iloc[0])
    ids = set(front["id"]) if not front.empty and "id" in front.columns else set()
    rows = []
    for path in sorted(files.exports.glob("*/model.json")):
        folder = path.parent
        try:
            meta = read_meta(folder)  # checked against the bundle schema (`hwnas.export.record`)
        except (OSError, BundleError) as err:
            rows.append({"bundle": folder.name, "status": "unreadable", "flags": f"model.json is unreadable: {err}",
                         "in_front": False, "path": str(folder)})
            continue
        record = BundleRecord.model_validate(meta)
        try:
            verify = json.loads((folder / "verify.json").read_text())
        except (OSError, json.JSONDecodeError):
            verify = {}
        device = _bundle_device(folder, meta, verify)
        ms, within = bundle_latency(meta)
        if ms is None:
            ms, within = bundle_latency(verify)
        predicted = meta.get("predicted") or {}
        sid = (predicted.get("row") or {}).get("search_id")
        budget = budget_of(search, device)
        # the bundle's own judgement by the search's rule; a bare comparison for bundles without one
        over = within is False if within is not None else bool(budget is not None and ms is not None and ms > budget)
        status = record.status
        if verify and not verify.get("passed", True):
            status = "failed"
        flags = []
        if record.id not in ids:
            flags.append("orphaned: not in the current pareto.csv")
        elif current and sid and sid != current:
            flags.append("stale: exported from an earlier search")
        if searched and device != searched:
            flags.append(f"for {device}, not the searched {searched}")
        if over:
            flags.append(f"over the current {budget:.4g} ms budget")
        if status != "verified":
            flags.append(f"verification {status}")
        top1, drop = bundle_top1(meta)
        rows.append({"bundle": folder.name, "id": record.id, "device": device, "status": status,
                     "measured_top1": top1, "top1_n": record.accuracy.n, "int8_drop": drop,
                     "measured_ms": ms, "predicted_top1": predicted.get("top1"),
                     "predicted_ms": predicted.get("latency_ms"), "budget_ms": budget, "over_budget": over,
                     "search_id": sid, "current_search": bool(current and sid == current),
                     "in_front": record.id in ids, "flags": "; ".join(flags) or "ok", "path": str(folder)})
    return pd.DataFrame(rows, columns=cols)


def load_finetune(files: RunFiles, arch_id: str) -> dict[str, Any] | None:
    """What `hwnas finetune` recorded for a subnet (epochs, top-1 before / after), or None."""
    from hwnas.supernet.finetune import STEM

    try:
        record = json.loads((files.finetuned(arch_id) / f"{STEM}.json").read_text())["extra"]["finetune"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def bundle_top1(meta: dict[str, Any]) -> tuple[float | None, float | None]:
    """(top-1 of what the bundle ships, its drop against the fp32 subnet): an INT8 or bf16 bundle
    ships the reduced-precision model, so its measured top-1 is that model's (model.json's
    ``accuracy.int8`` / ``accuracy.bf16``), not the fp32 subnet's."""
    acc = meta.get("accuracy") or {}
    for precision in ("int8", "bf16"):
        record = acc.get(precision) or {}
        if record.get(f"top1_{precision}") is not None:
            return record[f"top1_{precision}"], record.get("drop")
    return acc.get("top1"), None


def bundle_signature(folder: Path) -> tuple:
    """(name, size, mtime_ns) of every file: a zip of the bundle is rebuilt only when it changes."""
    folder = Path(folder)
    return tuple((p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns)
                 for p in sorted(folder.rglob("*")) if p.is_file() for st in [p.stat()])


def zip_folder(folder: Path) -> bytes:
    import io
    import zipfile

    folder = Path(folder)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder.parent))
    return buf.getvalue()


# -- devices ---------------------------------------------------------------------------------------
def device_pairs(matrix: pd.DataFrame) -> pd.DataFrame:
    """Each pair of devices: subnets both measured (n), Kendall tau, and a warning when n is small."""
    rows = []
    cols = list(matrix.columns)
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            both = matrix[[a, b]].dropna()
            n = len(both)
            tau = float(both[a].corr(both[b], method="kendall")) if n >= 3 else None
            rows.append({"device A": a, "device B": b, "shared subnets": n, "Kendall τ": tau,
                         "note": "ok" if n >= MIN_SHARED else
                         f"only {n} shared subnets (< {MIN_SHARED}): τ is not reliable"})
    return pd.DataFrame(rows)


def device_matrix_all(files: RunFiles) -> pd.DataFrame:
    """Subnets measured on more than one device: rows = subnet id, columns = device (NaN where a
    device did not measure it, so each pair counts its own n); empty below two devices."""
    df = load_measurements(files)
    if df.empty:
        return df
    df = df[df["kind"] == "subnet"]
    table = df.pivot_table(index="key", columns="device", values="corrected_ms", aggfunc="median")
    return table if table.shape[1] > 1 else pd.DataFrame()


# -- training ----------------------------------------------------------------------------------------
def phase_bounds(log: pd.DataFrame) -> pd.DataFrame:
    """Each phase in training order: first and last overall epoch, and its order number."""
    if log.empty or "phase" not in log.columns:
        return pd.DataFrame(columns=["phase", "order", "start", "end"])
    order = list(dict.fromkeys(log["phase"]))
    g = log.groupby("phase", sort=False)["epoch_total"].agg(["min", "max"]).reindex(order)
    return pd.DataFrame({"phase": order, "order": range(1, len(order) + 1), "start": g["min"].to_numpy(),
                         "end": g["max"].to_numpy()})


def distillation_weight(stem: Path | None) -> float | None:
    """The checkpoint's training `kd_ratio` (the distillation term's weight), None when unknown."""
    from hwnas.supernet.checkpoint_meta import load_checkpoint_meta

    if stem is None:
        return None
    try:
        config = (load_checkpoint_meta(stem).get("extra") or {}).get("config") or {}
    except Exception:  # noqa: BLE001 - a missing or broken checkpoint: the loss is named generically
        return None
    value = config.get("kd_ratio")
    return float(value) if isinstance(value, (int, float)) else None


def loss_terms(log: pd.DataFrame, kd_ratio: float | None) -> pd.Series:
    """What each epoch's training loss sums: cross-entropy alone in "full", cross-entropy plus
    `kd_ratio` x distillation in the later phases (progressive shrinking distils from the largest
    network); a record's own `distill` field, when it has one, decides."""
    if log.empty:
        return pd.Series(dtype=str)
    distils = log["distill"].astype(bool) if "distill" in log.columns else log["phase"].ne("full")
    if kd_ratio == 0:
        distils = pd.Series(False, index=log.index)
    weight = "" if kd_ratio in (None, 1.0) else f"{kd_ratio:g} × "
    return pd.Series(np.where(distils, f"cross-entropy + {weight}distillation", "cross-entropy"), index=log.index)
