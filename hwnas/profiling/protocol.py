"""The measurement protocol's settings for profiling, verification and export."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ProtocolSettings"]


@dataclass(frozen=True)
class ProtocolSettings:
    """`measure_many`'s settings for profiling (why 15 rounds: `hwnas.devices.protocol`, item 6)."""

    rounds: int = 15
    runs: int = 10
    warmup_runs: int = 5
    warmup_s: float = 0.2
    rewarm_runs: int = 2
    ref_runs: int = 5
    seed: int = 0

    def kwargs(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "runs": self.runs, "warmup_runs": self.warmup_runs,
                "warmup_s": self.warmup_s, "rewarm_runs": self.rewarm_runs, "ref_runs": self.ref_runs,
                "seed": self.seed}
