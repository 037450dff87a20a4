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


def test_a_check_over_budget_is_re_measured_and_decided_on_the_median_of_three():
    # one slow pass (2.43 ms: the machine was busy) does not condemn a subnet measured twice within budget
    again = iter([stats(1.82)])
    out = judge_latency(VERIFIED, stats(2.43), lambda: next(again))
    assert out["within_budget"] is True and out["pooled_ms"] == pytest.approx(1.82) and len(out["checks"]) == 2
    # measured over twice: over the budget, and the bundle says so
    out = judge_latency(VERIFIED, stats(2.43), lambda: stats(2.38))
    assert out["within_budget"] is False and out["ms"] == 1.80 and out["pooled_ms"] == pytest.approx(2.38)
    assert bundle_latency({"latency": out}) == (1.80, False)


def test_without_a_search_the_export_measurement_is_the_number():
    out = judge_latency(None, stats(1.5), lambda: pytest.fail("no budget to judge"))
    assert out["ms"] == 1.5 and out["within_budget"] is None
    assert bundle_latency({"latency": {"measured": {"corrected_ms": 1.2}}}) == (1.2, None)  # an older bundle
