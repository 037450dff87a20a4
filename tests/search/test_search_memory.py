"""A search under memory limits: predicted RAM / flash for every front row, the limits judged on
the artifact (here a stand-in for the ExecuTorch export), their records in search.json."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from test_search_api import DEV, SMALL, _fake_device, run  # noqa: F401 (the run fixture)

from hwnas.families.memory import KB, family_memory
from hwnas.families.sampling import sample_mixed
from hwnas.search import run_search


def test_a_ram_limit_holds_on_the_artifact_and_is_reported(run):  # noqa: F811
    space = run.space
    ram, _ = family_memory(space.family, sample_mixed(space, 200, np.random.default_rng(0)), space.width_mult, 10)
    limit = float(np.quantile(ram, 0.5)) / KB
    exported = []

    def artifact(archs):
        exported.extend(a.id for a in archs)
        r, f = family_memory(space.family, space.to_matrix(list(archs)), space.width_mult, 10)
        out = [{"ram_kb": a / KB, "flash_kb": b / KB} for a, b in zip(r, f)]
        out[0]["ram_kb"] = limit * 1.5  # the first one's artifact breaks the limit
        return out

    res = run_search(run.run_dir, DEV, run.budget * 2, top_k=2, seed=0, measure=_fake_device(run),
                     max_ram_kb=limit, measure_memory=artifact, **SMALL)
    assert res.best and exported and exported[0] not in [b["id"] for b in res.best]
    for b in res.best:
        assert b["ram_kb"] <= limit and b["measured_ram_kb"] <= limit and b["flash_kb"] > 0
    csv = pd.read_csv(run.run_dir / "pareto.csv")
    assert {"ram_kb", "flash_kb", "measured_ram_kb", "measured_flash_kb"} <= set(csv.columns)
    assert (csv.loc[csv["on_front"], "ram_kb"] <= limit + 1e-9).all()
    doc = json.loads((run.run_dir / "search.json").read_text())
    assert doc["settings"]["max_ram_kb"] == limit
    checks = {c["id"]: c for c in doc["memory"]["checks"]}
    assert not checks[exported[0]]["within_limits"] and checks[exported[0]]["measured"]["ram_kb"] > limit
