from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hwnas.space import SearchSpace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))  # search_stubs


@pytest.fixture(scope="session")
def small_space() -> SearchSpace:
    return SearchSpace.from_dict({"r": "32:48:4"})


@pytest.fixture(scope="session")
def family_supernet(tmp_path_factory):
    """family name -> the stem of a tiny untrained supernet checkpoint of it (made once)."""
    from family_runs import save_family_supernet

    made = {}

    def get(family: str):
        if family not in made:
            made[family] = save_family_supernet(family, tmp_path_factory.mktemp(family))
        return made[family]

    return get
