"""The schemas of a bundle's `model.json` and `verify.json`: one definition the exporter writes
through and every reader (`load`, `hwnas export`, the quickstart, the dashboard) reads through.

Versioned by the manifest's ``version`` (`hwnas.export.manifest.VERSION`). The sections a reader
decides with (status, accuracy, latency, memory) are typed; the rest is kept as written. A bundle
is someone else's file: one that does not fit is refused in one line (`BundleError`), never
half-read.
"""

from __future__ import annotations

from typing import Any, Optional

from hwnas.settings import Record, schema_problem

__all__ = ["BundleRecord", "VerifyRecord", "LatencyRecord", "AccuracyRecord", "checked_bundle", "checked_verify",
           "schema_problem"]


class LatencyRecord(Record):
    """A bundle's one latency (`hwnas.export.budget`): `ms` and where it comes from; with a search
    budget, whether the bundle holds it by the search's rule."""

    ms: Optional[float] = None
    source: Optional[str] = None
    within_budget: Optional[bool] = None
    budget_ms: Optional[float] = None
    rule: Optional[str] = None
    decided_by: Optional[str] = None
    paired_ratio: Optional[float] = None  # the bundle over the subnet as verification built it, timed together
    paired_ms: Optional[float] = None  # verification's number times that ratio, when the bundle is slower
    checks: list[dict[str, Any]] = []


class AccuracyRecord(Record):
    split: str = "test"
    top1: float
    n: int


class BundleRecord(Record):
    """model.json."""

    format: str
    version: int
    id: str
    status: str
    precision: str = "fp32"
    family: Optional[str] = None
    classes: list[str] = []
    accuracy: AccuracyRecord
    latency: LatencyRecord = LatencyRecord()
    memory: Optional[dict[str, Any]] = None
    files: dict[str, dict[str, Any]] = {}


class VerifyRecord(Record):
    """verify.json: every check of the exported model, its latency and memory as model.json has them."""

    status: str
    device: str
    precision: str = "fp32"
    checks: list[dict[str, Any]] = []
    latency: LatencyRecord = LatencyRecord()
    memory: Optional[dict[str, Any]] = None


def checked_bundle(meta: dict[str, Any]) -> dict[str, Any]:
    """The writer's side: `meta` validated (a ValidationError is a bug in the exporter)."""
    BundleRecord.model_validate(meta)
    return meta


def checked_verify(doc: dict[str, Any]) -> dict[str, Any]:
    VerifyRecord.model_validate(doc)
    return doc
