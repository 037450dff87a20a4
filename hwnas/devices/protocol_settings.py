"""The measurement protocol's settings, defined once: their defaults and bounds are the ones
profiling, verification, export, `measure_many` and the agent's wire format use (the wire's
`ProtocolOptions` is this model with every field optional). Pydantic only: the slim agent imports it."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from hwnas.errors import InputError

__all__ = ["ProtocolSettings", "ProtocolOptions", "protocol_error"]


class ProtocolSettings(BaseModel):
    """`measure_many`'s settings (why 15 rounds: docs/devices.md, 'Measurement protocol', item 6).
    The bounds keep a measurement's work finite."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rounds: int = Field(15, ge=1, le=100)
    runs: int = Field(10, ge=1, le=100_000)
    warmup_runs: int = Field(5, ge=0, le=100_000)
    warmup_s: float = Field(0.2, ge=0, le=600)
    rewarm_runs: int = Field(2, ge=0, le=100_000)
    ref_runs: int = Field(5, ge=1, le=100_000)
    ref_warmup_runs: int = Field(2, ge=0, le=100_000)
    seed: int = Field(0, ge=0, le=2**63 - 1)  # numpy's generators refuse negatives

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise protocol_error(err) from None

    def kwargs(self) -> dict[str, Any]:
        return self.model_dump()


def protocol_error(err: ValidationError) -> InputError:
    """One line naming the first protocol setting out of its range."""
    first = err.errors()[0]
    name = ".".join(str(p) for p in first.get("loc", ())) or "protocol"
    return InputError(f"protocol setting {name}: {first.get('msg', 'invalid')}, got {first.get('input')!r}")


def _optional(model: type[BaseModel]) -> dict[str, Any]:
    """Every field of `model`, optional (None: the protocol's default), with the same bounds."""
    return {name: (Annotated[Optional[f.annotation], *f.metadata], None) for name, f in model.model_fields.items()}


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: the options `protocol.measure` (one model, R C R) accepts; the rest are measure_many's
    SINGLE: ClassVar[frozenset[str]] = frozenset({"runs", "warmup_runs", "warmup_s", "seed"})

    def kwargs(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


ProtocolOptions = create_model("ProtocolOptions", __base__=_Options, __doc__=(
    "Keyword arguments of `protocol.measure` / `measure_many` on the wire: `ProtocolSettings` with "
    "every field optional (unset: the protocol's default). The agent's time limits "
    "(`server.AgentLimits`) are what stop a request that is still too slow."), **_optional(ProtocolSettings))
