"""Fixtures for the device tests: a small MobileNetV3-like CNN whose outputs depend on its input.

A randomly initialised MobileNet in eval mode gives nearly the same output for every input, so
"outputs match" would prove nothing. This net's BN statistics are set on real MNIST digits (they
ship with hwnas), and the tests assert that outputs differ across digits.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from hwnas.devices import Device, get_device

RES = 32


class TinyNet(nn.Module):
    """Stem, depthwise 5x5 + squeeze-excite, pointwise, head: the op types of OFA subnets."""

    def __init__(self, width: int = 16, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(width, width, 5, 1, 2, groups=width, bias=False),
                                nn.BatchNorm2d(width), nn.ReLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(width, width // 2, 1), nn.ReLU(),
                                nn.Conv2d(width // 2, width, 1), nn.Hardsigmoid())
        self.pw = nn.Sequential(nn.Conv2d(width, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.head = nn.Sequential(nn.Conv2d(24, 48, 1, bias=False), nn.BatchNorm2d(48),
                                  nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(48, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.dw(self.stem(x))
        return self.head(self.pw(x * self.se(x)))


def _digits() -> np.ndarray:
    """5000 real MNIST digits as (N, 3, 32, 32) float32, normalised; channels differ."""
    from hwnas.supernet.mnist_digits import read_digits

    x = read_digits()[0].astype(np.float32) / 255.0
    x = np.pad(x, ((0, 0), (2, 2), (2, 2)))
    x = np.stack([x, x.transpose(0, 2, 1), 1.0 - x], axis=1)
    return ((x - 0.3) / 0.35).astype(np.float32)


@pytest.fixture(scope="session")
def digits() -> np.ndarray:
    return _digits()


def _calibrated(width: int, digits: np.ndarray) -> nn.Module:
    torch.manual_seed(0)
    net = TinyNet(width)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    net.train()
    with torch.no_grad():
        for i in range(0, 1024, 256):
            net(torch.from_numpy(digits[i:i + 256]))
    return net.eval()


@pytest.fixture(scope="session")
def tiny_net(digits: np.ndarray) -> nn.Module:
    return _calibrated(16, digits)


@pytest.fixture(scope="session")
def make_net(digits: np.ndarray):
    """make_net(width) -> a calibrated TinyNet of that stem width (latency grows with it)."""
    return lambda width: _calibrated(width, digits)


@pytest.fixture(scope="session")
def test_inputs(digits: np.ndarray) -> list[np.ndarray]:
    """Eight held-out digits, one per (1, 3, 32, 32) input."""
    return [digits[4000 + i:4001 + i] for i in range(8)]


@pytest.fixture(scope="session")
def example_input() -> torch.Tensor:
    return torch.zeros(1, 3, RES, RES)


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """torch's thread count is process-wide; put it back after each test."""
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _with_threads(name: str, threads: int) -> Device:
    """A built-in device with another thread count (and its own name); skips when the device
    cannot be used here, with the reason."""
    base = get_device(name)
    device = Device(**{**base.model_dump(), "name": f"{name}-{threads}t", "threads": threads})
    reason = device.available()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return device


@pytest.fixture(scope="session")
def with_threads():
    return _with_threads
