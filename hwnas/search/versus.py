"""The front against the hand-designed baselines: for each, the fastest subnet this search measured
with a test top-1 at least the baseline's at no more than its measured latency.

A baseline's latency is its drift-corrected measurement in the run's store (profiled as the
reference ``timm:NAME@rN``, measured now when missing); its top-1 is its own test-split score
(`hwnas.baselines.run_baselines`). Subnets already verified are used first; otherwise the front's
most accurate rows that fit under the baseline's latency (with the verification margin) and are
predicted within `slack` points of its top-1 or above are measured on the device and, when they
fit, evaluated on the test split, at most `tries` per baseline, the fastest baseline first, and
every baseline is judged on all that was measured (`_next_try`: under the search's
upper bound first, `latency_factor`, which keeps the tries off the rows the latency predictor
underprices, then under looser ones). The slack is the accuracy predictor's error (the search
passes twice its out-of-fold MAE): a row predicted a little below a baseline may measure above it.
With `paired` (the search's default on a real device), a subnet counts when, timed together with
the baseline's network in one call (`hwnas.profiling.measure_paired`), ``ratio * (1 + margin) <= 1``:
two measurements taken in their own sessions differ by up to `SESSION_SPREAD`, the ratio from one
call does not carry that noise (a subnet's own measurement may then read above the baseline's).
Without it, a subnet counts only if ``measured_ms * (1 + margin) <= baseline_ms``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from hwnas.search.goals import TOP1, ms_key
from hwnas.search.problem import Batch

__all__ = ["versus_baselines", "baselines_summary"]

#: how far apart two sessions' measurements of one network may land: a subnet measured this much
#: slower than a baseline stored from another session may still be faster timed beside it
#: (mobilenetv3_small_100 measured 0.321-0.350 ms across six sessions on a 2-core VM)
SESSION_SPREAD = 0.10
#: (device, arch, baseline key) -> (subnet / baseline latency ratio, its relative standard error)
Paired = Callable[[str, Any, str], "tuple[float, float]"]


def _baseline_ms(run: Any, device: str, keys: list[str], devices_file: Any, protocol: Any) -> dict[str, float]:
    """key -> drift-corrected ms on `device`, profiling the baselines the store lacks."""
    from hwnas.profiling.stage import profile
    from hwnas.profiling.store import read_measurements

    def stored() -> dict[str, float]:
        df = read_measurements(run.run_dir, device=device, kind="model")
        return {} if df.empty else dict(zip(df["key"].astype(str), df["corrected_ms"].astype(float)))

    have = stored()
    if any(k not in have for k in keys):
        profile(run, [device], 0, devices_file=devices_file, references=[k for k in keys if k not in have],
                **({"protocol": protocol} if protocol is not None else {}))
        have = stored()
    return {k: have[k] for k in keys if k in have}


def _next_try(rows: Sequence[int], pred_ms: np.ndarray, pred_top1: np.ndarray, limit: float, floor: float,
              factor: float, measured: dict[int, Any]) -> int | None:
    """The most accurate unmeasured row predicted at least `floor` whose prediction times the
    factor fits `limit`: the search's bound first, then half of it (geometric), then the point
    prediction. Where the bound leaves no row accurate enough, the later tiers still reach the
    baseline's neighbourhood, each try measured before it counts."""
    for f in dict.fromkeys((factor, factor ** 0.5, 1.0)):
        fits = [i for i in rows if i not in measured and pred_ms[i] * f <= limit and pred_top1[i] >= floor]
        if fits:
            return max(fits, key=lambda i: (pred_top1[i], -i))
    return None


