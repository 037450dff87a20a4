"""`SearchSettings`: everything a search is asked, defined once (type, default, bounds, help) and
checked once, before anything is read or run.

`run_search(run_dir, settings)` takes one; `hwnas search` builds its options from these fields.
Each broken rule is one `SettingError` line naming the setting as spelled here (``top_k must be at
least 1, got 0``); the CLI renders the same line with its flags (``--top-k``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Strict, model_validator

from hwnas.devices.protocol_settings import ProtocolSettings
from hwnas.search.checks import SettingError, literal, positive_number
from hwnas.search.goals import Goals
from hwnas.search.risk import DEFAULT_CONFIDENCE, DEFAULT_MARGIN
from hwnas.settings import Settings, setting

__all__ = ["SearchSettings"]

Count = Annotated[int, Strict()]  # a whole number, not a float or a bool that happens to be one
_COUNT = "a positive count (e.g. 3e8)"
_KB = "a positive number of kB (1 kB = 1024 bytes)"
_NO_LIMIT = "; leave it out for no limit"


class SearchSettings(Settings):
    """What to search for and how (validated on construction): ``SearchSettings(device, latency_ms,
    **settings)``.

    `device`: one device or several; `latency_ms`: one budget for all or one per device. `objectives`:
    top-1 and the first device's latency unless given (any of "top1", "ms:<device>", "macs", "params",
    "ram_kb", "flash_kb"). With `verify`, the best candidates are measured on the devices until
    `accuracy_checks` hold every budget or `max_measure` are measured; those that fit are evaluated
    on the test split and the `top_k` best by measured top-1 returned (`hwnas.search.api.run_search`)."""

    device: str | tuple[str, ...] = setting(..., help="Target device (repeat for several).")
    latency_ms: float | tuple[float, ...] = setting(..., help="Budget in ms: one for all devices or one per --device.")
    algo: str = setting("evolution", help="Search algorithm.")
    pareto: bool = setting(False, help="Return and verify the whole Pareto front.")
    workers: Count = setting(1, ge=1, help="Processes for the optuna-* algorithms.")
    storage: Optional[str] = setting(None, help="Optuna storage URL (postgresql://...) or journal file; "
                                     "default RUN/optuna.journal.")
    top_k: Count = setting(5, ge=1, help="Candidates measured on the device.")
    seed: int = setting(0, help="Random seed.")
    verify: bool = setting(True, help="Measure the winners on the device.")
    devices_file: Optional[str | Path] = setting(None, help="The devices YAML (default: the built-in devices).")
    objectives: Optional[tuple[str, ...]] = setting(
        None, help="Extra objectives: ms:<device>, macs, params, ram (ram_kb), flash (flash_kb).")
    max_macs: Optional[float] = setting(None, gt=0, what=_COUNT, hint=_NO_LIMIT, help=(
        "Accept only subnets with at most this many multiply-accumulates (e.g. 3e8)."))
    max_params: Optional[float] = setting(None, gt=0, what=_COUNT, hint=_NO_LIMIT, help=(
        "Accept only subnets with at most this many parameters (e.g. 5e6)."))
    max_ram_kb: Optional[float] = setting(None, gt=0, what=_KB, hint=_NO_LIMIT, help=(
        "Accept only subnets whose activation arena (what a memory-planned ExecuTorch program reserves at "
        "batch 1, at --precision) is at most this many kB (1 kB = 1024 bytes)."))
    max_flash_kb: Optional[float] = setting(None, gt=0, what=_KB, hint=_NO_LIMIT, help=(
        "Accept only subnets whose weights take at most this many kB at --precision."))
    population: Optional[Count] = setting(None, ge=1, help=(
        "evolution/nsga2/optuna-nsga2: subnets per generation (default 100)."))
    generations: Optional[Count] = setting(None, ge=1, help=(
        "evolution/nsga2: generations (default 500; optuna-*: sets --trials with --population)."))
    n_trials: Optional[Count] = setting(None, ge=1, help="optuna-*/random: predictor calls.")
    study_name: Optional[str] = setting(None, help="The Optuna study's name (default: one per search).")
    accuracy_samples: Optional[Count] = setting(None, ge=1, help=(
        "Grow the run's accuracy table to this many subnets first (each one evaluated on the validation "
        "split: seconds to minutes apiece). Default: search with the table as it is."))
    protocol: Optional[ProtocolSettings] = setting(None, help="The measurement protocol of verification.")
    max_measure: Optional[Count] = setting(None, ge=1, help=(
        "Verification measures at most this many candidates (default: 2 x --accuracy-checks)."))
    accuracy_checks: Optional[Count] = setting(None, ge=1, help=(
        "Candidates that must fit the budget on the device; their top-1 is evaluated on the test split and "
        "the best --top-k returned (default: 3 x --top-k)."))
    latency_margin: float = setting(DEFAULT_MARGIN, ge=0.0, lt=0.5, note=" (a fraction: 0.02 is 2%)", help=(
        "Accept a subnet only if measured ms x (1 + margin + 2 x its standard error) is within the budget."))
    latency_confidence: float = setting(DEFAULT_CONFIDENCE, ge=0.0, lt=0.99,
                                        note=" (0: the point prediction; 0.9 is 90%)", help=(
        "Search under an upper bound of the predicted latency at this confidence (the predictor's "
        "out-of-fold errors, split-conformal), so picks hold the budget when first measured; 0: the point "
        "prediction."))
    ties_fastest_first: bool = setting(False, help=(
        "Measure the candidates whose predicted top-1 is within the accuracy predictor's out-of-fold error "
        "of the best fastest first: first tries keep room under the budget (for a device where every "
        "measurement costs a compile and a transfer), at some top-1 (docs/results.md). Default: best "
        "predicted first."))
    accuracy_risk: float = setting(1.0, ge=0, lt=10, help=(
        "Search on predicted top-1 minus this many sigmas of the predictor's uncertainty (0: the prediction "
        "alone)."))
    plot: bool = setting(True, help="Write pareto.png (about 0.3-0.7 s).")
    precision: Literal["fp32", "bf16", "int8", "auto"] = setting("fp32", help=(
        "fp32, bf16 or int8 (each device's <device>-bf16 / <device>-int8 variant; top-1 minus a drop measured "
        "on --int8-samples subnets) or auto (every precision the device has a variant for; the front says which "
        "precision each point uses)."))
    int8_samples: Count = setting(8, ge=1, help=(
        "Subnets in the INT8 accuracy table (measured when it has fewer): the drop model of int8/auto."))
    baselines: bool = setting(True, help=(
        "With --verify: put the run's baselines (`hwnas baseline`) against the front: for each, the fastest "
        "subnet at most as slow (measured) with a test top-1 at least its own."))
    refit_rounds: Count = setting(1, ge=0, help=(
        "When fewer than --top-k fit on the device: refit the latency predictors on the verification "
        "measurements and search again, at most this many times (0: never)."))

    def __init__(self, *given: Any, **values: Any) -> None:
        if len(given) > 2:
            raise TypeError("SearchSettings(device, latency_ms, **settings): the rest by name")
        values.update(zip(("device", "latency_ms"), given))
        super().__init__(**values)

    @model_validator(mode="after")
    def _across_settings(self) -> "SearchSettings":
        from hwnas.search.algorithms import get_algorithm

        self.budgets  # one budget per device
        get_algorithm(self.algo).check_parallel(self.workers, self.storage)
        self.goals  # objectives and limits against the devices
        return self

    @property
    def budgets(self) -> dict[str, float]:
        """device -> latency budget (ms), from `device` and `latency_ms`."""
        return _budgets(self.device, self.latency_ms)

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
        return type(self)(**{**self.values(), **changes})


def _budgets(device: str | tuple[str, ...], latency_ms: float | tuple[float, ...]) -> dict[str, float]:
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
