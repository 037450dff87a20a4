"""`hwnas space`: a family's search space (info, sample)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import (DEFAULT, FamilyOpt, SpaceOpt, console, format_option, load_space, make_table,
                           old_name, renamed, seed_option, space_app, write_or_print)
from hwnas.errors import InputError


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

    fmt = renamed("--format", fmt, "--json", InfoFormat.json if as_json else None, InfoFormat.table)
    family = family or DEFAULT_FAMILY
    fam = get_family(family)
    info = describe(load_space(space_file, family=fam))
    if fmt is InfoFormat.json:  # sizes exceed JSON's safe integer range
        for key in ("size", "size_per_resolution", "networks_per_resolution"):
            info[key] = None if info[key] is None else str(info[key])
        typer.echo(json.dumps(info, indent=2))
        return
    original = info["once_for_all_class"] or "no Once-for-All original"
    table = make_table("", "", title=f"{info['title']} search space ({original})",
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


@space_app.command("sample", help=f"Sample subnets ({DEFAULT.title}: uniformly over distinct networks).")
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

    n = renamed("--samples", samples, "-n/--num", num, 10)
    if n < 1:
        raise InputError(f"--samples must be at least 1, got {n}")
    family = family or DEFAULT_FAMILY
    fam = get_family(family)
    space = load_space(space_file, family=fam)
    archs = space.sample(n, seed)
    if fmt is SampleFormat.json:
        text = json.dumps([json.loads(a.to_json()) for a in archs], indent=None) + "\n"
    else:
        text = archs_frame(archs).to_csv(index=False)
    write_or_print(text, out)


# -- devices --------------------------------------------------------------------------------
