"""Rich progress bars for long work, fed by the library's `progress(event=..., **fields)` callbacks.

Library functions take a plain callback so they stay usable (and testable) without a terminal.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["TrainProgress", "make_progress"]


def make_progress(console: Console | None = None, disable: bool = False) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("eta"),
                    TimeRemainingColumn(), console=console,
                    disable=disable or os.environ.get("HWNAS_NO_PROGRESS") == "1")


class TrainProgress:
    """One bar per epoch showing loss, accuracy and resolution; epoch summaries printed above it."""

    def __init__(self, console: Console | None = None):
        self.progress = make_progress(console)
        self.console = self.progress.console
        self.task = None
        self.key = None

    def __enter__(self) -> "TrainProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def update(self, event: str, **f: Any) -> None:
        if event == "step":
            key = (f["phase"], f["epoch"])
            if key != self.key:
                if self.task is not None:
                    self.progress.remove_task(self.task)
                self.task = self.progress.add_task(f"{f['phase']} ep {f['epoch'] + 1}", total=f["steps"],
                                                   info="")
                self.key = key
            info = f"loss {f['loss']:.3f} acc {f['acc']:.1f}% lr {f['lr']:.4f} r{f['r']}"
            self.progress.update(self.task, completed=f["step"], info=info)
        elif event == "epoch":
            vals = " ".join(f"{k} {v}" for k, v in f.items() if k.startswith("val_") or k.startswith("train_"))
            self.console.print(f"{f['phase']} epoch {f['epoch']}: {vals} ({f['elapsed_s']} s)", highlight=False)


class EventProgress:
    """Bars for `progress(event, done=, total=, **info)` callbacks: one bar per event (and device).

    Used by search and the quickstart, whose stages report under different event names.
    """

    LABELS = {"accuracy": "accuracy table", "search": "search", "verify": "verify on device",
              "verify-accuracy": "verify top-1 (test split)", "fit-accuracy": "fit accuracy predictor"}

    def __init__(self, console: Console | None = None, disable: bool = False):
        self.progress = make_progress(console, disable)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> "EventProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, event: str, done: int | None = None, total: int | None = None, **info: Any) -> None:
        key = f"{event} {info['device']}" if "device" in info else event
        label = self.LABELS.get(event, event) + (f" {info['device']}" if "device" in info else "")
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(label, total=total, info="")
        text = str(info.get("key", "")) if "key" in info else ""
        if done is None and total is None:  # a one-shot step: show it as done
            self.progress.update(self.tasks[key], total=1, completed=1, info=text)
        else:
            self.progress.update(self.tasks[key], completed=done, total=total, info=text)
