"""`hwnas finetune`: fine-tune one subnet alone."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hwnas.cli.app import app, console, data_config, err_console, make_table, seed_option
from hwnas.cli.search import finetune_arch


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
    data_cfg = data_config(data)
    cfg = open_run(run, create=False)
    arch = resolve_subnet(cfg, subnet).arch
    err_console.print(f"fine-tuning {arch.id} for {epochs} epoch(s) on the run's training split")
    record = finetune_arch(cfg, arch, settings, data_cfg)
    table = make_table("split", "top-1 before %", "top-1 after %", "images")
    for split in ("val", "test"):
        table.add_row(split, f"{record['top1_before'][split]:.2f}", f"{record['top1_after'][split]:.2f}",
                      str(record["n"][split]))
    console.print(table)
    err_console.print(f"wrote {cfg.files.finetuned(arch.id)} ({record['seconds']:.0f} s); "
                      f"`hwnas export --run {run} --subnet {arch.id} --device D` ships it", soft_wrap=True)
