"""A bundle's latency: one number, the one the search decided with, and a budget check that holds.

The latency a user sees for a searched subnet is its search verification measurement (the number
in search.json, pareto.csv and the summaries). Export measures the compiled artifact again and
judges that check by the search's own acceptance rule against the search's budget
(``measured_ms * (1 + margin + 2 * rel_se) <= budget``). When the check breaks the budget, the
bundle is timed once more, paired: interleaved in one call with the subnet as verification built
it, beside the same reference. A session's level (a busier machine) moves both alike and cancels
in their ratio; only a bundle slower than what verification measured (ratio over 1 by more than
two of its standard errors) is judged again, at verification's number times that ratio. The
bundle records ``within_budget``, the rule and every measurement.
"""

from __future__ import annotations

import math
from typing import Any, Callable

__all__ = ["search_verification", "judge_latency", "bundle_latency"]


def search_verification(run: Any, device: str, arch_id: str) -> dict[str, Any] | None:
    """The current search's verification measurement of `arch_id` on `device` (with the budget,
    margin and rule it was judged by), or None when the search did not measure it."""
    from hwnas.search.record import read_search

    search = read_search(run.files.search)
    if search is None:
        return None
    latency = search.acceptance.latency if search.acceptance else {}
    for rec in search.verification:
        if rec.id == arch_id and rec.device == device and None not in (rec.measured_ms, rec.budget_ms):
            return {"measured_ms": rec.measured_ms, "rel_se": rec.rel_se, "budget_ms": rec.budget_ms,
                    "accepted": rec.accepted, "margin": float(latency.get("margin", 0.02)), "rule": latency.get("rule"),
                    "search_id": search.search_id}
    return None


def _ucb(ms: float, rel_se: float, margin: float) -> float:
    return ms * (1 + margin + 2 * rel_se)


def judge_latency(verified: dict[str, Any] | None, check: Any, paired: Callable[[], tuple[Any, Any]]
                  ) -> dict[str, Any]:
    """The bundle's latency record: `ms` (the one number), its `source`, and with a search budget
    `within_budget` by the search's rule (see the module doc). `check`: export's own
    `LatencyStats`; `paired()` gives (the bundle's, the subnet's as verification built it)
    measured together."""
    checks = [{"corrected_ms": check.corrected_ms, "rel_se": _se(check), "n": check.n}]
    if verified is None:
        return {"ms": check.corrected_ms, "source": "export's measurement", "within_budget": None,
                "checks": checks}
    budget, margin = verified["budget_ms"], verified["margin"]
    out = {"ms": verified["measured_ms"], "source": f"search verification (search {verified['search_id']})",
           "rel_se": verified["rel_se"], "budget_ms": budget, "rule": verified["rule"], "margin": margin,
           "checks": checks}
    ucb = _ucb(checks[0]["corrected_ms"], checks[0]["rel_se"], margin)
    if ucb <= budget:
        return {**out, "within_budget": bool(verified["accepted"]), "decided_by": "export's check", "ucb_ms": ucb}
    bundle, twin = paired()
    ratio, ratio_se = bundle.corrected_ms / twin.corrected_ms, math.hypot(_se(bundle), _se(twin))
    checks.append({"corrected_ms": bundle.corrected_ms, "rel_se": _se(bundle), "n": bundle.n,
                   "as_verified_ms": twin.corrected_ms, "ratio": ratio, "ratio_se": ratio_se})
    if ratio - 1 <= 2 * ratio_se:  # no slower than the subnet verification measured: its decision stands
        return {**out, "within_budget": bool(verified["accepted"]), "paired_ratio": ratio,
                "decided_by": f"paired check: the bundle runs as the subnet verification measured "
                              f"(ratio {ratio:.3f} +- {ratio_se:.3f})"}
    paired_ms = verified["measured_ms"] * ratio
    ucb = _ucb(paired_ms, verified["rel_se"], margin)
    return {**out, "within_budget": bool(ucb <= budget), "paired_ratio": ratio, "paired_ms": paired_ms, "ucb_ms": ucb,
            "decided_by": f"paired check: the bundle is {ratio:.3f}x the subnet verification measured "
                          f"(+- {ratio_se:.3f}), so {paired_ms:.4g} ms"}


def _se(stats: Any) -> float:
    return float(getattr(stats, "rel_se", 0.0) or 0.0)


def bundle_latency(meta: dict[str, Any]) -> tuple[float | None, bool | None]:
    """(the bundle's one latency number in ms, within the search's budget) from its model.json;
    bundles written before `judge_latency` give their export measurement and None."""
    latency = meta.get("latency") if isinstance(meta, dict) else None
    if not isinstance(latency, dict):
        return None, None
    ms = latency.get("ms")
    if not isinstance(ms, (int, float)):
        ms = (latency.get("measured") or {}).get("corrected_ms")
    within = latency.get("within_budget")
    return (float(ms) if isinstance(ms, (int, float)) else None), (within if isinstance(within, bool) else None)
