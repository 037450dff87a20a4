"""What travels between the agent client and the agent: frames, request schema, refusals, tokens.

A measurement request is one HTTP body of type `CONTENT_TYPE`::

    MAGIC | uint32 big-endian header length | header JSON (MeasureRequest) | blob 0 | blob 1 | ...

The header names every model by the sha256 of its ONNX bytes; `blobs` lists the sha256 and size
of the bytes appended after it, in order. A blob may be left out when the agent already holds
that model (the reference, after the first request of a session): the agent answers 409
`missing_models` with the shas it lacks and the client resends them. Raw bytes after a JSON
header avoid base64 (+33%) on models of tens of MiB. No other payload format exists: the agent
never unpickles anything, and every blob must parse as a self-contained ONNX model.

Every refusal is an HTTP status plus a JSON body ``{"error": code, "message": one line}``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hwnas.devices.protocol_settings import ProtocolOptions
from hwnas.errors import AgentError

__all__ = [
    "API_VERSION", "DEFAULT_PORT", "DEFAULT_MAX_REQUEST_BYTES", "CONTENT_TYPE", "MAGIC",
    "Refusal", "Blob", "ProtocolOptions", "MeasureRequest", "OnnxInput",
    "encode_frames", "decode_frames", "sha256", "check_onnx", "external_tensors", "read_token",
    "create_token_file",
]

API_VERSION = 1
DEFAULT_PORT = 8765
DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
CONTENT_TYPE = "application/x-hwnas-frames"
MAGIC = b"HWNAS-AGENT-1\n"
MAX_HEADER_BYTES = 1 << 20
MIN_TOKEN_CHARS = 16
#: what `hwnas agent token` writes: a marked, versioned line, so a devices file pointing
#: `token_file` at some other secret (~/.git-credentials) never gets that secret sent
TOKEN_PREFIX = "hwnas-agent-token-v1:"
_TOKEN = re.compile(r"hwnas-agent-token-v1:[A-Za-z0-9_-]{43}")

_SHA = r"^[0-9a-f]{64}$"
Sha256 = Annotated[str, Field(pattern=_SHA)]
ModelId = Annotated[str, Field(min_length=1, max_length=200)]


class Refusal(Exception):
    """A request the agent turns down: HTTP status, machine-readable code, one-line message."""

    def __init__(self, status: int, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}

    def headers(self) -> dict[str, str]:
        """HTTP headers of the refusal: `Retry-After` when it says when to come back."""
        after = self.extra.get("retry_after")
        return {"Retry-After": str(int(after))} if after is not None else {}


class Blob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sha256: Sha256
    size: int = Field(ge=1)


class MeasureRequest(BaseModel):
    """The header of POST /measure and /measure_many.

    `agent_device` names one of the agent's own devices (a built-in or one from the agent's
    --devices file). That is the only say a client has over how a model runs: the agent takes no
    device spec, runtime option, execution provider, path or cache setting from a request (such
    fields would let a token holder make the runtime write files on the agent), and refuses a
    header that carries any field not listed here (`CLIENT_FIELDS`).
    """

    model_config = ConfigDict(extra="forbid")
    request_id: str = Field(pattern=r"^[A-Za-z0-9_-]{8,64}$")
    agent_device: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=64)
    protocol: ProtocolOptions = Field(default_factory=ProtocolOptions)
    models: dict[ModelId, Sha256] = Field(min_length=1, max_length=1000)
    reference: Sha256 | None = None
    blobs: list[Blob] = Field(default_factory=list, max_length=1001)

    #: the header fields a client may send; anything else is refused (400 `device_spec_refused`)
    CLIENT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"request_id", "agent_device", "protocol", "models", "reference", "blobs"})

    def digest(self, endpoint: str) -> str:
        """What the request asks for, independent of which blobs it happened to carry: a
        retried request id must ask for the same thing."""
        what = self.model_dump(mode="json", exclude={"request_id", "blobs"})
        return sha256(json.dumps([endpoint, what], sort_keys=True).encode())

    def shas(self) -> set[str]:
        return set(self.models.values()) | ({self.reference} if self.reference else set())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode_frames(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    """Header JSON + blobs as one body; `header["blobs"]` is filled in from `blobs`."""
    header = {**header, "blobs": [{"sha256": sha256(b), "size": len(b)} for b in blobs]}
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([MAGIC, struct.pack(">I", len(head)), head, *blobs])


def decode_frames(body: bytes) -> tuple[MeasureRequest, dict[str, bytes]]:
    """Parse and validate a body; returns the request and its blobs by their claimed sha256.
    Hashing is left to whoever keeps a blob (`ModelStore.add`): it is CPU work that must not
    run beside a measurement."""
    if not body.startswith(MAGIC) or len(body) < len(MAGIC) + 4:
        raise Refusal(400, "bad_request", "the body is not an hwnas agent request (bad magic); "
                      "use the hwnas client of the same version as the agent")
    (n,) = struct.unpack_from(">I", body, len(MAGIC))
    start = len(MAGIC) + 4
    if n > MAX_HEADER_BYTES or start + n > len(body):
        raise Refusal(400, "bad_request", f"the request header claims {n} bytes, "
                      f"more than the body or the {MAX_HEADER_BYTES}-byte header limit")
    try:
        header = json.loads(body[start:start + n])
    except (ValueError, UnicodeDecodeError):
        raise Refusal(400, "bad_request", "invalid request header: not JSON") from None
    except RecursionError:  # "[[[[...": nesting deeper than Python's stack, not a request
        raise Refusal(400, "bad_request", "invalid request header: JSON nested too deeply") \
            from None
    if not isinstance(header, dict):
        raise Refusal(400, "bad_request", "invalid request header: not a JSON object")
    if stray := sorted(set(header) - MeasureRequest.CLIENT_FIELDS):
        raise Refusal(400, "device_spec_refused", f"the request carries {', '.join(stray)}: the "
                      "agent takes no device spec, runtime option, provider, path or cache "
                      "setting from a client; name one of the agent's own devices with "
                      "agent_device (see GET /health) or add one to the agent's --devices file")
    if "agent_device" not in header:
        raise Refusal(400, "bad_request", "the request names no agent_device: name one of the "
                      "agent's own devices (see GET /health)")
    try:
        req = MeasureRequest.model_validate(header)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise Refusal(400, "bad_request", f"invalid request header: {where}: "
                      f"{first['msg'].removeprefix('Value error, ')}") from None
    blobs: dict[str, bytes] = {}
    pos = start + n
    for blob in req.blobs:
        data = body[pos:pos + blob.size]
        pos += blob.size
        if len(data) != blob.size:
            raise Refusal(400, "bad_request", f"blob {blob.sha256[:12]} is truncated")
        blobs[blob.sha256] = data
    if pos != len(body):
        raise Refusal(400, "bad_request", f"{len(body) - pos} unexpected bytes after the blobs")
    return req, blobs


# -- ONNX: the only payload accepted --------------------------------------------------------
@dataclass(frozen=True)
class OnnxInput:
    """The single input of an accepted model (the agent times it with a random tensor)."""

    shape: tuple[int, ...]
    dtype: str  # "float32" | "float16"


_DTYPES = {1: "float32", 10: "float16"}  # onnx.TensorProto.FLOAT, FLOAT16
MAX_INPUT_ELEMENTS = 1 << 27  # 512 MiB of float32: the random input the agent makes for a model


def external_tensors(model: Any) -> Iterator[Any]:
    """Every TensorProto anywhere in `model` that keeps its data in a file.

    Walks every message field (graphs, subgraphs of If/Loop/Scan at any depth, initializers,
    sparse initializers, node attributes incl. a Constant's `sparse_value`, functions, their
    default attributes, training info) instead of a list of known fields, so no place a tensor
    can sit is missed, also in fields a later ONNX adds. Iterative: depth cannot overflow."""
    import onnx
    from google.protobuf.message import Message

    stack = [model]
    while stack:
        msg = stack.pop()
        if isinstance(msg, onnx.TensorProto):
            if msg.data_location == onnx.TensorProto.EXTERNAL or len(msg.external_data):
                yield msg
            continue  # a tensor holds no tensors (and walking raw_data would copy it)
        for field, value in msg.ListFields():
            if field.message_type is None:
                continue
            if isinstance(value, Message):
                stack.append(value)
            else:  # a repeated message field
                stack.extend(value)


def check_onnx(data: bytes, input_name: str = "input") -> OnnxInput:
    """Accept only a self-contained ONNX model with one static float input named `input_name`.

    Parsing is protobuf decoding plus `onnx.checker` (nothing is executed). Tensors stored as
    external data are refused first, by walking the proto: they name files on the agent's disk
    that `onnx.checker` would look up (telling a client which files exist) and a runtime would
    read. Refusals never depend on the agent's files.
    """
    import onnx
    from google.protobuf.message import DecodeError

    def refuse(why: str) -> Refusal:
        return Refusal(415, "not_onnx", f"the payload is not an acceptable ONNX model: {why}; "
                       "the agent accepts only self-contained ONNX (never pickles or checkpoints)")

    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, RuntimeError, ValueError) as err:
        raise refuse(f"it does not parse ({type(err).__name__})") from None
    if next(external_tensors(model), None) is not None:
        raise refuse("it references external data files")
    if model.ir_version < 3 or not model.graph.node or not model.opset_import:
        raise refuse("no ONNX graph in it (missing ir_version, opset or nodes)")
    if any(prop.key == "ort_config" for prop in model.metadata_props):
        raise refuse("it carries ONNX Runtime session options (metadata 'ort_config'); the "
                     "agent's own device settings are the only ones used")
    try:
        onnx.checker.check_model(model)
    except Exception as err:  # noqa: BLE001 - any checker failure is the model's, not a bug
        raise refuse(f"onnx.checker: {str(err).strip().splitlines()[0][:200]}") from None
    return _single_input(model, input_name, refuse)


def _single_input(model: Any, input_name: str, refuse: Callable[[str], Refusal]) -> OnnxInput:
    init = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    if len(inputs) != 1 or inputs[0].name != input_name:
        raise refuse(f"expected one input named '{input_name}', got "
                     f"{[i.name for i in inputs][:10]}")
    ttype = inputs[0].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in ttype.shape.dim]
    if ttype.elem_type not in _DTYPES or not dims or min(dims) < 1:
        raise refuse(f"input '{input_name}' must be float32/float16 with static positive dims, "
                     f"got elem_type {ttype.elem_type} shape {dims[:8]}")
    if math.prod(dims) > MAX_INPUT_ELEMENTS:
        raise refuse(f"input '{input_name}' has {math.prod(dims)} elements, more than the "
                     f"agent's limit of {MAX_INPUT_ELEMENTS}")
    return OnnxInput(tuple(dims), _DTYPES[ttype.elem_type])


# -- tokens ---------------------------------------------------------------------------------
def read_token(path: str | os.PathLike[str] | None) -> str:
    """The shared secret from a token file `hwnas agent token` wrote; AgentError when unusable.

    Only that format is accepted (and only from a file its owner alone can read), so a devices
    file from someone else cannot make hwnas send another secret of yours as a token; the refusal
    never quotes the file's content."""
    if path is None:
        raise AgentError("no token file given: the agent and its clients share a token kept in "
                         "a file", hint="create one with `hwnas agent token FILE`")
    path = Path(path).expanduser()
    try:
        mode = path.stat().st_mode
        if os.name == "posix" and mode & 0o077:
            raise AgentError(f"token file {path} can be read by other users (mode {mode & 0o777:o}); "
                             "nothing was sent", hint=f"chmod 600 {path}")
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise AgentError(f"token file {path} does not exist",
                         hint="create one with `hwnas agent token FILE`") from None
    except (OSError, UnicodeDecodeError) as err:
        raise AgentError(f"token file {path} cannot be read: {type(err).__name__}") from None
    if not _TOKEN.fullmatch(token):
        raise AgentError(f"token file {path} does not hold an hwnas agent token (one line starting "
                         f"{TOKEN_PREFIX!r}); nothing was sent",
                         hint="create one with `hwnas agent token FILE` and use it on both machines")
    return token


def create_token_file(path: str | os.PathLike[str]) -> str:
    """Write a fresh random token to `path`, readable by its owner only; returns the token.
    Refuses to overwrite an existing file (it would lock out every client using it)."""
    path = Path(path).expanduser()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise AgentError(f"token file {path} already exists; remove it first to replace the "
                         "token") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token
