"""The measurement protocol's settings for profiling, verification and export: one model,
`hwnas.devices.protocol_settings.ProtocolSettings` (re-exported here, its documented place)."""

from __future__ import annotations

from hwnas.devices.protocol_settings import ProtocolSettings

__all__ = ["ProtocolSettings"]
