"""The /mcp requests strictcall answers on its own path, as /rpc is answered: stateless, JSON
response, one request in and one answer out.

The SDK's streamable HTTP machinery (a transport, a dispatcher and memory streams per request,
a task group, a dozen pydantic validations) costs about 20x the gateway's own work on a
read_note call (bench/profile_wires.py). Most requests a remote host sends need none of it:

    2025-11-25 (and the other handshake-era versions, or no MCP-Protocol-Version header):
        tools/call whose params hold a name, arguments and at most a progress token,
        tools/list without params, ping
    2026-07-28:
        tools/call and tools/list whose params hold nothing but those and the envelope's
        `_meta` (protocol version, client info, client capabilities, log level, progress
        token)

Such a request is answered here only when the SDK would answer it too, by the same rules, and
with the same JSON: the SDK's own checks decide (its Accept reading, its header classifier for
2026-07-28, its model of the request's params), and anything they would refuse, anything
unusual (a repeated header, an `Mcp-Param-*` header, a tool that declares `x-mcp-header`,
another `_meta` member, a cursor, another method) is left to the SDK, which answers as it
always has.
tests/test_mcp_direct.py holds the two paths' answers equal over a corpus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import mcp_types as types
import orjson
from mcp.shared.inbound import (
    MCP_PARAM_HEADER_PREFIX,
    InboundModernRoute,
    classify_inbound_request,
)
from mcp_types.methods import validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from strictcall.core.ids import valid_id
from strictcall.errors import JSONValue
from strictcall.transports.asgi import Scope

_VERSION_HEADER: Final = b"mcp-protocol-version"
_PARAM_PREFIX: Final = MCP_PARAM_HEADER_PREFIX.lower().encode("latin-1")
_ENVELOPE: Final = frozenset(
    {
        types.PROTOCOL_VERSION_META_KEY,
        types.CLIENT_INFO_META_KEY,
        types.CLIENT_CAPABILITIES_META_KEY,
        types.LOG_LEVEL_META_KEY,
        "progressToken",
    }
)
"""The `_meta` members a direct request may hold: the 2026-07-28 envelope, a log level and a
progress token (strictcall's tools send neither logs nor progress, and a JSON response has no
room for them: the SDK's answer is the same without them)."""
_HANDSHAKE_META: Final = frozenset({"progressToken"})
_CALL: Final = frozenset({"name", "arguments"})
_HANDSHAKE_CALL: Final = frozenset({"name", "arguments", "_meta"})
_MODERN_CALL: Final = frozenset({"name", "arguments", "_meta"})
_HANDSHAKE_METHODS: Final = frozenset({"tools/call", "tools/list", "ping"})
_HANDSHAKE: Final = frozenset(version.encode("ascii") for version in HANDSHAKE_PROTOCOL_VERSIONS)
_MODERN: Final = {version.encode("ascii"): version for version in MODERN_PROTOCOL_VERSIONS}
HANDSHAKE_ERA: Final = "2025-11-25"
"""The version a handshake-era answer is written for (as `adapter.HANDSHAKE_ERA`)."""
_MODERN_METHODS: Final = frozenset({"tools/call", "tools/list"})


class DirectRequest(NamedTuple):
    """A request /mcp answers itself: its id, method and params, and the wire version its
    answer is written for."""

    request_id: types.RequestId
    method: str
    params: dict[str, JSONValue]
    version: str


def direct_request(
    scope: Scope, message: JSONValue, declares_headers: frozenset[str]
) -> DirectRequest | None:
    """`message` (a JSON-RPC request read strictly) as a request /mcp answers itself, or None
    when the SDK is to answer it. `declares_headers`: the tools whose input schema declares
    `x-mcp-header` (their calls are the SDK's, which checks the headers they declare)."""
    if type(message) is not dict or "id" not in message:
        return None
    request_id = valid_id(message)
    method = message.get("method")
    params = message.get("params", {})
    if request_id is None or type(method) is not str or type(params) is not dict:
        return None
    headers = _headers_read_once(scope)
    if headers is None or not _json_posted(headers):
        return None
    version = headers.get(_VERSION_HEADER)
    if version is None or version in _HANDSHAKE:
        if method not in _HANDSHAKE_METHODS:
            return None
        expected = _HANDSHAKE_CALL if method == "tools/call" else frozenset()
        if not expected.issuperset(params):
            return None
        if "_meta" in params:
            meta = params["_meta"]
            if type(meta) is not dict or not _HANDSHAKE_META.issuperset(meta):
                return None
            if not _valid_params(method, HANDSHAKE_ERA, params):
                return None
        return DirectRequest(request_id, method, params, HANDSHAKE_ERA)
    modern = _MODERN.get(version)
    if modern is None or method not in _MODERN_METHODS:
        return None
    expected = _MODERN_CALL if method == "tools/call" else frozenset({"_meta"})
    meta = params.get("_meta")
    if not expected.issuperset(params) or type(meta) is not dict or not _ENVELOPE.issuperset(meta):
        return None
    if method == "tools/call" and params.get("name") in declares_headers:
        return None
    if not _modern_route_passes(headers, message, modern, params):
        return None
    return DirectRequest(request_id, method, params, modern)


def _headers_read_once(scope: Scope) -> dict[bytes, bytes] | None:
    """The request's headers by name, or None when one this path reads is repeated (or an
    `Mcp-Param-*` header is sent): the SDK decides those."""
    listed = scope["headers"]
    if type(listed) is not list:
        listed = list(listed)
    headers = dict(listed)  # in C: a third of the time a loop that looks at each name takes
    if len(headers) != len(listed) and _repeats_one_read(listed):
        return None
    # find, not `in`: bytes' `in` tries its operand as an int first (a TypeError raised and
    # cleared inside, some 1,900 instructions)
    if (b"\n" + b"\n".join(headers)).find(_PARAM_LINE) >= 0:
        return None
    return headers


def _repeats_one_read(listed: list[tuple[bytes, bytes]]) -> bool:
    """Whether a header this path reads (Content-Type, Accept, `Mcp-*`) is sent twice."""
    seen: set[bytes] = set()
    for name, _value in listed:
        if name in _READ or name.startswith(b"mcp-"):
            if name in seen:
                return True
            seen.add(name)
    return False


_READ: Final = frozenset({b"content-type", b"accept"})
_PARAM_LINE: Final = b"\n" + _PARAM_PREFIX
"""An `Mcp-Param-*` header's name at the start of a line of the names joined by newlines
(ASGI's header names are lowercased and hold no newline)."""


def _json_posted(headers: Mapping[bytes, bytes]) -> bool:
    """A JSON body (the Content-Type both the SDK's checks accept) to a client that takes a
    JSON answer. A client sends the same two values with every request: the verdict is kept by
    them."""
    pair = (headers.get(b"content-type"), headers.get(b"accept", b""))
    known = _posted.get(pair)
    if known is not None:
        return known
    content_type, accept = pair
    posted = (
        content_type is not None
        and content_type.split(b";")[0].strip() == b"application/json"
        and accepts_json(accept)
    )
    if len(_posted) >= _VERDICTS_KEPT:
        _posted.clear()
    _posted[pair] = posted
    return posted


_posted: dict[tuple[bytes | None, bytes], bool] = {}
"""`_json_posted`'s verdicts on the Content-Type and Accept values seen lately."""


def accepts_json(accept: bytes) -> bool:
    """Whether an Accept header's value takes `application/json`, read as the SDK's
    `check_accept_headers` reads it (its `has_json`; tests/test_mcp_direct.py holds the two
    alike): media types lowercased without parameters, `*/*` and `application/*` count."""
    for media_type in accept.decode("latin-1").split(","):
        if media_type.strip().split(";")[0].strip().lower() in _JSON_TYPES:
            return True
    return False


_JSON_TYPES: Final = frozenset({"application/json", "application/*", "*/*"})


_ROUTING: Final = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
"""The headers the SDK's classifier reads (each read once here: `_headers_read_once` refuses a
repeated one, as the SDK's `find_duplicated_routing_header` does)."""


def _modern_route_passes(
    headers: Mapping[bytes, bytes], message: dict[str, Any], version: str, params: dict[str, Any]
) -> bool:
    """The SDK's own checks of a 2026-07-28 request: its classifier of the routing headers
    against the body, and its model of the method's params. A host sends the same envelope
    and headers with every call of a tool, so the verdict is kept by what the checks read."""
    method = message["method"]
    name = params.get("name")
    get = headers.get
    key = (
        method,
        name if name is None or type(name) is str else orjson.dumps(name),
        orjson.dumps(params.get("_meta")),
        get(b"mcp-protocol-version"),
        get(b"mcp-method"),
        get(b"mcp-name"),
    )
    known = _verdicts.get(key)
    if known is not None:
        return known
    routing = {
        header.decode("latin-1"): value.decode("latin-1")
        for header in _ROUTING
        if (value := headers.get(header)) is not None
    }
    verdict = classify_inbound_request(message, headers=routing)
    passes = isinstance(verdict, InboundModernRoute) and verdict.protocol_version == version
    if passes:
        try:
            validate_client_request(method, version, params)
        except ValidationError:
            passes = False
    _keep(key, passes)
    return passes


def _valid_params(method: str, version: str, params: dict[str, Any]) -> bool:
    """Whether the SDK's model of `method`'s params at `version` takes `params` (a handshake-
    era request's progress token), kept by the envelope as `_verdicts` says."""
    key = (method, version, orjson.dumps(params.get("_meta")))
    known = _verdicts.get(key)
    if known is not None:
        return known
    try:
        validate_client_request(method, version, params)
        valid = True
    except ValidationError:
        valid = False
    _keep(key, valid)
    return valid


_VERDICTS_KEPT: Final = 256
_verdicts: dict[tuple[object, ...], bool] = {}
"""The SDK's verdicts on the requests seen lately, by what its checks read: the method, the
tool's name, the `_meta` and the routing headers. The rest of the params is arguments that are
an object or absent (the intake sends any other call to the gateway as a `DirectCall`), which
the SDK's model always takes: these decide."""


def _keep(key: tuple[object, ...], verdict: bool) -> None:
    if len(_verdicts) >= _VERDICTS_KEPT:
        _verdicts.clear()
    _verdicts[key] = verdict
