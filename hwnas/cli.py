"""The `hwnas` command line: one Typer app, each sub-command a thin wrapper over a library call.

User errors (`HwnasError`) print one line to stderr and exit with code 2; `--debug` shows the
traceback instead.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table
from typer.core import TyperGroup

from hwnas import __version__
from hwnas.errors import HwnasError, InputError, MissingExtraError, SettingError
from hwnas.extras import install_hint, missing_extra, need
from hwnas.families import DEFAULT_FAMILY, family_names, get_family
from hwnas.progress import OutputConsole


class _Interrupted(BaseException):
    """A Ctrl-C on its way to `main`, which says that what was written is kept and the command
    resumes (a KeyboardInterrupt would not get there: Typer makes it a quiet exit 130)."""


class _Commands(TyperGroup):
    """Every command group (every command runs inside the root's `invoke`)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as err:
            raise _Interrupted from err
        except ModuleNotFoundError as err:  # the innermost group names the command
            if (extra := missing_extra(err)) is None:
                raise
            command = " ".join(filter(None, [ctx.command_path, ctx.invoked_subcommand]))
            raise MissingExtraError(f"{command} needs the '{extra}' extra: "
                                    f"{install_hint(extra)}") from err

    def format_commands(self, ctx, formatter) -> None:
        """Plain help (into a pipe): each command's first paragraph whole, wrapped, where click
        would cut it to the width with '...'."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, " ".join((cmd.help or "").split("\n\n")[0].split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


# Help is drawn in rich panels on a terminal; into a pipe or a file it is click's plain text, which
# wraps instead of cutting option names and help to a width ("--accuracy-sampl…").
HELP_MARKUP = "rich" if sys.stdout.isatty() else None

app = typer.Typer(
    cls=_Commands,
    rich_markup_mode=HELP_MARKUP,
    name="hwnas",
    help="Hardware-aware NAS: one once-for-all supernet, profiled and searched for every device.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _group(help: str) -> typer.Typer:
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=HELP_MARKUP, cls=_Commands)


_DEFAULT = get_family(DEFAULT_FAMILY)  # the default family: help texts take its names from here


def _or(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


space_app = _group(f"Inspect and sample a family's search space "
                   f"({', '.join(get_family(n).title for n in family_names())}: --family).")
app.add_typer(space_app, name="space")
supernet_app = _group("Once-for-all supernet: statistics, subnets.")
app.add_typer(supernet_app, name="supernet")
devices_app = _group("Target devices: built-in and from a devices YAML.")
app.add_typer(devices_app, name="devices")
latency_app = _group("Latency predictors: fit from measurements, predict, evaluate.")
app.add_typer(latency_app, name="latency")
accuracy_app = _group("Accuracy of subnets: the measured table, the predictor, its honesty.")
app.add_typer(accuracy_app, name="accuracy")
agent_app = _group("Remote device agents: run one on the target, profile it from here.")
app.add_typer(agent_app, name="agent")

DevicesOpt = typer.Option(None, "--devices", help="YAML file of user devices "
                          "(see experiments/devices.example.yaml).")

# into a pipe or a file these print every line whole (no width to cut to); on a terminal, they fit it
console = OutputConsole()
err_console = OutputConsole(stderr=True)
_state = {"debug": False}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hwnas {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    _state["debug"] = debug


# -- shared option helpers -------------------------------------------------------------------
SpaceOpt = typer.Option(None, "--space", help="YAML file with ks/e/d/r choices and width_mult "
                        "(r may be a range like '32:64:4'). Default: Once-for-All's space.")


_OTHER_FAMILIES = _or(n for n in family_names() if n != DEFAULT_FAMILY)
FAMILY_HELP = f"Search-space family: {DEFAULT_FAMILY} (the default), {_OTHER_FAMILIES}."
_DEFAULT_COLUMNS = ", ".join(f"{g.name}_0..{g.name}_{g.count - 1}" for g in _DEFAULT.gene_groups())


def family_option(help: str = FAMILY_HELP):
    """--family everywhere: None means the default family unless a run or a config names its own."""
    return typer.Option(None, "--family", help=help)


FamilyOpt = family_option()
DataOpt = typer.Option(None, "--data", help="Dataset to evaluate subnets on: imagefolder:PATH "
                       "(train/ and val/ class folders, e.g. ImageNet), fashion-mnist (embedded) or "
                       "fashion-mnist:PATH (the original idx files), cifar10:PATH, cifar100:PATH or "
                       "mnist-embedded. Default: the supernet's own.")


SEED_LIMIT = 2**32  # numpy's and Optuna's seeds are unsigned 32-bit


def _check_seed(value: Optional[int]) -> Optional[int]:
    """Refused while the command line is parsed, so a bad seed writes nothing (no run folder, no
    Optuna journal) and is one line, not numpy's ValueError deep inside a stage."""
    if value is not None and not 0 <= value < SEED_LIMIT:
        raise InputError(f"--seed must be within 0..{SEED_LIMIT - 1}, got {value}")
    return value


def seed_option(default: Optional[int] = 0, help: str = "Random seed."):
    return typer.Option(default, "--seed", callback=_check_seed, help=help)


def _data_config(spec: Optional[str]):
    if spec is None:
        return None
    from hwnas.supernet.data import DataConfig

    return DataConfig.from_spec(spec)


def _load_space(path: Optional[Path], width_mult: Optional[float] = None):
    """The default family's space from a --space file (or Once-for-All's)."""
    space = type(_DEFAULT.default_space()).from_file(path) if path else _DEFAULT.default_space()
    if width_mult is not None:
        space = _DEFAULT.space_from_dict({**space.to_dict(), "width_mult": width_mult})
    return space


def _write_or_print(text: str, out: Optional[Path]) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    from hwnas.fileio import atomic_write_text

    atomic_write_text(out, text)
    err_console.print(f"wrote {out}")


def _renamed(new: str, value: Any, old: str, old_value: Any, default: Any = None) -> Any:
    """An option renamed for one name per concept across commands: its old name stays as a
    hidden alias that still works (both at once is refused)."""
    if old_value is None:
        return default if value is None else value
    if value is not None:
        raise InputError(f"{old} is the old name of {new}; give only {new}")
    return old_value


def old_name(new: str, *names: str):
    """The hidden alias option of a renamed option `new`."""
    return typer.Option(None, *names, hidden=True, help=f"Old name of {new} (still accepted).")


def _table(*headers: str, **kw: Any) -> Table:
    """A rich table whose cells fold instead of being cut with '…' (a name cut short is one a
    script cannot find) and whose first column (names, ids) never wraps."""
    table = Table(**kw)
    for i, header in enumerate(headers):
        table.add_column(header, overflow="fold", no_wrap=i == 0)
    return table


class ListFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def format_option(formats: str = "table (the default), json or csv"):
    return typer.Option(None, "--format", help=f"Output format: {formats}.")


def _print_rows(rows: list[dict[str, Any]], fmt: ListFormat, table: Table) -> None:
    """A list command's rows: `table` as drawn, or every field as JSON or CSV (for scripts)."""
    if fmt is ListFormat.json:
        typer.echo(json.dumps(rows, indent=2))
    elif fmt is ListFormat.csv:
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        console.print(table)


# -- space -----------------------------------------------------------------------------------
class InfoFormat(str, Enum):
    table = "table"
    json = "json"


@space_app.command("info")
def space_info(space_file: Optional[Path] = SpaceOpt,
               fmt: Optional[InfoFormat] = format_option("table (the default) or json"),
               as_json: bool = typer.Option(False, "--json", hidden=True, help="Old name of --format json."),
               family: Optional[str] = FamilyOpt,
               ) -> None:
    """Print the space's choices and its exact size."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.families.space import space_info as describe

    fmt = _renamed("--format", fmt, "--json", InfoFormat.json if as_json else None, InfoFormat.table)
    family = family or DEFAULT_FAMILY
    fam = get_family(family)
    if family != DEFAULT_FAMILY and space_file is not None:
        raise InputError(f"--space files describe {DEFAULT_FAMILY} spaces; leave it out with --family {family}")
    info = describe(_load_space(space_file) if family == DEFAULT_FAMILY else fam.default_space())
    if fmt is InfoFormat.json:  # sizes exceed JSON's safe integer range
        for key in ("size", "size_per_resolution", "networks_per_resolution"):
            info[key] = None if info[key] is None else str(info[key])
        typer.echo(json.dumps(info, indent=2))
        return
    original = info["once_for_all_class"] or "no Once-for-All original"
    table = _table("", "", title=f"{info['title']} search space ({original})",
                   show_header=False)
    for name, gene in info["genes"].items():
        table.add_row(f"{name} ({gene['count']} genes)", str(gene["choices"]))
    r = info["resolutions"]
    table.add_row("resolutions (r)", f"{r[0]}..{r[-1]} ({len(r)} values)")
    table.add_row("width multiplier", f"{info['width_mult']} (published: "
                  + (", ".join(info["published"].values()) or "none") + ")")
    table.add_row("table columns", f"{', '.join(info['columns'][:4])}, ... {info['columns'][-1]} "
                  f"({len(info['columns'])})")
    n = info["size_per_resolution"]
    if n is not None:
        table.add_row("subnets per resolution", f"{n:,} (~10^{len(str(n)) - 1})")
        table.add_row("subnets in all", f"{info['size']:,}")
    table.add_row("smallest", info["smallest"])
    table.add_row("largest", info["largest"])
    console.print(table)


class SampleFormat(str, Enum):
    json = "json"
    csv = "csv"


@space_app.command("sample", help=f"Sample subnets ({_DEFAULT.title}: uniformly over distinct networks).")
def space_sample(
    samples: Optional[int] = typer.Option(None, "--samples", help="How many subnets to sample (default 10)."),
    num: Optional[int] = old_name("--samples", "-n", "--num"),
    fmt: SampleFormat = typer.Option(SampleFormat.json, "--format", help="json (OFA dicts) or csv (flat rows)."),
    seed: Optional[int] = seed_option(None, "Random seed (default: fresh entropy)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write to this file instead of stdout."),
    space_file: Optional[Path] = SpaceOpt,
    family: Optional[str] = FamilyOpt,
) -> None:
    """Sample subnets (the help names the default family)."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.families.tables import archs_frame

    n = _renamed("--samples", samples, "-n/--num", num, 10)
    if n < 1:
        raise InputError(f"--samples must be at least 1, got {n}")
    family = family or DEFAULT_FAMILY
    fam = get_family(family)
    if family != DEFAULT_FAMILY and space_file is not None:
        raise InputError(f"--space files describe {DEFAULT_FAMILY} spaces; leave it out with --family {family}")
    space = _load_space(space_file) if family == DEFAULT_FAMILY else fam.default_space()
    archs = space.sample(n, seed)
    if fmt is SampleFormat.json:
        text = json.dumps([json.loads(a.to_json()) for a in archs], indent=None) + "\n"
    else:
        text = archs_frame(archs).to_csv(index=False)
    _write_or_print(text, out)


# -- devices --------------------------------------------------------------------------------
@devices_app.command("list")
def devices_list(devices_file: Optional[Path] = DevicesOpt,
                 fmt: Optional[ListFormat] = format_option(),
                 as_json: bool = typer.Option(False, "--json", hidden=True, help="Old name of --format json."),
                 check: bool = typer.Option(False, "--check", help="Also ask each remote device's agent "
                                            "(sends its token); without it no host is contacted."),
                 ) -> None:
    """Every device, its backend and options, and whether it can run here (and why not).
    json and csv give every field (`available`: empty when the device runs here, else why not)."""
    from rich.markup import escape

    from hwnas.devices import list_devices

    fmt = _renamed("--format", fmt, "--json", ListFormat.json if as_json else None, ListFormat.table)
    rows = list_devices(devices_file, check_remote=check)
    table = _table("device", "backend", "options", "status", "source")
    for r in rows:
        status = "[green]ok[/]" if r["available"] is None else f"[yellow]unavailable:[/] {escape(r['available'])}"
        table.add_row(escape(r["name"]), r["backend"], escape(str(r["options"])), status, r["source"])
    _print_rows(rows, fmt, table)


@devices_app.command("show")
def devices_show(name: str = typer.Argument(..., help="Device name."),
                 devices_file: Optional[Path] = DevicesOpt) -> None:
    """One device's settings, availability, runtime versions and this host's anchors, as JSON."""
    from hwnas.devices import get_backend, get_device
    from hwnas.profiling.anchors import AnchorBook

    device = get_device(name, devices_file)
    backend = get_backend(name, devices_file)
    reason = backend.available()
    book = AnchorBook()
    info = {**device.model_dump(mode="json"), "available": reason is None, "reason": reason,
            "versions": backend.versions() if reason is None else {},
            "anchors": {"book": str(book.path), "entries": book.entries(device.name)}}
    typer.echo(json.dumps(info, indent=2))


# -- latency --------------------------------------------------------------------------------
def _check_out_file(out: Optional[Path]) -> None:
    """--out names a file to write: refuse a folder before any work."""
    if out is not None and out.is_dir():
        raise InputError(f"--out {out} is a folder; give the path of a file to write (it may "
                         "be inside that folder)")


# Below this many rows a latency fit's cross-validation scores a handful of points: the chosen kind
# and its numbers are luck (3 rows measured tau -0.33, 10 rows of the same table 0.73).
FEW_LATENCY_ROWS = 10


def _print_fit(pred, report: dict) -> None:
    m = report["chosen_metrics"]
    console.print(f"chose [bold]{report['chosen']}[/] by {report['folds']}-fold CV over {report['n_rows']} rows: "
                  f"{100 * m['within_10']:.1f}% within ±10%, {100 * m['within_5']:.1f}% within ±5%, "
                  f"MAPE {m['mape']:.1f}%, Kendall tau {m['kendall_tau']:.3f}", highlight=False)
    if report["n_rows"] < FEW_LATENCY_ROWS:
        err_console.print(f"warning: {report['n_rows']} rows are too few to trust this choice or its CV "
                          f"numbers; measure at least {FEW_LATENCY_ROWS} subnets (`hwnas profile --samples "
                          "auto` profiles until the predictor stops improving)", highlight=False)
    err_console.print(f"wrote {report['path']}")


@latency_app.command("fit")
def latency_fit(
    run: Optional[Path] = typer.Option(None, "--run", help="Fit from this run's measurements (with --device)."),
    device: Optional[str] = typer.Option(None, "--device", help="Device whose measurements to fit."),
    table: Optional[Path] = typer.Option(None, "--table", help="Or: a CSV of flat rows + a latency column."),
    target: Optional[str] = typer.Option(None, "--target", help="Latency column in ms (default with --run: "
                                         "corrected_ms)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Predictor JSON (default with --run: "
                                       "RUN/predictors/latency-DEVICE.json)."),
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Width multiplier of the rows' "
                                               "network (default: the run's, or 1.0)."),
    classes: Optional[int] = typer.Option(None, "--classes", help="Classes of the rows' network "
                                          "(default: the run's, or 1000)."),
    base: Optional[Path] = typer.Option(None, "--base", help="Predictor of another device: few-shot transfer."),
    kind: list[str] = typer.Option([], "--kind", help="Restrict to these predictor kinds (repeatable)."),
    entries: Optional[Path] = typer.Option(None, "--entries", help="Per-block entries CSV for a lookup table."),
    seed: int = seed_option(),
    family: Optional[str] = family_option(f"With --table: the rows' search-space family: {DEFAULT_FAMILY} (the "
                                          f"default), {_OTHER_FAMILIES}. A run's is its own."),
) -> None:
    """Fit a device's latency predictor, choosing the best kind by cross-validation."""
    from hwnas.latency.api import fit_from_run, fit_from_table

    kinds = kind or None
    if (run is None) == (table is None):
        raise InputError("give either --run DIR --device D, or --table FILE.csv --target COLUMN --out PRED.json")
    if classes is not None and classes < 1:
        raise InputError(f"--classes must be at least 1, got {classes}")
    if width_mult is not None and not 0 < width_mult < float("inf"):
        raise InputError(f"--width-mult must be positive, got {width_mult}")
    _check_out_file(out)
    if run is not None:
        from hwnas.run import open_run

        if device is None:
            raise InputError("--run needs --device (the device whose measurements to fit)")
        cfg = open_run(run, create=False)
        if family is not None and family != cfg.family.name:
            raise InputError(f"run {run} is an {cfg.family.name} run; leave out --family {family}")
        pred, report = fit_from_run(run, device, out_json=out, target=target or "corrected_ms",
                                    width_mult=width_mult or cfg.space.width_mult,
                                    n_classes=classes or cfg.n_classes, base=base, kinds=kinds, seed=seed,
                                    family=cfg.family.name)
    else:
        if target is None or out is None:
            raise InputError("--table needs --target COLUMN (latency in ms) and --out PRED.json")
        from hwnas.families import DEFAULT_FAMILY, get_family

        fam = get_family(family or DEFAULT_FAMILY)
        pred, report = fit_from_table(table, target, out,
                                      width_mult=width_mult or fam.default_width,
                                      n_classes=classes or 1000, base=base, kinds=kinds, entries=entries,
                                      device=device or "", seed=seed, family=fam.name)
        report["path"] = str(out)
    _print_fit(pred, report)


