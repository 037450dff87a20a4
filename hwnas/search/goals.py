"""What a search asks for: the objectives it optimises and the limits a subnet must meet.

Columns are named ``top1``, ``ms:<device>``, ``macs``, ``params``, ``ram_kb``, ``flash_kb``. Every
objective but top-1 is minimised; a subnet's constraint violation is the sum of its relative
excesses over the latency budgets and the MACs / params / RAM / flash limits (0 = feasible).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np

from hwnas.errors import InputError
from hwnas.search.checks import SettingError, literal, positive_number

__all__ = ["TOP1", "ms_key", "Goals", "objectives_beyond"]

TOP1 = "top1"
COUNTS = ("macs", "params", "ram_kb", "flash_kb")  # the exact cost columns a goal may name besides latency
#: objective aliases users type (``--objective ram``)
ALIASES = {"ram": "ram_kb", "flash": "flash_kb"}


def ms_key(device: str) -> str:
    return f"ms:{device}"


def objectives_beyond(devices: Sequence[str], extra: Sequence[str]) -> tuple[str, ...] | None:
    """Top-1, every device's latency, then `extra` (None without extras: the default objectives)."""
    return (TOP1, *(ms_key(d) for d in devices), *extra) if extra else None


@dataclass(frozen=True)
class Goals:
    """Maximise top-1 and minimise the other `objectives` subject to ``ms:<device> <=
    budgets[device]`` and the optional MACs / params limits. `devices`: every device with a
    latency column (budgets name some or all of them). Validated on construction."""

    devices: tuple[str, ...]
    budgets: Mapping[str, float]
    objectives: tuple[str, ...] = ()
    max_macs: float | None = None
    max_params: float | None = None
    max_ram_kb: float | None = None
    max_flash_kb: float | None = None

    def __post_init__(self) -> None:
        if not self.devices:
            raise InputError("name at least one device to search for")
        unknown = set(self.budgets) - set(self.devices)
        if unknown:
            raise InputError(f"budget for device(s) {sorted(unknown)} without a latency predictor")
        for dev, ms in self.budgets.items():
            if not (isinstance(ms, (int, float)) and ms > 0 and np.isfinite(ms)):
                raise InputError(f"the latency budget for '{dev}' must be a positive number of ms, got {ms!r}")
        for name in ("max_macs", "max_params"):
            positive_number(name, getattr(self, name), "a positive count (e.g. 3e8)", optional=True,
                            hint="; leave it out for no limit")
        for name in ("max_ram_kb", "max_flash_kb"):
            positive_number(name, getattr(self, name), "a positive number of kB (1 kB = 1024 bytes)",
                            optional=True, hint="; leave it out for no limit")
        object.__setattr__(self, "objectives", tuple(ALIASES.get(o, o) for o in self.objectives))
        if not self.objectives:
            object.__setattr__(self, "objectives", (TOP1, ms_key(self.devices[0])))
        allowed = {TOP1, *COUNTS, *(ms_key(d) for d in self.devices)}
        bad = [o for o in self.objectives if o not in allowed]
        if bad or TOP1 not in self.objectives:
            raise SettingError(f"{{objectives}} must include top1 and come from {literal(sorted(allowed))}; got "
                               f"{literal(list(self.objectives))}", "objectives")

    @property
    def limits(self) -> dict[str, float]:
        """Every constrained column and its limit."""
        out = {ms_key(d): float(v) for d, v in self.budgets.items()}
        for key, limit in self.count_limits.items():
            if limit is not None:
                out[key] = float(limit)
        return out

    @property
    def count_limits(self) -> dict[str, float | None]:
        """Each count column's limit (None: none)."""
        return {"macs": self.max_macs, "params": self.max_params, "ram_kb": self.max_ram_kb,
                "flash_kb": self.max_flash_kb}

    @cached_property
    def limit_items(self) -> tuple[tuple[str, float], ...]:
        return tuple(self.limits.items())  # (read per batch: made once)

    def violation(self, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """Sum of relative excesses over every limit of `n` rows' columns `cols` (0 = feasible)."""
        violation = np.zeros(n)
        for key, limit in self.limit_items:
            violation += np.maximum(cols[key] / limit - 1.0, 0.0)
        return violation

    def count_columns(self) -> list[str]:
        """The exact count columns (`COUNTS`) an objective or a limit needs."""
        limits = self.count_limits
        return [k for k in COUNTS if k in self.objectives or limits[k] is not None]

    def loss(self, cols: Mapping[str, np.ndarray]) -> np.ndarray:
        """[n, len(objectives)], every objective minimised (top-1 negated)."""
        return np.stack([-cols[o] if o == TOP1 else cols[o] for o in self.objectives], axis=1)
