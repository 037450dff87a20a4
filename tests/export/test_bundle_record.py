"""model.json and verify.json through their schema (`hwnas.export.record`): the exporter writes
only what fits; a reader refuses a model.json that does not fit in one line."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from hwnas.export.manifest import FORMAT, VERSION, BundleError, read_meta
from hwnas.export.record import BundleRecord, checked_bundle, checked_verify

META = {"format": FORMAT, "version": VERSION, "id": "0123456789ab", "status": "verified",
        "accuracy": {"split": "test", "top1": 93.1, "n": 10000},
        "latency": {"ms": 0.84, "source": "search verification (search s1)", "within_budget": True},
        "arch_text": "r40 | ..."}


def test_the_exporter_writes_only_what_fits():
    assert checked_bundle(dict(META)) == META
    with pytest.raises(ValidationError):
        checked_bundle({k: v for k, v in META.items() if k != "accuracy"})
    with pytest.raises(ValidationError):
        checked_verify({"status": "verified", "device": "cpu-ort", "latency": {"ms": "fast"}})
    record = BundleRecord.model_validate(META)
    assert record.latency.ms == 0.84 and record.accuracy.n == 10000 and record.model_dump()["arch_text"]


@pytest.mark.parametrize("change, says", [({"accuracy": None}, "accuracy"),
                                          ({"latency": {"ms": "fast"}}, "latency.ms"),
                                          ({"status": ["verified"]}, "status")])
def test_a_model_json_that_does_not_fit_is_refused_in_one_line(tmp_path, change, says):
    (tmp_path / "model.json").write_text(json.dumps({**META, **change}))
    with pytest.raises(BundleError) as err:
        read_meta(tmp_path)
    assert says in str(err.value) and "export it again" in str(err.value) and "\n" not in str(err.value)