@latency_app.command("predict")
def latency_predict(
    predictor: Path = typer.Option(..., "--predictor", help="Predictor JSON from `hwnas latency fit`."),
    table: Path = typer.Option(..., "--table", help="CSV of flat rows: r and the "
                               f"predictor's family's genes ({DEFAULT_FAMILY}: {_DEFAULT_COLUMNS})."),
    out: Path = typer.Option(..., "--out", help="Where to write the rows with a predicted_ms column."),
    column: str = typer.Option("predicted_ms", "--column", help="Name of the added column."),
) -> None:
    """Predict the latency of every row of a table."""
    from hwnas.latency.api import predict_table

    _check_out_file(out)
    df = predict_table(predictor, table, out, column=column)
    err_console.print(f"wrote {len(df)} rows to {out}")


@latency_app.command("eval")
def latency_eval(
    table: Optional[Path] = typer.Option(None, "--table", help="Measured table (flat rows + latency column)."),
    target: Optional[str] = typer.Option(None, "--target", help="Latency column in ms."),
    run: Optional[Path] = typer.Option(None, "--run", help="Or: a run's measurements (with --device)."),
    device: Optional[str] = typer.Option(None, "--device", help="With --run: the device whose measurements "
                                         "to evaluate on."),
    predictor: Optional[Path] = typer.Option(None, "--predictor", help="Also score this predictor on every row."),
    kind: Optional[str] = typer.Option(None, "--kind", help="Learning curve of one kind (default: CV choice)."),
    sizes: str = typer.Option("10,20,50,100,200,500", "--sizes", help="Training rows of the learning curve."),
    test_fraction: float = typer.Option(0.25, "--test-fraction", help="Share of the rows held out to "
                                        "score the learning curve on."),
    repeats: int = typer.Option(1, "--repeats", help="Average the curve over reshuffles."),
    repeat_column: Optional[str] = typer.Option(None, "--repeat-column", help="A second measurement of the "
                                                "same rows: the repeatability to compare with."),
    base: Optional[Path] = typer.Option(None, "--base", help="Few-shot transfer from this predictor."),
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Default: the run's, else "
                                               f"the family's ({DEFAULT_FAMILY}: {_DEFAULT.default_width})."),
    classes: int = typer.Option(1000, "--classes", help="With --table: classes of the rows' network."),
    seed: int = seed_option(),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the full report as JSON."),
    family: Optional[str] = family_option(f"With --table: the rows' search-space family: {DEFAULT_FAMILY} (the "
                                          f"default), {_OTHER_FAMILIES}. A run's is its own."),
) -> None:
    """Held-out accuracy of latency prediction: within ±5/10%, RMSE, MAPE, Kendall, Spearman, learning curve."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.latency.api import evaluate_predictor, evaluate_run

    try:
        size_list = [int(v) for v in sizes.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
    if not 0 < test_fraction < 1:
        raise InputError(f"--test-fraction must be in (0, 1), got {test_fraction}")
    _at_least_one(("--repeats", repeats))
    _check_out_file(out)
    settings = dict(predictor_json=predictor, kind=kind, sizes=size_list, test_fraction=test_fraction,
                    repeats=repeats, repeat_column=repeat_column, base=base, seed=seed, out_json=out)
    if run is not None:
        if device is None:
            raise InputError("--run needs --device")
        if family is not None or width_mult is not None:
            raise InputError("--family and --width-mult describe --table rows; a run has its own, leave them out")
        report = evaluate_run(run, device, target or "corrected_ms", **settings)
    elif table is None or target is None:
        raise InputError("give --table FILE.csv --target COLUMN, or --run DIR --device D")
    else:
        fam = get_family(family or DEFAULT_FAMILY)
        width = width_mult if width_mult is not None else fam.default_width
        report = evaluate_predictor(table, target, width_mult=width, n_classes=classes, family=fam.name, **settings)
    metrics = ("within_5", "within_10", "rmse_ms", "mape", "kendall_tau", "spearman_rho")
    if "heldout" in report:
        h = report["heldout"]
        console.print("predictor on every row: " + ", ".join(f"{k} {h[k]:.3f}" for k in metrics), highlight=False)
    if "repeatability" in report:
        r = report["repeatability"]
        console.print(f"repeatability ({r['column']}): {100 * r['within_5']:.1f}% within ±5%, "
                      f"{100 * r['within_10']:.1f}% within ±10%", highlight=False)
    held_out = f" ({report['learning_curve'][0]['n_test']} held out)" if report["learning_curve"] else ""
    curve = _table("train rows", "within ±5%", "within ±10%", "RMSE ms", "MAPE %", "Kendall", "Spearman",
                   "FLOPs-only ±5/10%", "FLOPs-only Kendall", "before priors ±5/10%", "before priors Kendall",
                   title="learning curve" + held_out)
    for row in report["learning_curve"]:
        f, t = row["flops_baseline"], row["today_baseline"]
        curve.add_row(str(row["n_train"]), f"{100 * row['within_5']:.1f}", f"{100 * row['within_10']:.1f}",
                      f"{row['rmse_ms']:.4f}", f"{row['mape']:.1f}", f"{row['kendall_tau']:.3f}",
                      f"{row['spearman_rho']:.3f}", f"{100 * f['within_5']:.0f}/{100 * f['within_10']:.0f}",
                      f"{f['kendall_tau']:.3f}", f"{100 * t['within_5']:.0f}/{100 * t['within_10']:.0f}",
                      f"{t['kendall_tau']:.3f}")
    console.print(curve)


# -- agent ----------------------------------------------------------------------------------
@agent_app.command("serve")
def agent_serve(
    token_file: Path = typer.Option(..., "--token-file", help="File holding the shared token "
                                    "(make one with `hwnas agent token FILE`)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 for the network)."),
    port: int = typer.Option(8765, "--port", help="Port to listen on (0: any free port, printed in the banner)."),
    devices_file: Optional[Path] = DevicesOpt,
    state_dir: Optional[Path] = typer.Option(None, "--state-dir", help="Where finished results are kept "
                                             "(default ~/.local/state/hwnas/agent)."),
    max_request_bytes: int = typer.Option(64 * 2**20, "--max-request-bytes", help="Largest request accepted."),
    run_timeout: Optional[float] = typer.Option(None, "--run-timeout", help="Seconds one inference of one "
                                                "model may take; longer: stopped, 422 (default 10)."),
    compile_timeout: Optional[float] = typer.Option(None, "--compile-timeout", help="Seconds building and "
                                                    "loading one model may take (default 45; 900 on TensorRT)."),
    request_timeout: Optional[float] = typer.Option(None, "--request-timeout", help="Seconds one whole "
                                                    "request may take (default 600)."),
    max_queue: Optional[int] = typer.Option(None, "--max-queue", help="Requests that may wait for the "
                                            "device; more are answered 503 busy with Retry-After (default 4)."),
    max_connections: Optional[int] = typer.Option(None, "--max-connections", help="Open connections; a new "
                                                  "one displaces the oldest unauthenticated one (default 64)."),
    header_timeout: Optional[float] = typer.Option(None, "--header-timeout", help="Seconds a connection has "
                                                   "to send its headers (default 10)."),
    receive_timeout: Optional[float] = typer.Option(None, "--receive-timeout", help="Seconds a connection "
                                                    "has to send its whole request (default 120)."),
    stop_grace: Optional[float] = typer.Option(None, "--stop-grace", help="Seconds a measurement may "
                                               "finish after SIGTERM before it is cancelled (default 4)."),
    tls: bool = typer.Option(False, "--tls", help="Speak TLS with a self-signed certificate kept beside the "
                             "token file (made once with openssl); prints the SHA-256 fingerprint clients "
                             "pin as tls_fingerprint."),
) -> None:
    """Serve this machine's devices to remote profilers (ONNX in, latency stats out)."""
    from hwnas.devices.agent import AgentLimits, serve

    if not 0 <= port < 65536:
        raise InputError(f"--port must be within 0..65535 (0: any free port), got {port}")
    given = {"run_timeout_s": run_timeout, "compile_timeout_s": compile_timeout,
             "request_timeout_s": request_timeout, "max_queue": max_queue,
             "max_connections": max_connections, "header_timeout_s": header_timeout,
             "receive_timeout_s": receive_timeout, "stop_grace_s": stop_grace}
    limits = AgentLimits(**{k: v for k, v in given.items() if v is not None})
    serve(host, port, token_file, devices_file, state_dir, max_request_bytes, limits=limits, tls=tls,
          echo=lambda msg: err_console.print(msg, highlight=False))


