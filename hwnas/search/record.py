"""search.json's schema: the one definition its writer (`hwnas.search.api`) and its readers (the
dashboard, export's budget check) share.

The writer validates what it writes and stamps `schema_version`; a file without one is version 1
(written before the schema) and reads the same way. Readers use `read_search`, which treats a run
folder as someone else's: an entry of `best`, `baselines`, `verification` or `latency_trust` that
does not fit the schema is left out on its own (the rest of the file still reads), and keys a newer
hwnas adds are kept as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import Field, ValidationError, field_validator

from hwnas.settings import Record, schema_problem

__all__ = ["SEARCH_SCHEMA_VERSION", "SearchRecord", "BestEntry", "BaselineEntry", "VerificationEntry",
           "TrustEntry", "RecordedSettings", "read_search", "checked_search"]

SEARCH_SCHEMA_VERSION = 2
SubnetId = Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]  # ids are shown in Markdown and used as keys


class RecordedSettings(Record):
    """What the search was asked (a subset of `SearchSettings`, as the search resolved it)."""

    devices: list[str] = []
    budgets_ms: dict[str, float] = {}
    accuracy_risk: float = 0.0
    objectives: list[str] = []
    top_k: Optional[int] = None
    max_ram_kb: Optional[float] = None
    max_flash_kb: Optional[float] = None
    precision: str = "fp32"


class BestEntry(Record):
    """A returned subnet: predicted and (with verification) measured top-1 and latency per device."""

    id: SubnetId
    top1_pred: Optional[float] = None
    measured_top1: Optional[float] = None
    ms_pred: dict[str, Optional[float]] = {}
    measured_ms: dict[str, Optional[float]] = {}


class BaselineEntry(Record):
    """A hand-designed network trained alone, against the front (`hwnas.search.versus`)."""

    name: str
    resolution: int
    top1: float
    n_test: int
    epochs: Optional[int] = None
    measured_ms: dict[str, float] = {}
    dominated_by: Optional[SubnetId] = None


class VerificationEntry(Record):
    """One verification measurement of one subnet on one device."""

    id: SubnetId
    device: str
    measured_ms: Optional[float] = None
    predicted_ms: Optional[float] = None
    rel_se: float = 0.0
    budget_ms: Optional[float] = None
    accepted: bool = False

    @field_validator("rel_se", mode="before")
    @classmethod
    def _none_is_zero(cls, v: Any) -> Any:
        return 0.0 if v is None else v


class TrustEntry(Record):
    """A device's latency predictor on held-out subnets (`hwnas.latency.trust`)."""

    n: int
    within_10: float
    poor: bool
    kendall_tau: Optional[float] = None
    median_abs_error: Optional[float] = None


class SearchRecord(Record):
    schema_version: int = 1
    search_id: Optional[str] = None
    settings: RecordedSettings = RecordedSettings()
    metrics: dict[str, Any] = {}
    best: list[BestEntry] = []
    baselines: list[BaselineEntry] = []
    acceptance: Optional[dict[str, Any]] = None
    verification: list[VerificationEntry] = []
    latency_trust: dict[str, Optional[TrustEntry]] = {}  # None: no held-out subnets to judge by
    history: list[dict[str, Any]] = []


_LISTS = {"best": BestEntry, "baselines": BaselineEntry, "verification": VerificationEntry}


def checked_search(doc: dict[str, Any]) -> dict[str, Any]:
    """The writer's side: `doc` validated against the schema (a ValidationError is a bug in the
    writer) and stamped with the current version."""
    return SearchRecord.model_validate({**doc, "schema_version": SEARCH_SCHEMA_VERSION}).model_dump(mode="json")


def read_search(path: str | Path) -> SearchRecord | None:
    """search.json as a `SearchRecord`, or None when it is missing or not a JSON object; entries that
    do not fit are left out one by one (see the module doc)."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    for key, model in _LISTS.items():
        raw[key] = [e for e in raw.get(key) or [] if schema_problem(model, e) is None] if isinstance(raw.get(key), list) else []
    trust = raw.get("latency_trust")
    raw["latency_trust"] = {d: q for d, q in trust.items()
                            if isinstance(d, str) and (q is None or schema_problem(TrustEntry, q) is None)} \
        if isinstance(trust, dict) else {}
    for key, default in (("settings", {}), ("metrics", {}), ("history", [])):
        if not isinstance(raw.get(key), type(default)):
            raw[key] = default
    if schema_problem(RecordedSettings, raw["settings"]) is not None:
        raw["settings"] = {}
    if not isinstance(raw.get("acceptance"), dict):
        raw["acceptance"] = None
    try:
        return SearchRecord.model_validate(raw)
    except ValidationError:
        return None
