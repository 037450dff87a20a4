"""The remote agent: measure on a target machine (Jetson, Raspberry Pi, phone, GPU server) from
another one.

On the target, `hwnas agent serve` (`serve`) runs an HTTP agent with that machine's backends
(`server`). Here, a device with `host`, `port` and `token_file` gets a `RemoteBackend` (`client`):
models are exported to ONNX, sent with the token, timed there with `hwnas.devices.protocol`, and
come back as `LatencyStats`. Wire format and its checks: `wire`; the agent's crash-safe state:
`store`. Security model and limits: docs/devices.md, 'Devices: adding your own' and 'The agent,
in detail'. Names are imported on first use: the measuring worker (`python -m
hwnas.devices.agent.worker`) then starts without the server and the client (and without runpy's
warning that it was imported by its package first).
"""

from __future__ import annotations

from hwnas.lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "hwnas.devices.agent.client": ("AgentClient", "AgentRefused", "AgentSettings", "RemoteBackend",
                                   "measure_artifacts"),
    "hwnas.devices.agent.server": ("LIMIT_OPTIONS", "Agent", "AgentLimits", "make_server", "serve"),
    "hwnas.devices.agent.wire": ("DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_PORT", "create_token_file",
                                 "read_token"),
})