@agent_app.command("token")
def agent_token(path: Path = typer.Argument(..., help="Where to write the new token (mode 0600).")) -> None:
    """Create a random token file for `hwnas agent serve` and the devices that use it."""
    from hwnas.devices.agent import create_token_file

    create_token_file(path)
    err_console.print(f"wrote a new token to {path}; copy it to the agent machine")


@agent_app.command("health")
def agent_health(device: str = typer.Argument(..., help="A remote device (with host/port) from --devices."),
                 devices_file: Optional[Path] = DevicesOpt) -> None:
    """Ask a remote device's agent how it is: versions, devices, counters."""
    from hwnas.devices import get_backend

    backend = get_backend(device, devices_file)
    if not hasattr(backend, "health"):
        raise InputError(f"device '{device}' is local, not served by an agent")
    typer.echo(json.dumps(backend.health(), indent=2))


# -- profile --------------------------------------------------------------------------------
@app.command("profile")
def profile_cmd(
    device: list[str] = typer.Option(..., "--device", help="Device to profile (repeat for several)."),
    run: Path = typer.Option(..., "--run", help="Run directory (created if new)."),
    samples: str = typer.Option("100", "--samples", help="Subnets to measure, spread over the MACs range; or "
                                "'auto': measure where the latency predictor is least sure until its "
                                "cross-validated error stops improving."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="With --samples auto: stop "
                                                "after this many minutes per device."),
    reference: list[str] = typer.Option([], "--reference", help="Also time a timm model, e.g. "
                                        "timm:mobilenetv3_large_100 (no weights needed)."),
    supernet: Optional[Path] = typer.Option(None, "--supernet", help="Supernet checkpoint stem "
                                            "(default: the shipped one)."),
    devices_file: Optional[Path] = DevicesOpt,
    rounds: int = typer.Option(15, "--rounds", help="Rounds per subnet, each beside the reference "
                               "(drift correction)."),
    runs: int = typer.Option(10, "--runs", help="Timed runs per round."),
    seed: int = seed_option(help="Seed of the subnet selection."),
    blocks: bool = typer.Option(False, "--blocks", help="Also time every stem/block/head variant at 3 "
                                "resolutions (entries of a lookup-table predictor)."),
    recalibrate: bool = typer.Option(False, "--recalibrate", help="Measure a fresh anchor (the reference's "
                                     "latency) for devices new to this run instead of reusing this "
                                     "host's."),
    data: Optional[str] = DataOpt,
) -> None:
    """Measure subnets on devices into the run's measurement store (reruns skip what exists)."""
    from hwnas.profiling.protocol import ProtocolSettings
    from hwnas.profiling.stage import check_devices, profile
    from hwnas.progress import make_progress
    from hwnas.run import open_run

    from hwnas.latency.auto_profile import AutoSettings, profile_auto

    if samples.strip().lower() == "auto":
        if time_budget is not None and not time_budget > 0:
            raise InputError(f"--time-budget is in minutes and must be positive, got {time_budget}")
        chosen: Any = AutoSettings(seed=seed, budget_s=None if time_budget is None else 60 * time_budget)
        chosen.check()
    elif time_budget is not None:
        raise InputError("--time-budget goes with --samples auto")
    else:
        try:
            chosen = int(samples)
        except ValueError:
            raise InputError(f"--samples must be a number of subnets or 'auto', got {samples!r}") from None
    _at_least_one(("--rounds", rounds), ("--runs", runs))
    check_devices(device, devices_file, reference)  # before the run folder is made
    cfg = open_run(run, supernet, data=_data_config(data))
    protocol = ProtocolSettings(rounds=rounds, runs=runs, seed=seed)
    with make_progress(err_console) as bar:
        tasks: dict[str, Any] = {}

        def update(dev: str, done: int, total: int, key: str) -> None:
            if dev not in tasks:
                tasks[dev] = bar.add_task(f"profile {dev}", total=total, info="")
            bar.update(tasks[dev], completed=done, total=total, info=key)

        common = dict(devices_file=devices_file, references=reference, protocol=protocol, progress=update,
                      blocks=blocks, recalibrate=recalibrate)
        results = (profile_auto(cfg, device, chosen, **common,
                                log=lambda msg: err_console.print(msg, highlight=False))
                   if isinstance(chosen, AutoSettings) else profile(cfg, device, chosen, **common))
    table = _table("device", "measured now", "already there")
    for r in results:
        table.add_row(r["device"], str(r["measured"]), str(r["skipped"]))
    console.print(table)
    for r in results:
        if "auto" in r:
            a, last = r["auto"], r["auto"]["history"][-1]
            console.print(f"{r['device']}: took {a['samples']} subnets ({a['stopped']}); predictor "
                          f"{a['chosen']}, CV RMS log error {last['cv_rmse_log']:.4f}, "
                          f"{100 * last['cv_within_10']:.1f}% within ±10%", highlight=False)
    console.print(f"measurements: {cfg.files.measurements}")


