"""Shared data for the latency-predictor tests: real CPU measurements (see data/README.md) and a
simulated GPU (`hwnas.latency.simulate`), split into training rows and held-out rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwnas.latency.api import read_latency_table
from gpu_simulator import simulate_latency
from hwnas.space import SearchSpace

DATA = Path(__file__).parent / "data"
SUBNETS = DATA / "ofa_cpu_subnets.csv"
BLOCKS = DATA / "ofa_cpu_blocks.csv"
N_CLASSES = 10  # the fixture's subnets have 10 classes
N_TRAIN = 200


@dataclass
class Split:
    m: np.ndarray
    y: np.ndarray
    n_classes: int
    n_train: int = N_TRAIN

    @property
    def train(self) -> tuple[np.ndarray, np.ndarray]:
        return self.m[:self.n_train], self.y[:self.n_train]

    @property
    def test(self) -> tuple[np.ndarray, np.ndarray]:
        return self.m[self.n_train:], self.y[self.n_train:]


@pytest.fixture(scope="session")
def ort() -> Split:
    """ONNX Runtime CPU, 1 thread, drift-corrected ms: 200 training + 100 held-out subnets."""
    m, y, _ = read_latency_table(SUBNETS, "ort_ms", "ofa-mbv3")
    return Split(m, y, N_CLASSES)


@pytest.fixture(scope="session")
def blocks() -> pd.DataFrame:
    return pd.read_csv(BLOCKS)


@pytest.fixture(scope="session")
def gpu_rows() -> np.ndarray:
    """700 OFA subnets at W=1.0, r=128..224 (the space's own)."""
    return SearchSpace().sample_matrix(700, 11)


@pytest.fixture(scope="session")
def gpu_a(gpu_rows) -> Split:
    """Simulated GPU A, batch 64, 1.5% measurement noise: 500 training + 200 held-out rows."""
    return Split(gpu_rows, simulate_latency(gpu_rows, "gpu-a", 64, rng=1), 1000, 500)


@pytest.fixture(scope="session")
def gpu_b(gpu_rows) -> Split:
    """Simulated GPU B (another speed, occupancy and launch cost), batch 64."""
    return Split(gpu_rows, simulate_latency(gpu_rows, "gpu-b", 64, rng=2), 1000, 500)
