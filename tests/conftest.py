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


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Torch eager with 2 threads collapses when another process holds a core (shared machine);
    tests that need more threads set them explicitly."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