# -- supernet -------------------------------------------------------------------------------
@supernet_app.command("stats")
def supernet_stats(
    table: Path = typer.Option(..., "--table", help="CSV of flat rows: r, then the family's genes "
                               f"({DEFAULT_FAMILY}: {_DEFAULT_COLUMNS}; see `hwnas space info "
                               "--family F`)."),
    out: Path = typer.Option(..., "--out", help="Where to write the rows with params and macs columns."),
    family: Optional[str] = FamilyOpt,
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Supernet width multiplier "
                                               f"({DEFAULT_FAMILY}: {_or(_DEFAULT.widths)}; default: the family's)."),
    classes: int = typer.Option(1000, "--classes", help="Number of classes of the classifier."),
) -> None:
    """Exact parameter count and MACs of each subnet in a table (no network is built)."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.families.tables import stats_frame
    from hwnas.fileio import atomic_path
    from hwnas.space import read_table_frame

    fam = get_family(family or DEFAULT_FAMILY)
    if classes < 1:
        raise InputError(f"--classes must be at least 1, got {classes}")
    fam.check_width(width_mult)
    _check_out_file(out)
    df = stats_frame(fam, read_table_frame(table), width_mult, classes, source=str(table))
    with atomic_path(out, suffix=".csv") as tmp:
        df.to_csv(tmp, index=False)
    err_console.print(f"wrote {len(df)} rows to {out}")


@supernet_app.command("eval")
def supernet_eval(
    table: Optional[Path] = typer.Option(None, "--table", help="CSV of flat rows to evaluate."),
    arch: Optional[str] = typer.Option(None, "--arch", help="One arch as OFA JSON: the family's arch "
                                       "dict plus r, e.g. {ks,e,d,r}."),
    supernet: Optional[Path] = typer.Option(None, "--supernet", help="Supernet checkpoint stem "
                                            "(e.g. runs/x/supernet). Default: the shipped supernet."),
    checkpoint: Optional[Path] = old_name("--supernet", "--checkpoint"),
    split: str = typer.Option("val", "--split", help="val or test."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write rows with top1/loss columns here."),
    data: Optional[str] = DataOpt,
) -> None:
    """Top-1 of subnets taken from a trained supernet (BN recalibrated per subnet)."""
    from hwnas.families.tables import archs_frame
    from hwnas.fileio import atomic_path
    from hwnas.progress import make_progress
    from hwnas.supernet.evaluation import evaluate_subnets, subnets_of_checkpoint

    _check_out_file(out)
    supernet = _renamed("--supernet", supernet, "--checkpoint", checkpoint)
    model, archs, loaders = subnets_of_checkpoint(supernet, table=table, arch_json=arch, data=_data_config(data))
    with make_progress(err_console) as bar:
        task = bar.add_task("evaluate", total=len(archs), info="")
        rows = evaluate_subnets(model, archs, loaders, split=split,
                                progress=lambda done, total: bar.update(task, completed=done))
    result = _table("id", "arch", f"{split} top-1 %", "loss")
    for a, r in zip(archs, rows):
        result.add_row(a.id, a.describe(), f"{r['top1']:.2f}", f"{r['loss']:.4f}")
    console.print(result)
    if out:
        frame = archs_frame(archs, extra={"top1": [r["top1"] for r in rows], "loss": [r["loss"] for r in rows]})
        with atomic_path(out, suffix=".csv") as tmp:
            frame.to_csv(tmp, index=False)


@supernet_app.command("import")
def supernet_import(
    from_ofa: Path = typer.Option(..., "--from-ofa", help="Once-for-All checkpoint file (what "
                                  f"ofa_net('{_DEFAULT.published[_DEFAULT.default_width]}', pretrained=True) loads), "
                                  "downloaded yourself."),
    family: Optional[str] = FamilyOpt,
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Its width multiplier "
                                               f"({'; '.join(f'{n}: {_or(get_family(n).widths)}' for n in family_names())}). "
                                               "Default: the family's first."),
    out: Path = typer.Option(..., "--out", help="hwnas checkpoint stem to write, e.g. runs/ofa/supernet."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing checkpoint at --out."),
) -> None:
    """Import Once-for-All's published supernet weights (read with weights_only=True, every tensor
    checked) as an hwnas checkpoint: ImageNet's 1000 classes, OFA's space, r 128..224."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.supernet.ofa_import import import_ofa_checkpoint

    family = family or DEFAULT_FAMILY
    fam = get_family(family)
    width_mult = fam.default_width if width_mult is None else width_mult
    path = import_ofa_checkpoint(from_ofa, out, width_mult=width_mult, family=family, overwrite=overwrite)
    err_console.print(f"wrote {path.with_suffix('')} ({fam.title} W={width_mult}, 1000 classes); "
                      f"use it with --supernet {path.with_suffix('')}", soft_wrap=True)


