"""Progress for long work, fed by the library's `progress(event=..., **fields)` callbacks.

Library functions take a plain callback so they stay usable (and testable) without a terminal.
On a terminal, progress is drawn as rich bars; into a pipe or a file (a CI log, `| tee`), bars
cannot redraw, so it is printed as plain lines instead: whole, never cut to a width.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["EventProgress", "OutputConsole", "PlainProgress", "TrainProgress", "make_progress"]

PIPE_WIDTH = 4096  # a pipe or a file has no width: nothing is cut or wrapped to fit one
PLAIN_INTERVAL_S = 10.0  # plain progress: at most one line per task this often (plus start and end)


class OutputConsole(Console):
    """A rich console that fits its output to the terminal's width only on a terminal; into a
    pipe or a file (even with COLUMNS=80) every table cell and line is printed whole, so a
    script that greps the output finds full names. No emoji codes: a message quoting a user's
    `sha256:AA:BB` must print as given, not as 'sha256🆎'."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)  # type: ignore[attr-defined]
        return size if self.is_terminal else ConsoleDimensions(PIPE_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _count(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


class PlainProgress:
    """The part of rich's `Progress` the CLI uses, printed as plain lines: one when a task is
    first updated, at most one every `interval` seconds while it runs, and one when it completes."""

    def __init__(self, console: Console, disable: bool = False, interval: float = PLAIN_INTERVAL_S):
        self.console, self.disable, self.interval = console, disable, interval
        self._tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, info: str = "", **_: Any) -> int:
        task = len(self._tasks)
        self._tasks[task] = {"description": description, "total": total, "completed": 0, "info": info,
                             "start": time.monotonic(), "printed": None, "finished": False}
        return task

    def remove_task(self, task: int) -> None:
        self._tasks.pop(task, None)

    def update(self, task: int, *, completed: float | None = None, total: float | None = None,
               info: str | None = None, **_: Any) -> None:
        t = self._tasks[task]
        for key, value in (("completed", completed), ("total", total), ("info", info)):
            if value is not None:
                t[key] = value
        now = time.monotonic()
        finished = t["total"] is not None and t["completed"] >= t["total"]
        if finished and t["finished"]:
            return  # said already
        t["finished"] = finished
        if finished or t["printed"] is None or now - t["printed"] >= self.interval:
            t["printed"] = now
            if not self.disable:
                self.console.print(self._line(t, now - t["start"]), markup=False, highlight=False,
                                   soft_wrap=True)

    @staticmethod
    def _line(t: dict[str, Any], elapsed: float) -> str:
        done, total, info = t["completed"], t["total"], f" {t['info']}" if t["info"] else ""
        if total is None:
            return f"{t['description']}: {_count(done)}{info} ({_clock(elapsed)})"
        if t["finished"]:
            count = "" if total == 1 else f" {_count(done)}/{_count(total)}"
            return f"{t['description']}:{count} done{info} ({_clock(elapsed)})"
        eta = f", eta {_clock(elapsed / done * (total - done))}" if done > 0 else ""
        return (f"{t['description']}: {_count(done)}/{_count(total)} ({100 * done / max(total, 1e-9):.0f}%)"
                f"{info} ({_clock(elapsed)}{eta})")


def make_progress(console: Console | None = None, disable: bool = False) -> Progress | PlainProgress:
    """Rich bars on a terminal, plain lines (`PlainProgress`) anywhere else; `disable` or
    HWNAS_NO_PROGRESS=1: nothing."""
    console = console or OutputConsole(stderr=True)
    disable = disable or os.environ.get("HWNAS_NO_PROGRESS") == "1"
    if not console.is_terminal:
        return PlainProgress(console, disable)
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("eta"),
                    TimeRemainingColumn(), console=console, disable=disable)


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
    An event that carries `message=` is a note (e.g. what the accuracy predictor stands on): it is
    printed as a line, once.

    Used by search and the quickstart, whose stages report under different event names.
    """

    LABELS = {"accuracy": "accuracy table", "search": "search", "verify": "verify on device",
              "verify-accuracy": "verify top-1 (test split)", "fit-accuracy": "fit accuracy predictor"}

    def __init__(self, console: Console | None = None, disable: bool = False):
        self.progress = make_progress(console, disable)
        self.disable = disable
        self.tasks: dict[str, Any] = {}
        self.notes: set[str] = set()

    def __enter__(self) -> "EventProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, event: str, done: int | None = None, total: int | None = None, **info: Any) -> None:
        if "message" in info:
            if info["message"] not in self.notes and not self.disable:
                self.notes.add(info["message"])
                self.progress.console.print(info["message"], markup=False, highlight=False, soft_wrap=True)
            return
        key = f"{event} {info['device']}" if "device" in info else event
        label = self.LABELS.get(event, event) + (f" {info['device']}" if "device" in info else "")
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(label, total=total, info="")
        text = str(info.get("key", "")) if "key" in info else ""
        if done is None and total is None:  # a one-shot step: show it as done
            self.progress.update(self.tasks[key], total=1, completed=1, info=text)
        else:
            self.progress.update(self.tasks[key], completed=done, total=total, info=text)
