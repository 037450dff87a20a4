"""Supernet training: the checkpoint, phases in order, accuracy and loss curves (the loss named by
what it sums in each phase)."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import streamlit as st

from hwnas.dashboard import charts, data
from hwnas.dashboard.views.common import md_code, show_missing, table


def _checkpoint(files: data.RunFiles) -> tuple[str, Path | None, Path | None]:
    """(the checkpoint's name, its stem, its train_log.jsonl)."""
    from hwnas.run import open_run
    from hwnas.supernet.checkpoint_meta import shipped_checkpoint

    try:
        stem = open_run(files.root, create=False).supernet
    except Exception:  # an unreadable config is reported on the overview page
        return "unknown (config.yaml unreadable)", None, None
    name = str(stem) if stem else f"shipped ({shipped_checkpoint()})"
    stem = Path(stem) if stem else shipped_checkpoint()
    for candidate in (stem.parent / "train_log.jsonl", stem.with_name(stem.name + "_train_log.jsonl")):
        if candidate.exists():
            return name, stem, candidate
    return name, stem, None


SERIES_NAMES = {"train_acc": "training accuracy (sampled subnets)", "val_top1_max": "largest subnet (validation)",
                "val_top1_mid": "a fixed middle subnet (validation)", "val_top1_min": "smallest subnet (validation)"}


def page_training(files: data.RunFiles) -> None:
    st.header("Supernet training")
    name, stem, path = _checkpoint(files)
    st.markdown(f"Checkpoint: {md_code(name)}" + (f" — log {md_code(path)}" if path else ""))
    log = data.load_train_log(path)
    if log.empty:
        show_missing("training log for this run's supernet",
                     "hwnas train --config experiments/supernet_fashion.yaml --out runs/supernet")
        return
    bounds = data.phase_bounds(log)
    order = list(bounds["phase"])
    x = alt.X("epoch_total:Q", title="epoch (all phases, in training order)")
    edges = bounds.assign(at=bounds["start"] - 0.5,
                          label=[f"{i}. {p}" for i, p in zip(bounds["order"], bounds["phase"])])
    rules = alt.Chart(edges).mark_rule(strokeDash=[3, 3], color="#888888").encode(x="at:Q")
    labels = alt.Chart(edges).mark_text(align="left", dx=3, dy=6, angle=0, baseline="top", color="#555555").encode(
        x="at:Q", y=alt.value(0), text="label:N")
    value_cols = [c for c in SERIES_NAMES if c in log.columns]
    long = log.melt(id_vars=["epoch_total", "phase"], value_vars=value_cols)
    long["series"] = long["variable"].map(SERIES_NAMES)
    acc = alt.Chart(long).mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title="top-1 accuracy (%)", scale=alt.Scale(zero=False)),
        color=alt.Color("series:N", title=None, legend=charts.legend()),
        tooltip=["phase", "series", alt.Tooltip("value:Q", format=".2f")])
    st.altair_chart(charts.svg((rules + labels + acc).properties(
        height=charts.with_legend(340, len(value_cols)), title="Accuracy by epoch; dashed lines: phase boundaries")),
        width="stretch")
    _loss_chart(log.assign(loss=data.loss_terms(log, data.distillation_weight(stem))), order, x, rules + labels)
    per_phase = log.groupby("phase", sort=False).last().reindex(order).reset_index()
    per_phase.insert(0, "order", range(1, len(per_phase) + 1))
    per_phase = per_phase.merge(bounds[["phase", "start", "end"]], on="phase")
    kept = [c for c in ("order", "phase", "start", "end", "val_top1_max", "val_top1_mid", "val_top1_min")
            if c in per_phase]
    st.subheader("Phases in training order: epochs and accuracy at the end of each")
    table(per_phase[kept].rename(columns={"start": "first epoch", "end": "last epoch", **SERIES_NAMES}),
          width="content")
    table(log, width="content")


def _loss_chart(log, order: list[str], x: alt.X, marks) -> None:
    """The training loss, coloured by phase, named by what it sums: a jump where distillation joins
    the cross-entropy is that term, not a regression."""
    terms = list(dict.fromkeys(log["loss"]))
    title = "training loss: " + " / ".join(terms)
    loss = alt.Chart(log).mark_line(point=True).encode(
        x=x, y=alt.Y("train_loss:Q", title=title, scale=alt.Scale(zero=False)),
        color=alt.Color("phase:N", title="phase", sort=order, scale=alt.Scale(domain=order), legend=charts.legend()),
        strokeDash=alt.StrokeDash("loss:N", title="loss", legend=charts.legend()),
        tooltip=["phase", "epoch", "loss", "train_loss"])
    st.altair_chart(charts.svg((marks + loss).properties(height=charts.with_legend(260, len(order) + len(terms)))),
                    width="stretch")
    if len(terms) > 1:
        first = log.loc[log["loss"] != terms[0], "epoch_total"].min()
        st.caption(f"From epoch {first} the loss adds the distillation term (each sampled subnet learns the largest "
                   "network's outputs too), so it is not comparable with the cross-entropy of the first phase: a jump "
                   "there is that term, not a regression.")