@app.command("train")
def train(
    config: Optional[Path] = typer.Option(None, "--config", help="Training YAML (see experiments/)."),
    out: Path = typer.Option(Path("runs/supernet"), "--out", help="Run folder: checkpoints, log."),
    overrides: list[str] = typer.Option([], "--set", help="Override a config key: --set phases.full.epochs=2"),
    family: Optional[str] = family_option(f"Search-space family: {_or(family_names())} "
                                          f"(default: the config's, else {DEFAULT_FAMILY})."),
    init_from: Optional[str] = typer.Option(None, "--init-from", help="Transfer: start from this "
                                            "checkpoint stem (or 'shipped') and carry it to --data; "
                                            "without --config the short transfer recipe runs."),
    data: Optional[str] = typer.Option(None, "--data", help="Training data (overrides the config's): "
                                       "fashion-mnist[:PATH], mnist-embedded, imagefolder:PATH, cifar10:PATH."),
) -> None:
    """Train the once-for-all supernet with progressive shrinking, or transfer one to new data
    with --init-from (resumes if --out has a run)."""
    from hwnas.supernet.train import load_train_config, train_supernet
    from hwnas.progress import TrainProgress

    if family is not None:
        from hwnas.families import get_family

        get_family(family)  # one line for an unknown name
        overrides = [*overrides, f"family={family}"]
    data_cfg = _data_config(data)
    if init_from is not None:
        from hwnas.supernet.data import DataConfig
        from hwnas.supernet.transfer import transfer_config

        cfg = transfer_config(init_from, data_cfg or DataConfig(), config, overrides)
    else:
        if data_cfg is not None:
            overrides = [*overrides, f"data={json.dumps(data_cfg.model_dump(mode='json'))}"]
        cfg = load_train_config(config, overrides)
    out.mkdir(parents=True, exist_ok=True)
    with TrainProgress(console=err_console) as bar:
        summary = train_supernet(cfg, out, progress=bar.update)
    if summary["log"]:
        last = summary["log"][-1]
        err_console.print(f"done: {out} (last phase {last['phase']}, val top-1 max "
                          f"{last.get('val_top1_max')}%, min {last.get('val_top1_min')}%)")


# -- search ---------------------------------------------------------------------------------
def _algo_enum() -> type[Enum]:
    """--algo's choices: the search-algorithm registry (no second list to keep)."""
    from hwnas.search.algorithms import algorithm_names

    return Enum("Algo", {name.replace("-", "_"): name for name in algorithm_names()}, type=str)


Algo = _algo_enum()
_SEARCH_FLAGS = {"n_trials": "--trials", "objectives": "--objective"}  # settings whose flag is not their name


def _search_flag(setting: str) -> str:
    """The `hwnas search` flag of a `SearchSettings` field, for the library's error lines."""
    return _SEARCH_FLAGS.get(setting, "--" + setting.replace("_", "-"))


@app.command("search")
def search_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory (from `hwnas profile`)."),
    device: list[str] = typer.Option(..., "--device", help="Target device (repeat for several)."),
    latency_ms: list[float] = typer.Option(..., "--latency-ms", help="Budget in ms: one for all devices "
                                           "or one per --device."),
    algo: Algo = typer.Option(Algo.evolution, "--algo", help="Search algorithm."),
    pareto: bool = typer.Option(False, "--pareto", help="Return and verify the whole Pareto front."),
    workers: int = typer.Option(1, "--workers", help="Processes for the optuna-* algorithms."),
    storage: Optional[str] = typer.Option(None, "--storage", help="Optuna storage URL (postgresql://...) "
                                          "or journal file; default RUN/optuna.journal."),
    top_k: int = typer.Option(5, "--top-k", help="Candidates measured on the device."),
    seed: int = seed_option(),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Measure the winners on the device."),
    devices_file: Optional[Path] = DevicesOpt,
    generations: Optional[int] = typer.Option(None, "--generations", help="evolution/nsga2: generations "
                                              "(default 500; optuna-*: sets --trials with --population)."),
    population: Optional[int] = typer.Option(None, "--population", help="evolution/nsga2/optuna-nsga2: "
                                             "subnets per generation (default 100)."),
    trials: Optional[int] = typer.Option(None, "--trials", help="optuna-*/random: predictor calls."),
    objective: list[str] = typer.Option([], "--objective", help="Extra objectives: ms:<device>, macs, params."),
    max_macs: Optional[float] = typer.Option(None, "--max-macs", help="Accept only subnets with at most "
                                             "this many multiply-accumulates (e.g. 3e8)."),
    max_params: Optional[float] = typer.Option(None, "--max-params", help="Accept only subnets with at most "
                                               "this many parameters (e.g. 5e6)."),
    accuracy_samples: Optional[int] = typer.Option(None, "--accuracy-samples", help="Grow the run's accuracy "
                                                   "table to this many subnets first (each one evaluated on "
                                                   "the validation split: seconds to minutes apiece). Default: "
                                                   "search with the table as it is."),
    accuracy_checks: Optional[int] = typer.Option(None, "--accuracy-checks", help="Candidates that must fit the "
                                                  "budget on the device; their top-1 is evaluated on the test "
                                                  "split and the best --top-k returned (default: 3 x --top-k)."),
    latency_margin: float = typer.Option(0.02, "--latency-margin", help="Accept a subnet only if measured ms x "
                                         "(1 + margin + 2 x its standard error) is within the budget."),
    accuracy_risk: float = typer.Option(1.0, "--accuracy-risk", help="Search on predicted top-1 minus this many "
                                        "sigmas of the predictor's uncertainty (0: the prediction alone)."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write pareto.png (about 0.3-0.7 s)."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, bf16 or int8 (each device's <device>-bf16 / "
                                  "<device>-int8 variant; top-1 minus a drop measured on --int8-samples subnets) "
                                  "or auto (every precision the device has a variant for; the front says which "
                                  "precision each point uses)."),
    int8_samples: int = typer.Option(8, "--int8-samples", help="Subnets in the INT8 accuracy table (measured "
                                     "when it has fewer): the drop model of int8/auto."),
    finetune_epochs: int = typer.Option(0, "--finetune-epochs", help="Then fine-tune each returned subnet "
                                        "for this many epochs (as `hwnas finetune`; `hwnas export` ships the "
                                        "weights) and report top-1 before and after. 0: no fine-tuning."),
) -> None:
    """Search the accuracy/latency Pareto front under a latency budget, then verify on the device:
    top-1 on the test split and latency with margin for measurement noise. The accuracy predictor
    is fitted on the run's accuracy table as it is (`hwnas accuracy build` grows it, or
    --accuracy-samples)."""
    from hwnas.progress import EventProgress
    from hwnas.run import open_run
    from hwnas.search import SearchSettings, run_search
    from hwnas.search.goals import objectives_beyond

    # the library checks the settings; `main` spells their names in its lines as flags
    settings = SearchSettings(
        tuple(device), tuple(latency_ms), algo=algo.value, pareto=pareto, workers=workers, storage=storage,
        top_k=top_k, seed=seed, verify=verify, devices_file=devices_file,
        objectives=objectives_beyond(device, objective), max_macs=max_macs, max_params=max_params,
        population=population, generations=generations, n_trials=trials, accuracy_samples=accuracy_samples,
        accuracy_checks=accuracy_checks, latency_margin=latency_margin, accuracy_risk=accuracy_risk,
        plot=plot, precision=precision, int8_samples=int8_samples)
    finetune = _finetune_settings(finetune_epochs, seed)
    with EventProgress(err_console) as bar:
        res = run_search(run, settings, progress=bar)
    _print_best(res)
    if finetune is not None and res.best:
        _finetune_best(open_run(run, create=False), res, finetune)
    if not res.ok:
        raise typer.Exit(1)


