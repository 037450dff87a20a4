"""A bundle's latency is the search's number, and its budget check follows the search's rule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hwnas.export.budget import bundle_latency, judge_latency

VERIFIED = {"measured_ms": 1.80, "rel_se": 0.01, "budget_ms": 2.0, "accepted": True, "margin": 0.02,
            "rule": "measured_ms * (1 + 0.02 + 2 * rel_se) <= budget_ms", "search_id": "s1"}


def stats(ms: float, se: float = 0.01) -> SimpleNamespace:
    return SimpleNamespace(corrected_ms=ms, rel_se=se, n=90)


def test_the_bundle_records_the_searchs_number_and_a_check_that_agrees():
    out = judge_latency(VERIFIED, stats(1.85), lambda: pytest.fail("no re-measurement needed"))
    assert out["ms"] == 1.80 and out["within_budget"] is True and out["checks"][0]["corrected_ms"] == 1.85
    assert bundle_latency({"latency": out}) == (1.80, True)


def test_a_check_over_budget_is_timed_again_paired_with_the_subnet_as_verification_built_it():
    # a busy session (2.43 ms) slows the bundle and its twin alike: the ratio says the bundle is the
    # subnet verification measured, so verification's decision stands
    out = judge_latency(VERIFIED, stats(2.43), lambda: (stats(2.40), stats(2.38)))
    assert out["within_budget"] is True and out["ms"] == 1.80 and len(out["checks"]) == 2
    assert out["paired_ratio"] == pytest.approx(2.40 / 2.38) and "paired check" in out["decided_by"]
    assert bundle_latency({"latency": out}) == (1.80, True)
    # a bundle 15% slower than its twin in the same call: judged at 1.80 x 1.15, over the budget
    out = judge_latency(VERIFIED, stats(2.43), lambda: (stats(2.07), stats(1.80)))
    assert out["within_budget"] is False and out["ms"] == 1.80 and out["paired_ms"] == pytest.approx(2.07)
    assert bundle_latency({"latency": out}) == (1.80, False)
    # slower, but within the budget at verification's number times the ratio
    out = judge_latency(VERIFIED, stats(2.43), lambda: (stats(1.89), stats(1.80)))
    assert out["within_budget"] is True and out["paired_ms"] == pytest.approx(1.89)


def test_without_a_search_the_export_measurement_is_the_number():
    out = judge_latency(None, stats(1.5), lambda: pytest.fail("no budget to judge"))
    assert out["ms"] == 1.5 and out["within_budget"] is None
    assert bundle_latency({"latency": {"measured": {"corrected_ms": 1.2}}}) == (1.2, None)  # an older bundle
