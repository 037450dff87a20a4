"""hwnas: hardware-aware neural architecture search and latency profiling.

Train one once-for-all supernet, profile its subnets on each target device, fit a latency
predictor, search the accuracy/latency Pareto front, verify on the device, export.
"""

from __future__ import annotations

__version__ = "0.1.0"

from hwnas.errors import HwnasError
from hwnas.space import Arch, SearchSpace

__all__ = ["__version__", "Arch", "SearchSpace", "HwnasError"]
