"""The remote agent: measure on a target machine (Jetson, Raspberry Pi, phone, GPU server) from
another one.

On the target, `hwnas agent serve --host H --port P --token-file F` (`serve`) runs an HTTP
agent with that machine's backends (`server`). On the workstation, a device with `host`,
`port` and `token_file` gets a `RemoteBackend` (`client`): models are exported to ONNX here,
sent with the token, timed there with `hwnas.devices.protocol`, and come back as
`LatencyStats`. The wire format and its checks are in `wire`; the agent's crash-safe state
(received models, finished results by request id) in `store`.

Security model: a shared token read from a file (never from the command line), compared in
constant time; a size limit checked before any body is read; ONNX is the only payload (parsed
and checked, never executed; no pickles, no external data); the agent runs only its own devices,
named by a request, and takes no runtime option, provider or path from a client. Models are built
and timed in a child process (`worker`) that is killed when it overruns a time limit; queued
requests and open connections are capped (`AgentLimits`). Traffic is plain HTTP unless the agent
runs with --tls and the device pins its certificate's fingerprint (`tls`); keep plain agents on
a trusted network or reach them through an SSH tunnel.

Names are imported on first use: the measuring worker (`python -m hwnas.devices.agent.worker`)
then starts without the server and the client (and without runpy's warning that it was imported
by its package first).
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
