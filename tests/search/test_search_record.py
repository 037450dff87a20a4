"""search.json's schema (`hwnas.search.record`): the writer's output validates and carries the
version; a file from before the schema (no version) reads the same way; entries that do not fit
are left out one by one, and keys the schema does not name are kept."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from hwnas.search.record import SEARCH_SCHEMA_VERSION, checked_search, read_search

GOOD = {"search_id": "s1", "settings": {"devices": ["cpu-ort"], "budgets_ms": {"cpu-ort": 1.5}},
        "best": [{"id": "0123456789ab", "top1_pred": 92.1, "measured_top1": 91.9, "ms_pred": {"cpu-ort": 1.0},
                  "measured_ms": {"cpu-ort": 1.1}, "describe": "r40 | ..."}],
        "verification": [{"id": "0123456789ab", "device": "cpu-ort", "measured_ms": 1.1, "rel_se": 0.01,
                          "budget_ms": 1.5, "accepted": True}],
        "latency_trust": {"cpu-ort": {"n": 9, "within_10": 0.5, "poor": False, "kendall_tau": None}},
        "tie": None, "latency_risk": {"confidence": 0.95}}


def test_the_writer_stamps_the_version_and_refuses_what_does_not_fit():
    doc = checked_search(GOOD)
    assert doc["schema_version"] == SEARCH_SCHEMA_VERSION and doc["latency_risk"] == {"confidence": 0.95}
    with pytest.raises(ValidationError):
        checked_search({**GOOD, "best": [{"id": "not-an-id"}]})


def test_a_file_without_a_version_reads_as_version_1(tmp_path):
    (tmp_path / "search.json").write_text(json.dumps(GOOD))
    record = read_search(tmp_path / "search.json")
    assert record.schema_version == 1 and record.settings.budgets_ms == {"cpu-ort": 1.5}
    assert record.best[0].measured_ms == {"cpu-ort": 1.1} and record.verification[0].accepted
    assert record.model_dump()["latency_risk"] == {"confidence": 0.95}  # unknown keys kept


def test_entries_that_do_not_fit_are_left_out_one_by_one(tmp_path):
    hostile = {**GOOD, "best": [{"id": "0123456789ab` ![x](http://192.0.2.1/p.png)"}, *GOOD["best"]],
               "verification": [{"id": "0123456789ab", "device": "cpu-ort", "measured_ms": "fast"},
                                *GOOD["verification"]],
               "latency_trust": {"cpu-ort": {"n": "many"}}, "settings": {"budgets_ms": "fast"}, "history": 3}
    (tmp_path / "search.json").write_text(json.dumps(hostile))
    record = read_search(tmp_path / "search.json")
    assert [b.id for b in record.best] == ["0123456789ab"] and len(record.verification) == 1
    assert record.latency_trust == {} and record.settings.budgets_ms == {} and record.history == []
    for text in ("[1, 2]", "not json", ""):
        (tmp_path / "search.json").write_text(text)
        assert read_search(tmp_path / "search.json") is None
    assert read_search(tmp_path / "missing.json") is None
