from __future__ import annotations

import numpy as np
import pytest

from hwnas.space import SearchSpace


@pytest.fixture(scope="session")
def small_space() -> SearchSpace:
    return SearchSpace.from_dict({"r": "32:48:4"})


@pytest.fixture
def synth_problem(small_space):
    """A problem over exact synthetic predictors: budget at the median subnet's latency."""
    from search_stubs import MacsLatency, SynthAccuracy

    from hwnas.search.problem import Problem

    lat = MacsLatency()
    budget = float(np.median(lat.predict(small_space.sample_matrix(400, 0))))
    return Problem(small_space, SynthAccuracy(), {"dev": lat}, {"dev": budget}, n_classes=10)
