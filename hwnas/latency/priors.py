"""Runtime priors: what a runtime's latencies look like before a device's first measurement.

A prior is a small analytic model (`AnalyticPredictor`: a power law in MACs, activation bytes,
weight bytes and layers) fitted once on measured subnets of a runtime. It carries the runtime's
operator efficiency (how much a MAC costs against a byte or a layer); what a new device adds is
mostly a speed factor, which few-shot transfer (`TransferPredictor`, ``log ms = a + b log prior``
+ shrunk corrections) learns from a handful of rows. `fit_best` adds a transfer from every prior
of the table's family to its candidates; cross-validation drops them where the device does not
follow the runtime.

A prior is *retargeted* before use: its features are computed at the table's width and classes,
so a prior measured on 10-class subnets prices a 1000-class head by its exact cost.

Shipped priors live with their family (`Family.latency_priors`: its folder's
``latency_priors.json``), each measured, never assumed; rebuild with
``.venv/bin/python experiments/bench_onboarding.py --write-prior``:

- ``cpu-ort``: ONNX Runtime CPU EP, 1 thread, on this project's 2-core x86-64 host:
  `tests/latency/data/ofa_cpu_subnets.csv` (300 subnets of the default family, r=32..64, 10 classes),
  the mean of its two drift-corrected passes (``ort_ms``, ``ort_ms_repeat``).
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from hwnas.families import NetworkSpec
from hwnas.latency.base import LatencyPredictor

__all__ = ["runtime_priors", "prior_document"]

def prior_document(pred: LatencyPredictor, name: str) -> dict[str, Any]:
    """The `RUNTIME_PRIORS` entry of a fitted analytic predictor (what ``--write-prior`` prints)."""
    doc, arrays = pred.to_dict()
    if arrays or pred.kind != "analytic":
        raise ValueError("a runtime prior is an analytic predictor (its state is all JSON)")
    doc["meta"]["device"] = name
    doc["meta"]["notes"] = {**doc["meta"].get("notes", {}), "prior": name}
    return doc


def _load(doc: Mapping[str, Any], net: NetworkSpec) -> LatencyPredictor:
    pred = LatencyPredictor.from_dict(copy.deepcopy(dict(doc)), {})
    pred.meta.width_mult, pred.meta.n_classes = net.width_mult, net.n_classes  # retarget
    return pred


def runtime_priors(net: NetworkSpec) -> list[LatencyPredictor]:
    """The shipped priors of `net`'s family (`Family.latency_priors`), fitted, retargeted to its
    width and classes."""
    return [_load(doc, net) for doc in net.get_family().latency_priors().values()
            if doc["meta"]["family"] == net.family]