def _finetune_settings(epochs: int, seed: int):
    """--finetune-epochs checked before the search runs (None: no fine-tuning)."""
    if epochs < 0:
        raise InputError(f"--finetune-epochs must be 0 (no fine-tuning) or more, got {epochs}")
    if epochs == 0:
        return None
    from hwnas.supernet.finetune import FinetuneSettings

    return FinetuneSettings(epochs=epochs, seed=seed)


def _finetune(cfg, arch, settings, data_cfg=None) -> dict:
    """Fine-tune one subnet with a progress bar; its record (top-1 before and after, seconds)."""
    from hwnas.progress import make_progress
    from hwnas.supernet.finetune import finetune_subnet

    with make_progress(err_console) as bar:
        task = bar.add_task(f"finetune {arch.id}", total=None, info="")
        return finetune_subnet(cfg, arch, settings, data=data_cfg,
                               progress=lambda done, total, msg: bar.update(task, completed=done,
                                                                             total=total, info=msg))


def _finetune_best(cfg, res, settings) -> None:
    """search --finetune-epochs: fine-tune the search's returned subnets one after the other."""
    from hwnas.export.resolve import resolve_subnet

    ids = list(dict.fromkeys(b["id"] for b in res.best))  # --precision auto may return an id twice
    err_console.print(f"fine-tuning {len(ids)} subnet(s) for {settings.epochs} epoch(s) each: every epoch is a "
                      "pass over the training split, distilled from the largest subnet; this takes a while "
                      "(the first subnet's time is the estimate for the others)", highlight=False)
    table = _table("id", "val top-1 before → after %", "test top-1 before → after %", "seconds",
                   title=f"fine-tuned ({settings.epochs} epoch(s) each)")
    for i, sid in enumerate(ids):
        started = time.monotonic()
        record = _finetune(cfg, resolve_subnet(cfg, sid).arch, settings)
        seconds = time.monotonic() - started  # with loading and evaluation: what the next one costs
        if i == 0 and len(ids) > 1:
            err_console.print(f"{sid} took {seconds:.0f} s; the other {len(ids) - 1}: about "
                              f"{seconds * (len(ids) - 1) / 60:.1f} minutes", highlight=False)
        before, after = record["top1_before"], record["top1_after"]
        table.add_row(sid, *(f"{before[s]:.2f} → {after[s]:.2f}" for s in ("val", "test")), f"{seconds:.0f}")
    console.print(table)
    err_console.print(f"weights in {cfg.files.finetuned('<id>')}; `hwnas export --run {cfg.run_dir} --subnet ID "
                      "--device D` ships them", highlight=False, soft_wrap=True)


def _top1_text(best: dict) -> str:
    meas = best.get("measured_top1")
    return f"{best['top1_pred']:.2f} / " + ("-" if meas is None else f"{meas:.2f} (test)")


def _print_best(res) -> None:
    mixed = getattr(res, "precision", "fp32") != "fp32"
    table = _table("id", *(["precision"] if mixed else []), "arch", "top-1 % pred / measured",
                   *[f"{d} ms pred / measured" for d in res.devices], "MMACs", title=f"best subnets ({res.algo})")
    for b in res.best:
        lat = []
        for d in res.devices:
            meas = b["measured_ms"].get(d)
            on = b.get("latency_devices", {}).get(d, d)
            lat.append(f"{b['ms_pred'][d]:.3f} / " + ("-" if meas is None else f"{meas:.3f}")
                       + (f" ({on})" if on != d else ""))
        table.add_row(b["id"], *([b.get("precision", "fp32")] if mixed else []), b["describe"], _top1_text(b),
                      *lat, f"{b['macs'] / 1e6:.1f}")
    console.print(table)
    if res.message:
        err_console.print(res.message, highlight=False)
    for name, path in res.paths.items():
        err_console.print(f"{name}: {path}", highlight=False)


# -- accuracy -------------------------------------------------------------------------------
@accuracy_app.command("build")
def accuracy_build(
    run: Path = typer.Option(..., "--run", "--run-dir", help="Run directory (created with the shipped supernet "
                             "if new). Under torchrun write --run-dir: torchrun takes --run for its own --run-path."),
    samples: int = typer.Option(1000, "--samples", help="Subnets in the table (a larger number extends it)."),
    bn_images: Optional[int] = typer.Option(None, "--bn-images", help="Training images for each subnet's BN "
                                            "recalibration (default: 2000, what every other evaluation in "
                                            "hwnas uses)."),
    seed: int = seed_option(),
    data: Optional[str] = DataOpt,
) -> None:
    """Evaluate sampled subnets on the validation split into <run>/accuracy.csv (resumable;
    under `torchrun --nproc_per_node N -m hwnas accuracy build ...` the ranks share the work)."""
    import os

    from hwnas.accuracy import build_accuracy_table, read_accuracy_table
    from hwnas.progress import EventProgress
    from hwnas.run import open_run

    _at_least_one(("--samples", samples), ("--bn-images", bn_images))
    cfg = open_run(run, data=_data_config(data))
    quiet = int(os.environ.get("RANK", 0)) != 0
    with EventProgress(err_console, disable=quiet) as bar:
        table = build_accuracy_table(cfg, samples, seed=seed, bn_images=bn_images, progress=bar)
    if not quiet:
        top1 = table["top1"]  # the rows of the `samples` asked for; the file may hold more
        held = len(read_accuracy_table(cfg.run_dir, cfg.files.accuracy.name, cfg.space))
        err_console.print(f"{cfg.files.accuracy}: {held} subnets; val top-1 of the {len(table)} asked for "
                          f"{top1.min():.2f}"
                          f"..{top1.max():.2f}% (median {top1.median():.2f}%)", highlight=False)


