"""`hwnas supernet` (stats, eval, import) and `hwnas train`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import (DEFAULT, DEFAULT_COLUMNS, DataOpt, FamilyOpt, app, check_out_file, console,
                           data_config, err_console, family_option, make_table, old_name, or_list, renamed,
                           supernet_app)
from hwnas.errors import InputError
from hwnas.families import DEFAULT_FAMILY, family_names, get_family


@supernet_app.command("stats")
def supernet_stats(
    table: Path = typer.Option(..., "--table", help="CSV of flat rows: r, then the family's genes "
                               f"({DEFAULT_FAMILY}: {DEFAULT_COLUMNS}; see `hwnas space info "
                               "--family F`)."),
    out: Path = typer.Option(..., "--out", help="Where to write the rows with params and macs (and ram_kb, flash_kb) columns."),
    family: Optional[str] = FamilyOpt,
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Supernet width multiplier "
                                               f"({DEFAULT_FAMILY}: {or_list(DEFAULT.widths)}; default: the family's)."),
    classes: int = typer.Option(1000, "--classes", help="Number of classes of the classifier (1000: "
                                "ImageNet's; the shipped Fashion-MNIST supernet has 10)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="fp32, bf16 or int8: also write "
                                            "ram_kb (the activation arena a memory-planned program reserves "
                                            "at batch 1) and flash_kb (weight bytes); kB = 1024 bytes."),
) -> None:
    """Exact parameter count and MACs of each subnet in a table (no network is built); with
    --precision, its RAM arena and flash bytes too."""
    from hwnas.families import DEFAULT_FAMILY, get_family
    from hwnas.families.tables import stats_frame
    from hwnas.fileio import atomic_path
    from hwnas.space import read_table_frame

    fam = get_family(family or DEFAULT_FAMILY)
    if classes < 1:
        raise InputError(f"--classes must be at least 1, got {classes}")
    fam.check_width(width_mult)
    check_out_file(out)
    df = stats_frame(fam, read_table_frame(table), width_mult, classes, source=str(table), precision=precision)
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

    check_out_file(out)
    supernet = renamed("--supernet", supernet, "--checkpoint", checkpoint)
    model, archs, loaders = subnets_of_checkpoint(supernet, table=table, arch_json=arch, data=data_config(data))
    with make_progress(err_console) as bar:
        task = bar.add_task("evaluate", total=len(archs), info="")
        rows = evaluate_subnets(model, archs, loaders, split=split,
                                progress=lambda done, total: bar.update(task, completed=done))
    result = make_table("id", "arch", f"{split} top-1 %", "loss")
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
                                  f"ofa_net('{DEFAULT.published[DEFAULT.default_width]}', pretrained=True) loads), "
                                  "downloaded yourself."),
    family: Optional[str] = FamilyOpt,
    width_mult: Optional[float] = typer.Option(None, "--width-mult", help="Its width multiplier "
                                               f"({'; '.join(f'{n}: {or_list(get_family(n).widths)}' for n in family_names())}). "
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
    family: Optional[str] = family_option(f"Search-space family: {or_list(family_names())} "
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
    data_cfg = data_config(data)
    if init_from is not None:
        from hwnas.supernet.data import DataConfig
        from hwnas.supernet.train import transfer_config

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
        top1 = ", ".join(f"{what} {last[key]:.2f}%" for what, key in (("max", "val_top1_max"), ("min", "val_top1_min"))
                         if isinstance(last.get(key), (int, float)))
        err_console.print(f"done: {out} (last phase {last['phase']}" + (f", val top-1 {top1}" if top1 else "") + ")")


# -- search ---------------------------------------------------------------------------------
