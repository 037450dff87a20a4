"""A bundle's latency: one number, the one the search decided with, and a budget check that holds.

The latency a user sees for a searched subnet is its search verification measurement (the number
in search.json, pareto.csv and the summaries). Export measures the compiled artifact again and
judges that check by the search's own acceptance rule against the search's budget
(``measured_ms * (1 + margin + 2 * rel_se) <= budget``). When the check breaks the budget, the
subnet is measured once more in the same session and the decision is taken on the median of the
three measurements (verification and the two checks, all drift-corrected against the run's
anchor): one noisy pass neither condemns nor clears it. The bundle records ``within_budget``, the
rule and every measurement.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["search_verification", "judge_latency", "bundle_latency"]


def search_verification(run: Any, device: str, arch_id: str) -> dict[str, Any] | None:
    """The current search's verification measurement of `arch_id` on `device` (with the budget,
    margin and rule it was judged by), or None when the search did not measure it."""
    from hwnas.search.record import read_search

    search = read_search(run.files.search)
    if search is None:
        return None
    latency = (search.acceptance or {}).get("latency") or {}
    for rec in search.verification:
        if rec.id == arch_id and rec.device == device and None not in (rec.measured_ms, rec.budget_ms):
            return {"measured_ms": rec.measured_ms, "rel_se": rec.rel_se, "budget_ms": rec.budget_ms,
                    "accepted": rec.accepted, "margin": float(latency.get("margin", 0.02)), "rule": latency.get("rule"),
                    "search_id": search.search_id}
    return None


def _ucb(ms: float, rel_se: float, margin: float) -> float:
    return ms * (1 + margin + 2 * rel_se)


def judge_latency(verified: dict[str, Any] | None, check: Any, remeasure: Callable[[], Any]) -> dict[str, Any]:
    """The bundle's latency record: `ms` (the one number), its `source`, and with a search budget
    `within_budget` by the search's rule (see the module doc). `check`: export's own
    `LatencyStats`; `remeasure()` gives another in the same session."""
    checks = [{"corrected_ms": check.corrected_ms, "rel_se": float(getattr(check, "rel_se", 0.0) or 0.0),
               "n": check.n}]
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
    again = remeasure()
    checks.append({"corrected_ms": again.corrected_ms, "rel_se": float(getattr(again, "rel_se", 0.0) or 0.0),
                   "n": again.n})
    all_ms = [verified["measured_ms"]] + [c["corrected_ms"] for c in checks]
    all_se = [verified["rel_se"]] + [c["rel_se"] for c in checks]
    pooled, se = float(np.median(all_ms)), float(np.median(all_se))
    ucb = _ucb(pooled, se, margin)
    return {**out, "within_budget": bool(ucb <= budget), "decided_by": "median of verification and two checks",
            "pooled_ms": pooled, "ucb_ms": ucb}


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