def _accuracy_report_table(report: dict) -> None:
    from rich.markup import escape  # names like ridge[compact] are not markup

    cands = _table("predictor", "MAE (pts)", "RMSE", "bias", "Kendall tau", "fit s",
                   title=f"out-of-fold ({report['folds']}-fold) on {report['table_rows']} subnets")
    for c in report["candidates"]:
        name = c["kind"] + (f"[{c['settings']['features']}]" if c["settings"].get("features") else "")
        mark = " *" if c["kind"] == report["chosen"]["kind"] and c["settings"] == report["chosen"]["settings"] else ""
        cands.add_row(escape(name + mark), f"{c['mae']:.3f}", f"{c['rmse']:.3f}", f"{c['bias']:+.3f}",
                      f"{c['kendall_tau']:.3f}", f"{c['seconds']:.1f}")
    console.print(cands)
    curve = _table("rows", "MAE", "Kendall tau", title=escape(f"learning curve of {report['chosen']['name']}"))
    for row in report["learning_curve"]:
        curve.add_row(str(row["rows"]), f"{row['mae']:.3f}", f"{row['kendall_tau']:.3f}")
    console.print(curve)
    oof = report["oof"]
    err_console.print(f"chosen: {escape(report['chosen']['name'])}: out-of-fold MAE {oof['mae']:.3f} pts, Kendall tau "
                      f"{oof['kendall_tau']:.3f}, {100 * oof['within_1_sigma']:.0f}% within one sigma; "
                      f"predictions clipped to {report['clip'][0]:.2f}..{report['clip'][1]:.2f}%", highlight=False)


@accuracy_app.command("fit")
def accuracy_fit(run: Path = typer.Option(..., "--run", help="Run directory with an accuracy table."),
                 seed: int = seed_option()) -> None:
    """Choose the accuracy predictor by out-of-fold error and save it to <run>/predictors/accuracy.json."""
    from hwnas.accuracy import ACCURACY_PREDICTOR, fit_accuracy_predictor
    from hwnas.run import open_run

    _, report = fit_accuracy_predictor(open_run(run, create=False), seed=seed)
    _accuracy_report_table(report)
    err_console.print(f"saved {run / ACCURACY_PREDICTOR}", highlight=False)


@accuracy_app.command("eval")
def accuracy_eval(run: Path = typer.Option(..., "--run", help="Run directory with an accuracy table."),
                  seed: int = seed_option(),
                  out: Optional[Path] = typer.Option(None, "--out", help="Write the report as JSON.")) -> None:
    """Out-of-fold MAE, bias and Kendall tau of every predictor kind, and the learning curve
    (nothing is saved in the run)."""
    from hwnas.accuracy import fit_accuracy_predictor
    from hwnas.fileio import atomic_write_json
    from hwnas.run import open_run

    _check_out_file(out)
    _, report = fit_accuracy_predictor(open_run(run, create=False), seed=seed, save=False)
    _accuracy_report_table(report)
    if out:
        atomic_write_json(out, report)


# -- quickstart -----------------------------------------------------------------------------
@app.command("quickstart")
def quickstart_cmd(
    run: Path = typer.Option(Path("runs/quickstart"), "--run", help="Run directory."),
    device: str = typer.Option("cpu-ort", "--device", help="Device to profile, search for and export to."),
    samples: int = typer.Option(60, "--samples", help="Subnets profiled for the latency predictor."),
    accuracy_samples: int = typer.Option(200, "--accuracy-samples", help="Subnets evaluated for the "
                                         "accuracy predictor."),
    latency_ms: Optional[float] = typer.Option(None, "--latency-ms", help="Budget (default: 40% of the "
                                               "way from the fastest to the slowest profiled subnet)."),
    top_k: int = typer.Option(3, "--top-k", help="Candidates measured on the device."),
) -> None:
    """The whole pipeline on the shipped supernet: profile, fit, search, verify, export."""
    from hwnas.accuracy.api import MIN_ROWS
    from hwnas.progress import EventProgress
    from hwnas.quickstart import QuickstartSettings, quickstart

    if latency_ms is not None and latency_ms <= 0:
        raise InputError(f"--latency-ms must be positive, got {latency_ms}")
    if accuracy_samples < MIN_ROWS:  # refused before profiling, not at the accuracy stage
        raise InputError(f"--accuracy-samples must be at least {MIN_ROWS} (the fewest subnets an accuracy "
                         f"predictor is fitted on), got {accuracy_samples}")
    settings = QuickstartSettings(run_dir=run, device=device, samples=samples,
                                  accuracy_samples=accuracy_samples, budget_ms=latency_ms, top_k=top_k)
    with EventProgress(err_console) as bar:
        res = quickstart(settings, log=lambda m: bar.progress.console.print(m, highlight=False), progress=bar)
    _print_quickstart(res)
    if res.bundle is None:
        raise typer.Exit(1)


def _print_quickstart(res) -> None:
    from rich.markup import escape

    s = res.settings
    rep = res.latency_report.get("chosen_metrics", {})
    summary = _table("", "", title="hwnas quickstart", show_header=False)
    summary.add_row("device", s.device)
    summary.add_row("latency predictor", f"{res.latency_report.get('chosen', 'reused')}"
                    + (f" (CV: {100 * rep['within_10']:.0f}% within ±10%, Kendall tau {rep['kendall_tau']:.2f})"
                       if rep else ""))
    acc = (getattr(res.search, "accuracy_report", None) or {}) if res.search is not None else {}
    if acc.get("oof"):
        summary.add_row("accuracy predictor", escape(f"{acc['chosen']['name']}") + f" (out-of-fold on {acc['table_rows']} subnets: "
                        f"MAE {acc['oof']['mae']:.2f} pts, Kendall tau {acc['oof']['kendall_tau']:.2f})")
    summary.add_row("budget", f"{res.budget_ms} ms (accepted: measured x (1 + margin + 2 SE) within it)")
    if res.search is not None and res.search.best:
        b = res.search.best[0]
        meas = b["measured_ms"].get(s.device)
        summary.add_row("best subnet", f"{b['id']}  {b['describe']}")
        summary.add_row("top-1 pred / measured", _top1_text(b) + " %")
        summary.add_row("latency pred / measured", f"{b['ms_pred'][s.device]:.3f} / "
                        + ("-" if meas is None else f"{meas:.3f}") + " ms")
        summary.add_row("front", f"{int(res.search.front['on_front'].sum())} subnets  ({res.search.paths['pareto_csv']})")
    if res.bundle is not None:
        m = res.bundle_meta
        summary.add_row("export", escape(f"{res.bundle}  [{m['status']}], test top-1 {m['accuracy']['top1']:.2f}%"))
    summary.add_row("time per stage", ", ".join(f"{k.split()[0]} {v}s" for k, v in res.stages.items()))
    summary.add_row("dashboard", f"hwnas dashboard --run {s.run_dir}")
    console.print(summary)


# -- export ---------------------------------------------------------------------------------
@app.command("finetune")
def finetune_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory."),
    subnet: str = typer.Option(..., "--subnet", help="Subnet id from the run (a unique prefix works), "
                               "or the arch as OFA JSON."),
    epochs: int = typer.Option(5, "--epochs", help="Passes over the training split."),
    lr: float = typer.Option(0.01, "--lr", help="Peak learning rate (cosine decay)."),
    data: Optional[str] = typer.Option(None, "--data", help="Training data (default: the run's)."),
    seed: int = seed_option(help="Seed of the data order and dropout."),
) -> None:
    """Fine-tune one subnet alone (distilling from the supernet's largest subnet); `hwnas export`
    then ships its weights. Reports top-1 before and after on the test split. Trains on a GPU when
    torch sees one."""
    from hwnas.export.resolve import resolve_subnet
    from hwnas.run import open_run
    from hwnas.supernet.finetune import FinetuneSettings

    settings = FinetuneSettings(epochs=epochs, lr=lr, seed=seed)
    data_cfg = _data_config(data)
    cfg = open_run(run, create=False)
    arch = resolve_subnet(cfg, subnet).arch
    err_console.print(f"fine-tuning {arch.id} for {epochs} epoch(s) on the run's training split")
    record = _finetune(cfg, arch, settings, data_cfg)
    table = _table("split", "top-1 before %", "top-1 after %", "images")
    for split in ("val", "test"):
        table.add_row(split, f"{record['top1_before'][split]:.2f}", f"{record['top1_after'][split]:.2f}",
                      str(record["n"][split]))
    console.print(table)
    err_console.print(f"wrote {cfg.files.finetuned(arch.id)} ({record['seconds']:.0f} s); "
                      f"`hwnas export --run {run} --subnet {arch.id} --device D` ships it", soft_wrap=True)


