"""A latency predictor file's ``meta``, typed: the one definition its writers (fitting, front
profiling, runtime priors) and its readers (search, trust checks, dashboard) share. Keys a newer
hwnas adds are kept as they are (`Record`)."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import Field, ValidationError

from hwnas.errors import CheckpointError
from hwnas.families import DEFAULT_FAMILY, NetworkSpec
from hwnas.settings import Record, schema_problem

__all__ = ["FitReport", "PredictorNotes", "PredictorMeta"]


class FitReport(Record):
    """How `fit_best` chose the predictor (``meta.cv``): every candidate's out-of-fold metrics, the
    chosen one's, and its out-of-fold log(measured / predicted), sorted: what a search's latency
    bound at a stated confidence is the quantile of (`hwnas.search.risk`)."""

    criterion: str | None = None
    folds: int | None = None
    seed: int = 0
    n_rows: int | None = None
    chosen: str | None = None
    chosen_metrics: dict[str, float | None] = Field(default_factory=dict)
    candidates: list[dict[str, Any]] = Field(default_factory=list)
    oof_log_ratios: list[float] = Field(default_factory=list)


class PredictorNotes(Record):
    """Where the fit came from (``meta.notes``). `fitted_on`: the subnet ids it was fitted on, so
    held-out measurements are told by content, never by file times; `front`: the subnets front
    profiling added (`hwnas.search.front_profile`), so a rerun skips that stage."""

    fitted_on: list[str] | None = None
    front: list[str] | None = None
    prior: str | None = None  # a runtime prior's name (`hwnas.latency.priors`)
    run: str | None = None
    table: str | None = None
    entries: int | None = None  # a lookup table's parts
    block_entries: int | None = None


class PredictorMeta(Record):
    """What a predictor was fitted for and on."""

    device: str = ""
    family: str  # the search-space family of the rows
    width_mult: float
    n_classes: int
    target: str = "ms"  # the column / quantity it learned (e.g. corrected_ms)
    n_train: int = 0
    cv: FitReport = Field(default_factory=FitReport)
    notes: PredictorNotes = Field(default_factory=PredictorNotes)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> PredictorMeta:
        """Read a file's ``meta``; version 1 files name no family: they are the first family's
        (ImageNet-sized)."""
        doc = {"family": DEFAULT_FAMILY, "width_mult": 1.0, "n_classes": 1000, **obj}
        doc = {k: ({} if v is None and k in ("cv", "notes") else v) for k, v in doc.items()}
        try:
            return cls.model_validate(doc)
        except ValidationError:
            raise CheckpointError(f"latency predictor meta: {schema_problem(cls, doc)}") from None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def net(self) -> NetworkSpec:
        """The networks it predicts."""
        return NetworkSpec(self.family, self.width_mult, self.n_classes)
