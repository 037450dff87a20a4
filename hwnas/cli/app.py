"""The `hwnas` Typer app, its command groups, the consoles and the options and helpers the commands share."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table
from typer.core import TyperGroup

from hwnas import __version__
from hwnas.errors import InputError, MissingExtraError
from hwnas.extras import install_hint, missing_extra
from hwnas.families import DEFAULT_FAMILY, family_names, get_family
from hwnas.progress import OutputConsole


class Interrupted(BaseException):
    """A Ctrl-C on its way to `main`, which says that what was written is kept and the command
    resumes (a KeyboardInterrupt would not get there: Typer makes it a quiet exit 130)."""


class _Commands(TyperGroup):
    """Every command group (every command runs inside the root's `invoke`)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as err:
            raise Interrupted from err
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


DEFAULT = get_family(DEFAULT_FAMILY)  # the default family: help texts take its names from here


def or_list(items) -> str:
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
state = {"debug": False}


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
    state["debug"] = debug


# -- shared option helpers -------------------------------------------------------------------
SpaceOpt = typer.Option(None, "--space", help="YAML file with the family's gene choices (ofa-mbv3: ks/e/d), "
                        "r (a list or a range like '32:64:4') and width_mult; `hwnas space info --format json` "
                        "names them. Default: Once-for-All's space.")


OTHER_FAMILIES = or_list(n for n in family_names() if n != DEFAULT_FAMILY)
FAMILY_HELP = f"Search-space family: {DEFAULT_FAMILY} (the default), {OTHER_FAMILIES}."
DEFAULT_COLUMNS = ", ".join(f"{g.name}_0..{g.name}_{g.count - 1}" for g in DEFAULT.gene_groups())


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


def data_config(spec: Optional[str]):
    if spec is None:
        return None
    from hwnas.supernet.data import DataConfig

    return DataConfig.from_spec(spec)


def load_space(path: Optional[Path], width_mult: Optional[float] = None, family: Any = DEFAULT):
    """`family`'s space from a --space file (or Once-for-All's)."""
    space = family.space_from_file(path) if path else family.default_space()
    if width_mult is not None:
        space = family.space_from_dict({**space.to_dict(), "width_mult": width_mult})
    return space


def write_or_print(text: str, out: Optional[Path]) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    from hwnas.fileio import atomic_write_text

    atomic_write_text(out, text)
    err_console.print(f"wrote {out}")


def renamed(new: str, value: Any, old: str, old_value: Any, default: Any = None) -> Any:
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


def make_table(*headers: str, **kw: Any) -> Table:
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


def print_rows(rows: list[dict[str, Any]], fmt: ListFormat, table: Table) -> None:
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


def check_out_file(out: Optional[Path]) -> None:
    """--out names a file to write: refuse a folder before any work."""
    if out is not None and out.is_dir():
        raise InputError(f"--out {out} is a folder; give the path of a file to write (it may "
                         "be inside that folder)")


#: settings whose flag is not ``--setting-name`` (`setting_option`, `name_flag`)
_FLAGS: dict[str, str] = {}


def setting_flag(setting: str) -> str:
    """The flag that sets a library setting: `main` spells the library's error lines with it."""
    return _FLAGS.get(setting, "--" + setting.replace("_", "-"))


def name_flag(setting: str, flag: str) -> str:
    """Record that `flag` sets `setting` (for an option not made by `setting_option`); returns it."""
    _FLAGS[setting] = flag
    return flag


def setting_option(model: type, setting: str, *flags: str) -> Any:
    """The option of a settings model's field (`hwnas.settings`): its default and help are the
    field's, so they are defined once; the library checks the range and `main` spells its error
    line with the flag (default ``--setting-name``, `setting_flag`)."""
    from hwnas.settings import field_default, field_help

    if flags:
        name_flag(setting, flags[0])
    return typer.Option(field_default(model, setting), *(flags or (setting_flag(setting),)),
                        help=field_help(model, setting))


def at_least_one(*flags: tuple[str, int | None]) -> None:
    """One line for the first (flag, value) below 1 (None: not given)."""
    for flag, value in flags:
        if value is not None and value < 1:
            raise InputError(f"{flag} must be at least 1, got {value}")
