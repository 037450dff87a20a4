"""`SearchSettings`: everything a search is asked, checked once, before anything is read or run.

`run_search(run_dir, settings)` takes one. Each broken rule is one `SettingError` line naming the
setting as spelled here (``top_k must be at least 1``); the CLI renders the same line with its
flags (``--top-k``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hwnas.search.checks import SettingError, literal, one_of, positive_number, whole_number, within
from hwnas.search.goals import Goals
from hwnas.search.precision import PRECISIONS
from hwnas.search.risk import DEFAULT_CONFIDENCE, DEFAULT_MARGIN

__all__ = ["SearchSettings"]


@dataclass(frozen=True)
class SearchSettings:
    """What to search for and how (validated on construction).

    `device`: one device or several; `latency_ms`: one budget for all or one per device.
    `algo`: a registered algorithm (`hwnas.search.algorithms.algorithm_names`): "evolution"
    (Once-for-All's constrained finder; with `pareto`, the NSGA-II mode), "nsga2", "optuna-nsga2"
    / "optuna-tpe" (`workers` processes sharing `storage`, default the run's journal file;
    `study_name`), "random"; `population`, `generations`, `n_trials`: None = the algorithm's default.
    `objectives`: top-1 and the first device's latency unless given (any of "top1",
    "ms:<device>", "macs", "params", "ram_kb", "flash_kb"); `max_macs` / `max_params` / `max_ram_kb` /
    `max_flash_kb`: limits besides the budgets (RAM: the activation arena a memory-planned program
    reserves at batch 1; flash: weight bytes; kB = 1024 bytes; `hwnas.families.memory`).
    `accuracy_risk`: sigmas of the accuracy predictor's uncertainty the top-1 objective is lowered by.
    `latency_confidence`: search under an upper bound of the predicted latency at this confidence
    (`hwnas.search.risk`; 0: the point prediction); verification still judges the measurement.
    `accuracy_samples`: grow the run's accuracy table to this many subnets first (None: as it is).
    `verify`: measure the best candidates on the devices (`protocol`:
    `hwnas.profiling.protocol.ProtocolSettings`) until `accuracy_checks` (default 3 * top_k) hold
    every budget with `latency_margin` or `max_measure` (default 2 * accuracy_checks) are measured,
    evaluate those that fit on the test split and return the `top_k` best by measured top-1.
    `precision`: "fp32", "bf16", "int8" or "auto" (`hwnas.search.api.run_search`); `int8_samples`:
    subnets the drop model of a reduced precision is measured on when its table is shorter.
    `plot`: write pareto.png. `devices_file`: the devices YAML (default: the built-in devices)."""

    device: str | Sequence[str]
    latency_ms: float | Sequence[float]
    algo: str = "evolution"
    pareto: bool = False
    workers: int = 1
    storage: str | None = None
    top_k: int = 5
    seed: int = 0
    verify: bool = True
    devices_file: str | Path | None = None
    objectives: Sequence[str] | None = None
    max_macs: float | None = None
    max_params: float | None = None
    max_ram_kb: float | None = None
    max_flash_kb: float | None = None
    population: int | None = None
    generations: int | None = None
    n_trials: int | None = None
    study_name: str | None = None
    accuracy_samples: int | None = None
    protocol: Any = None
    max_measure: int | None = None
    accuracy_checks: int | None = None
    latency_margin: float = DEFAULT_MARGIN
    #: search under the latency predictor's upper bound at this confidence (0: the point prediction)
    latency_confidence: float = DEFAULT_CONFIDENCE
    accuracy_risk: float = 1.0
    plot: bool = True
    precision: str = "fp32"
    int8_samples: int = 8
    #: with `verify`: compare the front with the run's baselines (`hwnas.search.versus`)
    baselines: bool = True
    #: with `verify`, when fewer than `top_k` fit: refit the latency predictors on the verification
    #: measurements and search again, at most this many times
    refit_rounds: int = 1
    #: device -> latency budget (ms), from `device` and `latency_ms`
    budgets: dict[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from hwnas.search.algorithms import get_algorithm

        one_of("precision", self.precision, PRECISIONS)
        object.__setattr__(self, "budgets", _budgets(self.device, self.latency_ms))
        if self.objectives is not None:
            object.__setattr__(self, "objectives", tuple(self.objectives))
        algorithm = get_algorithm(self.algo)
        for name in ("population", "generations", "n_trials", "accuracy_checks", "max_measure"):
            whole_number(name, getattr(self, name), optional=True)
        whole_number("refit_rounds", self.refit_rounds, least=0)
        for name in ("workers", "top_k", "int8_samples"):
            whole_number(name, getattr(self, name))
        algorithm.check_parallel(self.workers, self.storage)
        within("latency_margin", self.latency_margin, 0.0, 0.5, " (a fraction: 0.02 is 2%)")
        within("accuracy_risk", self.accuracy_risk, 0, 10)
        within("latency_confidence", self.latency_confidence, 0.0, 0.99, " (0: the point prediction; 0.9 is 90%)")
        self.goals  # objectives and limits against the devices

    @property
    def devices(self) -> list[str]:
        return list(self.budgets)

    @property
    def goals(self) -> Goals:
        """The objectives and limits the settings ask for (`hwnas.search.goals.Goals`)."""
        return Goals(tuple(self.budgets), self.budgets, tuple(self.objectives or ()), self.max_macs, self.max_params,
                     self.max_ram_kb, self.max_flash_kb)

    def request(self, run_dir: Path):
        """What the algorithm is asked (`hwnas.search.algorithms.SearchRequest`)."""
        from hwnas.search.algorithms import SearchRequest

        return SearchRequest(Path(run_dir), seed=self.seed, pareto=self.pareto, population=self.population,
                             generations=self.generations, n_trials=self.n_trials, workers=self.workers,
                             storage=self.storage, study_name=self.study_name)

    def replace(self, **changes: Any) -> "SearchSettings":
        """These settings with `changes` (validated again)."""
        return dataclasses.replace(self, **changes)


def _budgets(device: str | Sequence[str], latency_ms: float | Sequence[float]) -> dict[str, float]:
    devices = [device] if isinstance(device, str) else list(device)
    if not devices:
        raise SettingError("name a {device} to search for", "device")
    if len(set(devices)) != len(devices):
        raise SettingError(f"a {{device}} is named twice: {literal(devices)}", "device")
    values = [latency_ms] * len(devices) if isinstance(latency_ms, (int, float)) else list(latency_ms)
    if len(values) != len(devices):
        raise SettingError(f"give one {{latency_ms}} for all devices or one per device; got {len(values)} "
                           f"for {len(devices)} devices", "latency_ms")
    for v in values:
        positive_number("latency_ms", v, "a positive number of milliseconds")
    return {d: float(v) for d, v in zip(devices, values)}