@app.command("export")
def export_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory."),
    device: str = typer.Option(..., "--device", help="Device to compile for (see `hwnas devices list`)."),
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet id from the run's pareto.csv "
                                         "(a unique prefix works), or the arch as OFA JSON."),
    pareto: bool = typer.Option(False, "--pareto", help="Export every member of the run's pareto.csv."),
    out: Optional[Path] = typer.Option(None, "--out", help="Bundle folder (with --pareto: where the "
                                       "bundles go). Default: RUN/exports/ID-DEVICE."),
    devices_file: Optional[Path] = DevicesOpt,
    calib_batches: Optional[int] = typer.Option(None, "--calib-batches", help="Training batches for BN "
                                                "recalibration (default: the accuracy table's 2,000 images)."),
    verify_images: int = typer.Option(64, "--verify-images", help="Test images the exported model is checked on."),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="Measure the latency on the device."),
    max_int8_drop: float = typer.Option(1.0, "--max-int8-drop", help="INT8 and bf16 devices: the most test "
                                        "top-1 points the reduced-precision model may lose against the fp32 subnet "
                                        "before the bundle is marked failed."),
) -> None:
    """Export subnets as verified deploy bundles, compiled by the device's own backend."""
    from rich.markup import escape

    from hwnas.export import export_pareto, export_subnet, read_meta
    from hwnas.export.api import check_max_int8_drop
    from hwnas.export.bundle import bundle_fingerprint
    from hwnas.progress import make_progress

    if (subnet is None) == (not pareto):
        raise InputError("give exactly one of --subnet ID or --pareto")
    check_max_int8_drop(max_int8_drop)
    _at_least_one(("--verify-images", verify_images), ("--calib-batches", calib_batches))
    kw = dict(devices_file=devices_file, calib_batches=calib_batches, verify_images=verify_images,
              measure=measure, max_int8_drop=max_int8_drop)
    with make_progress(err_console) as bar:
        task = bar.add_task(f"export {device}", total=None, info="")

        def update(done: int, total: int, message: str) -> None:
            bar.update(task, completed=done, total=total, info=message)

        paths = (export_pareto(run, device, out, progress=update, **kw) if pareto
                 else [export_subnet(run, subnet, device, out, progress=update, **kw)])
    table = _table("bundle", "status", "test top-1 %", "latency ms", "fingerprint (load(..., fingerprint=))")
    for path in paths:
        meta = read_meta(path)
        ms = (meta["latency"].get("measured") or {}).get("corrected_ms")
        top1 = f"{meta['accuracy']['top1']:.2f}"
        for precision in ("int8", "bf16"):  # a reduced-precision bundle: its own top-1 first
            record = meta["accuracy"].get(precision) or {}
            if record.get(f"top1_{precision}") is not None:
                top1 = f"{record[f'top1_{precision}']:.2f} {precision} ({top1} fp32)"
        table.add_row(escape(str(path)), escape(meta["status"]), top1, "-" if ms is None else f"{ms:.3f}",
                      bundle_fingerprint(path))
        if meta["status"].startswith("onnx-only"):
            err_console.print(f"[yellow]notice:[/] {path.name}: no engine built here ({escape(meta['status'])}); "
                              f"build it on the target: sh {path}/build.sh  or  python3 {path}/build_engine.py",
                              highlight=False, soft_wrap=True)
    console.print(table)


def _at_least_one(*flags: tuple[str, int | None]) -> None:
    """One line for the first (flag, value) below 1 (None: not given)."""
    for flag, value in flags:
        if value is not None and value < 1:
            raise InputError(f"{flag} must be at least 1, got {value}")


def _check_bindable(address: str, port: int) -> None:
    """One line for an address this machine does not have or a port already taken, instead of the
    server's traceback (the port is free again when this returns: a race is the server's to say)."""
    import socket

    try:
        family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server: TIME_WAIT is no refusal
            probe.bind((address, port))
    except socket.gaierror:
        raise InputError(f"--address {address!r} is not an address or host name of this machine; "
                         "use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
    except OSError as err:
        taken = err.errno == errno.EADDRINUSE
        raise InputError(f"--port {port} is already in use on {address}; pick another with --port" if taken else
                         f"cannot serve on {address}:{port} ({err.strerror}); check --address and --port") from None


@app.command("dashboard")
def dashboard(
    run: Path = typer.Option(Path("runs"), "--run", help="A run directory, or a folder of runs."),
    port: int = typer.Option(8501, "--port", help="Port to serve on."),
    address: str = typer.Option("127.0.0.1", "--address", help="Address to bind (loopback by default)."),
) -> None:
    """Serve the Streamlit Pareto dashboard for a run (Ctrl-C stops it)."""
    from hwnas.dashboard import serve
    from hwnas.dashboard.data import find_runs

    if not run.exists():
        raise InputError(f"{run} does not exist; pass a run directory made by `hwnas profile --run DIR`")
    if not find_runs(run):
        raise InputError(f"{run} holds no hwnas run (no config.yaml); pass a run directory or a folder of runs")
    if not 0 < port < 65536:
        raise InputError(f"--port must be within 1..65535, got {port}")
    _check_bindable(address, port)
    need("streamlit")  # the server is a child process: name the extra here, not in its traceback
    err_console.print(f"dashboard for {run} at http://{address}:{port}  (Ctrl-C to stop)")
    raise typer.Exit(serve(run, port, address))


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point: user errors and usage errors become one line on stderr and exit code 2."""
    # Torch's intra-op pool on every core collapses when another process holds one (measured here:
    # 30x slower evaluation on 2 busy cores), so default to half the cores; OMP_NUM_THREADS wins.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    try:
        result = app(args=argv, standalone_mode=False)
    except HwnasError as err:
        if _state["debug"]:
            raise
        # a library setting's error names it as the library does; here, as the flag that sets it
        _fail(err.render(_search_flag) if isinstance(err, SettingError) else str(err), err.exit_code)
    except typer.Abort:
        _fail("aborted", 130)
    except (KeyboardInterrupt, _Interrupted):
        if _state["debug"]:
            raise
        _fail("interrupted; what was written so far is kept, and the same command resumes", 130,
              at_once=argv is None)
    except OSError as err:  # a path the user gave: a file for a folder, no permission, disk full
        if _state["debug"]:
            raise
        if (text := _path_problem(err)) is None:
            _unexpected(err)
        _fail(text, 2)
    except typer.TyperException as exc:  # Typer's own usage errors (bad option, unknown command)
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()
            sys.exit(0)
        ctx = getattr(exc, "ctx", None)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _fail(exc.format_message().splitlines()[0] + where, getattr(exc, "exit_code", 2))
    except Exception as err:  # a bug: one line and the way to the traceback, not a traceback
        if _state["debug"]:
            raise
        _unexpected(err)
    else:
        sys.exit(result if isinstance(result, int) else 0)


_PATH_ERRNOS = {"ENOENT": "it does not exist", "EACCES": "permission denied",
                "EPERM": "permission denied", "EROFS": "the file system is read-only",
                "ENOTDIR": "a file is in the way where a folder is needed",
                "EISDIR": "it is a folder, a file is needed", "EEXIST": "something is in the way",
                "ENOSPC": "no space left on the device", "EDQUOT": "disk quota exceeded",
                "ENAMETOOLONG": "the name is too long", "ELOOP": "too many symbolic links",
                "ETXTBSY": "the file is busy"}


def _path_problem(err: OSError) -> str | None:
    """One line for an OSError about a path the user controls, or None for anything else."""
    import errno

    name = errno.errorcode.get(err.errno or -1, "")
    if name not in _PATH_ERRNOS:
        return None
    where = err.filename if err.filename is not None else "a file"
    fix = {"EACCES": "make it writable (or readable) or choose another path",
           "EPERM": "make it writable (or readable) or choose another path",
           "EROFS": "choose a path on a writable file system",
           "ENOSPC": "free some space", "EDQUOT": "free some space"}.get(name, "check the path")
    return f"cannot use {where}: {_PATH_ERRNOS[name]}; {fix}"


def _unexpected(err: BaseException) -> None:
    text = " ".join(str(err).split())[:300]
    _fail(f"unexpected error: {type(err).__name__}{': ' + text if text else ''} (a bug in hwnas; "
          "rerun with `hwnas --debug ...` for the traceback and report it)", 1)


def _fail(message: str, code: int, at_once: bool = False) -> None:
    """One line and the exit code. `at_once` (Ctrl-C in the `hwnas` process itself): every writer
    is atomic and the stack has unwound, so exit without waiting for library threads (ONNX
    Runtime's, torch's) to wind down."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    if at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