def versus_baselines(run: Any, table: Batch, rows: Sequence[int], device: str, measured: dict[int, dict[str, float]],
                     top1_measured: dict[int, float], measure: Callable[[str, Sequence[Any]], Any],
                     measure_top1: Callable[[list[int]], None], margin: float, *, devices_file: Any = None,
                     protocol: Any = None, tries: int = 5, most: int = 12, slack: float = 0.0,
                     latency_factor: float = 1.0, top1_pred: np.ndarray | None = None,
                     paired: Paired | None = None) -> list[dict[str, Any]]:
    """One entry per baseline of the run (see the module doc). `rows`: the table's rows that may
    stand against a baseline (fp32 front members); `measured` and `top1_measured` are the
    verification's, and grow with what is measured here; `measure_top1(rows)` evaluates rows
    into `top1_measured`. `top1_pred`: the accuracy predictor's top-1 per table row (default: the
    table's objective, which subtracts the accuracy risk). At most `tries` rows are measured per
    baseline and `most` in all (a test-split evaluation costs seconds to minutes). `paired(device,
    arch, key)` -> (subnet / baseline latency ratio, its relative standard error), timed together."""
    from hwnas.baselines import profile_key, run_baselines
    from hwnas.search.verify import _measured

    baselines = run_baselines(run)
    if not baselines:
        return []
    ms_of = _baseline_ms(run, device, [profile_key(b["name"], b["resolution"]) for b in baselines],
                         devices_file, protocol)
    archs = run.space.from_matrix(table.m)
    pred_ms = table.cols[ms_key(device)]
    pred_top1 = table.cols[TOP1] if top1_pred is None else top1_pred
    fastest_pred = float(pred_ms[list(rows)].min()) if len(rows) else float("inf")
    judge = _Judge(device, measured, top1_measured, margin, paired, archs)
    entries, limits, keys, spent = [], {}, {}, 0
    for b in baselines:
        key = profile_key(b["name"], b["resolution"])
        entry = {"name": b["name"], "resolution": b["resolution"], "epochs": b["epochs"], "top1": b["top1"],
                 "n_test": b["n_test"], "source": b["source"], "measured_ms": {}, "dominated_by": None}
        entries.append(entry)
        if key not in ms_of:
            entry["note"] = f"not measured on {device}"
            continue
        limit = limits[len(entries) - 1] = ms_of[key]
        keys[len(entries) - 1] = key
        entry["measured_ms"][device] = round(limit, 4)
        if fastest_pred * (1 + margin) > limit:
            entry["note"] = "faster than every subnet of the front (predicted)"
    # fastest baseline first: a subnet that fits its latency fits every slower one's too
    for k in sorted(limits, key=limits.get):
        top1, limit = entries[k]["top1"], limits[k]
        for _ in range(tries):
            if judge.winner(top1, limit, keys[k]) is not None or spent >= most:
                break
            i = _next_try(rows, pred_ms, pred_top1, limit / (1 + margin), top1 - slack, latency_factor, measured)
            if i is None:
                break
            spent += 1
            ms = float(_measured(measure(device, [archs[i]]))[0][0])
            measured[i] = {device: ms}
            if judge.fits(ms, limit):
                measure_top1([i])
    # judged once everything is measured: a subnet tried for one baseline may beat another
    for k, limit in limits.items():
        entry = entries[k]
        i = judge.winner(entry["top1"], limit, keys[k])
        if i is not None:
            entry.update(dominated_by=archs[i].id, dominated_by_top1=round(top1_measured[i], 2),
                         dominated_by_ms=round(measured[i][device], 4),
                         top1_gain=round(top1_measured[i] - entry["top1"], 2))
            if (i, keys[k]) in judge.ratios:
                ratio, se = judge.ratios[i, keys[k]]
                entry["latency_ratio"] = {"ratio": round(ratio, 4), "rel_se": round(se, 4),
                                          "rule": "subnet / baseline, timed together in one call"}
            entry.pop("note", None)
    return entries


class _Judge:
    """Which measured subnet beats a baseline (see the module doc); paired timings are kept, so
    each (subnet, baseline) is timed together at most once."""

    def __init__(self, device: str, measured: dict[int, dict[str, float]], top1_measured: dict[int, float],
                 margin: float, paired: Paired | None, archs: Sequence[Any]) -> None:
        self.device, self.measured, self.top1_measured = device, measured, top1_measured
        self.margin, self.paired, self.archs = margin, paired, archs
        self.ratios: dict[tuple[int, str], tuple[float, float]] = {}

    def fits(self, ms: float, limit: float) -> bool:
        """Whether a measurement leaves a subnet in the running (worth its test-split top-1)."""
        return ms <= limit * (1 + SESSION_SPREAD) if self.paired is not None else ms * (1 + self.margin) <= limit

    def winner(self, top1: float, limit: float, key: str) -> int | None:
        """The fastest measured subnet at least as accurate that beats the baseline on latency."""
        for i in sorted((i for i in self.measured if i in self.top1_measured and self.device in self.measured[i]
                         and self.fits(self.measured[i][self.device], limit) and self.top1_measured[i] >= top1),
                        key=lambda i: self.measured[i][self.device]):
            if self.paired is None:
                return i
            if (i, key) not in self.ratios:
                self.ratios[i, key] = self.paired(self.device, self.archs[i], key)
            if self.ratios[i, key][0] * (1 + self.margin) <= 1:
                return i
        return None


def baselines_summary(entries: list[dict[str, Any]]) -> str | None:
    """One line: how many baselines the front beats, and by how much at equal latency."""
    timed = [e for e in entries if e["measured_ms"]]
    if not timed:
        return None
    beaten = [e for e in timed if e["dominated_by"]]
    faster = [e for e in timed if not e["dominated_by"] and str(e.get("note", "")).startswith("faster than every")]
    inside = len(timed) - len(faster)
    outside = (f"; {len(faster)} faster than every subnet of the front ({', '.join(e['name'] for e in faster)})"
               if faster else "")
    if not inside:
        return (f"all {len(faster)} baselines are faster than every subnet of the front "
                f"({', '.join(e['name'] for e in faster)}): none to compare at equal latency")
    if not beaten:
        return f"the front beats none of the {inside} baselines in its latency range{outside}"
    gains = [e["top1_gain"] for e in beaten]
    return (f"the front beats {len(beaten)} of the {inside} baselines in its latency range: a subnet at most as "
            f"slow is {float(np.median(gains)):+.2f} points more accurate (median; {min(gains):+.2f} to "
            f"{max(gains):+.2f}){outside}")
