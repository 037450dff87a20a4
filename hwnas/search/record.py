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
from typing import Annotated, Any, Optional, Union

from pydantic import Field, ValidationError, field_validator

from hwnas.settings import Record, schema_problem

__all__ = ["SEARCH_SCHEMA_VERSION", "SearchRecord", "BestEntry", "BaselineEntry", "PairedLatency", "VerificationEntry",
           "TrustEntry", "RecordedSettings", "AcceptanceRecord", "AccuracyChecks", "AccuracyPredictorRecord",
           "read_search", "checked_search"]

SEARCH_SCHEMA_VERSION = 2
SubnetId = Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]  # ids are shown in Markdown and used as keys


class RecordedSettings(Record):
    """What the search was asked (a subset of `SearchSettings`, as the search resolved it)."""

    devices: list[str] = []
    budgets_ms: dict[str, float] = {}
    algo: Optional[str] = None
    mode: Optional[str] = None  # what the algorithm ran as (e.g. "evolution (vectorised)")
    verify: Optional[bool] = None
    accuracy_risk: float = 0.0
    objectives: list[str] = []
    top_k: Optional[int] = None
    max_ram_kb: Optional[float] = None
    max_flash_kb: Optional[float] = None
    precision: str = "fp32"


class BestEntry(Record):
    """A returned subnet: predicted and (with verification) measured top-1 and latency per device."""

    id: SubnetId
    precision: str = "fp32"
    describe: Optional[str] = None
    top1_pred: Optional[float] = None
    top1_std: Optional[float] = None
    measured_top1: Optional[float] = None
    ms_pred: dict[str, Optional[float]] = {}
    measured_ms: dict[str, Optional[float]] = {}
    verified: bool = False


class PairedLatency(Record):
    """A subnet's latency over a baseline's, both timed in one call (`hwnas.profiling.measure_paired`)."""

    ratio: float = Field(gt=0)
    rel_se: float = Field(0.0, ge=0)
    rule: str = ""


class BaselineEntry(Record):
    """A hand-designed network trained alone, against the front (`hwnas.search.versus`)."""

    name: str
    resolution: int
    top1: float
    n_test: int
    epochs: Optional[int] = None
    measured_ms: dict[str, float] = {}
    dominated_by: Optional[SubnetId] = None
    dominated_by_top1: Optional[float] = None
    dominated_by_ms: Optional[float] = None
    top1_gain: Optional[float] = None
    latency_ratio: Optional[PairedLatency] = None  # dominated_by against it, timed together


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
    tau_apart: Optional[float] = None  # over the pairs measured more than 10% apart (the rule's)
    pairs_apart: Optional[int] = None


class AccuracyChecks(Record):
    """Verification's test-split checks: predicted vs measured top-1 of what it evaluated."""

    split: str = "test"
    all_evaluated: Optional[dict[str, Any]] = None  # regression metrics (mae, bias, kendall_tau, n)
    returned: Optional[dict[str, Any]] = None


class AcceptanceRecord(Record):
    """How verification judged: the latency rule (and the order it measured in), the accuracy checks."""

    latency: dict[str, Any] = {}
    accuracy: Optional[AccuracyChecks] = None


class AccuracyPredictorRecord(Record):
    kind: Optional[str] = None
    clip: list[float] = []
    metrics: Optional[dict[str, Any]] = None  # its selection's report (oof, candidates, folds)


class SearchRecord(Record):
    schema_version: int = 1
    search_id: Optional[str] = None
    created_at: Optional[str] = None
    settings: RecordedSettings = RecordedSettings()
    metrics: dict[str, Any] = {}
    accuracy_predictor: AccuracyPredictorRecord = AccuracyPredictorRecord()
    best: list[BestEntry] = []
    baselines: list[BaselineEntry] = []
    acceptance: Optional[AcceptanceRecord] = None
    verification: list[VerificationEntry] = []
    latency_trust: dict[str, Optional[TrustEntry]] = {}  # None: no held-out subnets to judge by
    # per generation: a record (generation, best_top1_objective, ...); early files: one number each
    history: list[Union[dict[str, Any], float]] = []

    @property
    def accuracy_split(self) -> str:
        """The split verification measured top-1 on."""
        return self.acceptance.accuracy.split if self.acceptance and self.acceptance.accuracy else "test"

    @property
    def held_out_accuracy(self) -> dict[str, Any] | None:
        """The accuracy predictor against every test-split check verification made, if any."""
        return self.acceptance.accuracy.all_evaluated if self.acceptance and self.acceptance.accuracy else None


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
    for key, default in (("settings", {}), ("metrics", {}), ("history", []), ("accuracy_predictor", {})):
        if not isinstance(raw.get(key), type(default)):
            raw[key] = default
    for key, model, default in (("settings", RecordedSettings, {}), ("accuracy_predictor", AccuracyPredictorRecord, {}),
                                ("acceptance", AcceptanceRecord, None)):
        if raw.get(key) is not None and schema_problem(model, raw[key]) is not None:
            raw[key] = default
    raw["history"] = [h for h in raw["history"] if isinstance(h, (dict, int, float)) and not isinstance(h, bool)]
    for key in ("search_id", "created_at"):
        if not isinstance(raw.get(key), (str, type(None))):
            raw[key] = None
    if not isinstance(raw.get("schema_version", 1), int) or isinstance(raw.get("schema_version"), bool):
        raw["schema_version"] = 1
    try:
        return SearchRecord.model_validate(raw)
    except ValidationError:
        return None
