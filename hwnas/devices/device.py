"""`Device`: a named target = a backend plus the options that change its latency.

Everything that changes a measured latency is a field here (threads, batch, precision, provider),
so two measurements with the same device name are comparable, and the name can be stored next to
every measurement instead of the options.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Device", "Precision"]

Precision = Literal["fp32", "fp16", "bf16", "int8"]


class Device(BaseModel):
    """A target device. Build one directly, from a devices YAML (`load_devices`), or take a
    built-in one (`get_device("cpu-ort")`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=64)
    backend: str
    threads: int = Field(1, ge=1, le=1024, description="intra-op threads (CPU runtimes)")
    batch: int = Field(1, ge=1)
    precision: Precision = "fp32"
    resolution: int | None = Field(None, gt=0, description="default input size when none is given")
    provider: str | None = Field(None, description="execution provider / runtime device, e.g. "
                                 "CUDAExecutionProvider for onnxruntime, CPU for openvino, cuda for torch")
    options: dict[str, Any] = Field(default_factory=dict, description="backend-specific settings")
    description: str = ""
    # Remote agents: a device with `host` is measured by an hwnas agent on that machine
    # (`hwnas.devices.agent`), which its client reaches with the token in `token_file`.
    host: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    token_file: Path | None = None
    tls_fingerprint: str | None = Field(None, description="SHA-256 fingerprint of the agent's TLS "
                                        "certificate, as `hwnas agent serve --tls` prints it: the "
                                        "client then speaks TLS and trusts that certificate only")

    @field_validator("tls_fingerprint")
    @classmethod
    def _fingerprint(cls, value: str | None) -> str | None:
        from hwnas.devices.agent.tls import normalize_fingerprint

        return None if value is None else normalize_fingerprint(value)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        from hwnas.devices.backends import backend_names

        if value not in backend_names():
            raise ValueError(f"unknown backend '{value}'; known: {', '.join(backend_names())}")
        return value

    @model_validator(mode="after")
    def _supported(self) -> Device:
        from hwnas.devices.backends import backend_class

        cls = backend_class(self.backend)
        if self.provider is None and cls.default_provider() is not None:
            object.__setattr__(self, "provider", cls.default_provider())
        allowed = cls.precisions(self.provider)
        if self.precision not in allowed:
            where = f" with provider {self.provider}" if self.provider else ""
            raise ValueError(f"backend {self.backend}{where} supports precision "
                             f"{', '.join(allowed)}; got {self.precision}")
        if self.tls_fingerprint and not self.host:
            raise ValueError("tls_fingerprint pins a remote agent's certificate: give the device "
                             "its agent's host too, or remove tls_fingerprint")
        return self

    @property
    def is_remote(self) -> bool:
        return self.host is not None

    @property
    def capabilities(self) -> type:
        """The class of this device's runtime backend (a `hwnas.devices.base.Backend`), whose class attributes say what the
        runtime can do (`Backend.builds_on_target`, `Backend.fp32_math`, ...): the same for a
        remote device, which `backend_impl` serves through the agent client."""
        from hwnas.devices.backends import backend_class

        return backend_class(self.backend)

    def backend_impl(self) -> Any:
        """The backend object (a `hwnas.devices.base.Backend`) that compiles and loads models for
        this device."""
        from hwnas.devices.backends import make_backend

        return make_backend(self)

    def available(self) -> str | None:
        """None when usable here, else why not and how to fix it."""
        return self.backend_impl().available()

    def summary(self) -> str:
        """Short options string for tables: 'threads=1 batch=1 fp32 provider=CPU'."""
        parts = [f"threads={self.threads}", f"batch={self.batch}", self.precision]
        if self.provider:
            parts.append(f"provider={self.provider}")
        if self.resolution:
            parts.append(f"r={self.resolution}")
        parts += [f"{k}={v}" for k, v in self.options.items()]
        if self.host:
            parts.append(f"host={self.host}:{self.port or ''}".rstrip(":"))
            if self.tls_fingerprint:
                parts.append("tls")
        return " ".join(parts)
