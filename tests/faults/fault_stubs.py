"""Stand-in predictors for the fault tests, importable by search worker processes (spawn).

`SlowLatency` marks each process that calls it (a file named by its pid in `marker_dir`) and is
slow, so a search with it is still running when the test kills it. `sigint_at_default` starts a
child as if from a terminal."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np


def sigint_at_default() -> None:
    """A `preexec_fn` that gives the child SIGINT at its default even when the tests run in the
    background (`cmd &` in a script starts them with SIGINT ignored; exec keeps "ignored", and
    Python then installs no KeyboardInterrupt handler: the child would not see Ctrl-C at all)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class SlowLatency:
    def __init__(self, marker_dir: str, delay_s: float = 0.2):
        self.marker_dir, self.delay_s = marker_dir, delay_s

    def predict(self, archs) -> np.ndarray:
        Path(self.marker_dir, str(os.getpid())).touch()
        time.sleep(self.delay_s)
        return np.full(len(archs), 1.0)


class FlatAccuracy:
    def predict(self, archs) -> np.ndarray:
        return np.full(len(archs), 50.0)


def slow_problem(marker_dir: str):
    from hwnas.search.problem import Problem
    from hwnas.space import SearchSpace

    space = SearchSpace.from_dict({"r": "32:40:4"})
    return Problem(space, FlatAccuracy(), {"dev": SlowLatency(marker_dir)}, {"dev": 2.0},
                   n_classes=10, use_tables=False)
