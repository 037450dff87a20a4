from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    """`gpu` tests skip, with the reason, where no CUDA device exists."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
