"""LatencyStats: consistent summaries and a lossless JSON round trip."""

from __future__ import annotations

import json

import pytest

from hwnas.devices import LatencyStats
from hwnas.devices.stats import summarize
from hwnas.errors import InputError


def test_summary_fields():
    s = summarize([3.0, 1.0, 2.0, 10.0, 2.0], warmup=4, device="cpu-ort", threads=1)
    assert (s.median_ms, s.min_ms, s.n, s.warmup) == (2.0, 1.0, 5, 4)
    assert s.mean_ms == pytest.approx(3.6)
    assert s.min_ms <= s.median_ms <= s.p90_ms <= s.p99_ms <= 10.0
    assert s.cv == pytest.approx(s.std_ms / s.mean_ms)
    assert s.corrected_ms == s.median_ms and s.ratio is None


def test_json_round_trip():
    s = summarize([1.0, 1.2, 1.1], warmup=2, corrected_ms=1.05, ref_median_ms=0.5,
                  ref_ms=[0.5, 0.51], rounds=3, device="d", backend="onnxruntime",
                  versions={"onnxruntime": "1.31.1"})
    again = LatencyStats.from_dict(json.loads(json.dumps(s.to_dict())))
    assert again == s and again.ratio == pytest.approx(2.1)


def test_from_dict_names_missing_fields():
    with pytest.raises(InputError, match="missing .*median_ms"):
        LatencyStats.from_dict({"mean_ms": 1.0})
