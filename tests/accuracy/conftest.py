from __future__ import annotations

import pytest

from hwnas.space import SearchSpace


@pytest.fixture(scope="session")
def small_space() -> SearchSpace:
    return SearchSpace.from_dict({"r": "32:48:4"})
