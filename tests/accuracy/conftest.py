from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hwnas.space import SearchSpace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))  # search_stubs


@pytest.fixture(scope="session")
def small_space() -> SearchSpace:
    return SearchSpace.from_dict({"r": "32:48:4"})
