"""A tool result that is MCP content: blocks (text, image, audio, resource_link, an embedded
resource), an optional structured value and `_meta`, checked at stage output like any result.

A handler returns a `Content` (build its blocks with `text_block`, `image_block`, ...) where it
has more to say than one JSON value; a proxied tool returns its upstream's. What stage output
checks (`check_blocks`, first failure wins, the result withheld as `invalid_tool_result`):

1. at most `MAX_BLOCKS` blocks, each an object whose `type` some protocol version knows;
2. each block's members as its type defines them: `text` a str; `data` (image, audio) and an
   embedded resource's `blob` well-formed base64; `mimeType` present where required and of the
   form type/subtype; `uri` with a scheme and no space or control character; `annotations`
   and `_meta` objects. Members no version defines are dropped, as the SDK's models drop them;
3. the structured value (an object, as MCP's structuredContent) against the tool's output
   schema, done by the pipeline's output rung.

Which block types a host's negotiated version knows is `BLOCK_TYPES`: the MCP wires refuse a
result holding any other (`blocks_known`), never passing it half-read.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import orjson

from strictcall.core.jsontext import MAX_RESULT_DEPTH, json_kind
from strictcall.errors import JSONValue

Block = dict[str, JSONValue]
"""One content block as MCP writes it ({"type": "text", "text": ...})."""

MAX_BLOCKS: Final = 1024
"""The most content blocks one result may hold; a result with more is withheld."""

_COMMON: Final = frozenset({"type", "annotations", "_meta"})
_MEMBERS: Final[Mapping[str, frozenset[str]]] = {
    "text": _COMMON | {"text"},
    "image": _COMMON | {"data", "mimeType"},
    "audio": _COMMON | {"data", "mimeType"},
    "resource_link": _COMMON | {"uri", "name", "title", "description", "mimeType", "size", "icons"},
    "resource": _COMMON | {"resource"},
}
"""The members each block type defines (the same in every version that knows the type)."""

_RESOURCE_MEMBERS: Final = frozenset({"uri", "mimeType", "_meta", "text", "blob"})

BLOCK_TYPES: Final[Mapping[str, frozenset[str]]] = {
    "2024-11-05": frozenset({"text", "image", "resource"}),
    "2025-03-26": frozenset({"text", "image", "audio", "resource"}),
    "2025-06-18": frozenset({"text", "image", "audio", "resource_link", "resource"}),
    "2025-11-25": frozenset({"text", "image", "audio", "resource_link", "resource"}),
    "2026-07-28": frozenset({"text", "image", "audio", "resource_link", "resource"}),
}
"""The block types a tool result may hold in each protocol version."""

KNOWN_TYPES: Final = frozenset().union(*BLOCK_TYPES.values())

_MIME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:\s*;.*)?")
"""A media type as RFC 9110 writes one: type/subtype, parameters after a semicolon."""

_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20\x7f-\x9f]*")
"""A URI as RFC 3986 begins one (a scheme and a colon), with no space or control character."""

_AUDIENCE: Final = frozenset({"user", "assistant"})


@dataclass(frozen=True, slots=True)
class Content:
    """A tool's result as MCP content: its blocks in order, an optional structured value (an
    object, checked against the tool's output schema), `_meta`, and whether it is the tool's
    own error message to the model (`is_error`: answered as `tool_error`, its blocks kept)."""

    blocks: tuple[Block, ...]
    structured: dict[str, JSONValue] | None = None
    meta: dict[str, JSONValue] | None = None
    is_error: bool = False

    def __post_init__(self) -> None:
        if type(self.blocks) is not tuple:
            object.__setattr__(self, "blocks", tuple(self.blocks))

    @classmethod
    def of_text(cls, text: str) -> Content:
        """A result of one text block."""
        return cls((text_block(text),))

    def text(self) -> str:
        """The text blocks' text, one block per line."""
        return "\n".join(b["text"] for b in self.blocks if b.get("type") == "text")

    def as_json(self) -> dict[str, JSONValue]:
        """The result as MCP writes it (as the SDK does: isError always, structuredContent and
        _meta where present)."""
        written: dict[str, JSONValue] = {"content": list(self.blocks), "isError": self.is_error}
        if self.structured is not None:
            written["structuredContent"] = self.structured
        if self.meta is not None:
            written["_meta"] = self.meta
        return written

    def as_value(self) -> JSONValue:
        """The result as one JSON value, for a caller that takes no blocks (/rpc,
        `Gateway.call`, OpenAI's turns): the structured value when there is one; otherwise,
        when every block is text, their texts joined one per line; otherwise the blocks as
        MCP writes them."""
        if self.structured is not None:
            return self.structured
        blocks = self.blocks
        if all(block.get("type") == "text" for block in blocks) and blocks:
            return self.text()
        return list(blocks)


def content_size(content: Content) -> int | None:
    """The length of `content` as MCP writes it, compact UTF-8 JSON; None when it cannot be
    written (a str holding a lone surrogate)."""
    try:
        return len(orjson.dumps(content.as_json()))
    except orjson.JSONEncodeError:
        return None


# --- building blocks -----------------------------------------------------------------------------


def text_block(text: str) -> Block:
    """A text block."""
    return {"type": "text", "text": text}


def image_block(data: bytes, mime_type: str) -> Block:
    """An image block of `data` (encoded here as base64), e.g. mime_type "image/png"."""
    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def audio_block(data: bytes, mime_type: str) -> Block:
    """An audio block of `data` (encoded here as base64), e.g. mime_type "audio/wav"."""
    return {"type": "audio", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def resource_link_block(uri: str, name: str, *, mime_type: str | None = None) -> Block:
    """A link to a resource the host may read (`resources/read`)."""
    block: Block = {"type": "resource_link", "uri": uri, "name": name}
    if mime_type is not None:
        block["mimeType"] = mime_type
    return block


def resource_block(
    uri: str, *, text: str | None = None, blob: bytes | None = None, mime_type: str | None = None
) -> Block:
    """An embedded resource holding `text` or `blob` (exactly one of them).

    Raises:
        ValueError: neither or both of `text` and `blob` given.
    """
    if (text is None) == (blob is None):
        raise ValueError("an embedded resource holds text or blob, exactly one")
    resource: Block = {"uri": uri}
    if mime_type is not None:
        resource["mimeType"] = mime_type
    if text is not None:
        resource["text"] = text
    else:
        assert blob is not None
        resource["blob"] = base64.b64encode(blob).decode("ascii")
    return {"type": "resource", "resource": resource}


# --- stage output's checks -----------------------------------------------------------------------


def check_blocks(blocks: Iterable[JSONValue]) -> tuple[Block, ...] | None:
    """The blocks as they pass stage output (members no version defines dropped), or None when
    one is not a content block some version knows, there are more than `MAX_BLOCKS`, or they
    are not a JSON value nested at most `MAX_RESULT_DEPTH` deep as a list (the members whose
    insides a block type leaves free, `annotations`, `_meta`, `icons` and an embedded
    resource, are walked; the others are a str or an int, read as such). One pass: what
    passes needs no walk again before it is written."""
    kept: list[Block] = []
    for block in blocks:
        if len(kept) >= MAX_BLOCKS or type(block) is not dict:
            return None
        members = _MEMBERS.get(block.get("type"))  # type: ignore[arg-type]
        if members is None or not _block_is_valid(block):
            return None
        if not members.issuperset(block):
            block = {key: value for key, value in block.items() if key in members}
        for member in _FREE_MEMBERS:
            if member in block and json_kind(block[member], _FREE_DEPTH) is None:
                return None
        kept.append(block)
    return tuple(kept)


_FREE_MEMBERS: Final = ("annotations", "_meta", "icons", "resource")
"""The members of a block whose insides its type does not pin down to a str or an int."""

_FREE_DEPTH: Final = MAX_RESULT_DEPTH - 2
"""How deep a block's member may nest: the blocks are a list (1), each block an object (2)."""


def blocks_known(blocks: Iterable[Block], version: str) -> bool:
    """Whether protocol `version` knows every block's type (an unknown version: the latest)."""
    known = BLOCK_TYPES.get(version, KNOWN_TYPES)
    return all(block["type"] in known for block in blocks)


def _block_is_valid(block: Block) -> bool:
    kind = block["type"]
    if not _common_is_valid(block):
        return False
    if kind == "text":
        return type(block.get("text")) is str
    if kind == "image" or kind == "audio":
        return _is_base64(block.get("data")) and _is_mime(block.get("mimeType"))
    if kind == "resource_link":
        return (
            _is_uri(block.get("uri"))
            and type(block.get("name")) is str
            and _optional(block, "title", str)
            and _optional(block, "description", str)
            and ("mimeType" not in block or _is_mime(block["mimeType"]))
            and ("size" not in block or _is_size(block["size"]))
            and ("icons" not in block or _is_icons(block["icons"]))
        )
    return _resource_is_valid(block.get("resource"))


def _resource_is_valid(resource: JSONValue) -> bool:
    """An embedded resource's contents: a URI, text or base64 blob (one), optional mimeType."""
    if type(resource) is not dict or not _RESOURCE_MEMBERS.issuperset(resource):
        return False
    if not _is_uri(resource.get("uri")):
        return False
    if "mimeType" in resource and not _is_mime(resource["mimeType"]):
        return False
    if "_meta" in resource and type(resource["_meta"]) is not dict:
        return False
    if "text" in resource:
        return "blob" not in resource and type(resource["text"]) is str
    return _is_base64(resource.get("blob"))


def _common_is_valid(block: Block) -> bool:
    if "_meta" in block and type(block["_meta"]) is not dict:
        return False
    if "annotations" not in block:
        return True
    annotations = block["annotations"]
    if type(annotations) is not dict:
        return False
    audience = annotations.get("audience")
    if "audience" in annotations and not (
        type(audience) is list and all(type(a) is str and a in _AUDIENCE for a in audience)
    ):
        return False
    if "priority" in annotations:
        priority = annotations["priority"]
        if not (type(priority) in (int, float) and math.isfinite(priority) and 0 <= priority <= 1):
            return False
    return "lastModified" not in annotations or type(annotations["lastModified"]) is str


def _optional(block: Block, member: str, kind: type) -> bool:
    return member not in block or type(block[member]) is kind


def _is_size(value: JSONValue) -> bool:
    return type(value) is int and value >= 0


def _is_icons(value: JSONValue) -> bool:
    return type(value) is list and all(
        type(icon) is dict and _is_uri(icon.get("src")) for icon in value
    )


def _is_mime(value: JSONValue) -> bool:
    return type(value) is str and _MIME.fullmatch(value) is not None


def _is_uri(value: JSONValue) -> bool:
    return type(value) is str and _URI.fullmatch(value) is not None


def _is_base64(value: JSONValue) -> bool:
    """Whether `value` is a str of standard base64 (RFC 4648 section 4, padded, no spaces).

    Read by deleting the alphabet from its bytes (one pass in C): 20 times quicker than
    `binascii.a2b_base64(strict_mode=True)` on 64 KiB, which decodes what is only checked."""
    if type(value) is not str or len(value) % 4 or not value.isascii():
        return False
    raw = value.encode("ascii")
    body = raw.rstrip(b"=")
    return len(raw) - len(body) <= 2 and not body.translate(None, _BASE64_ALPHABET)


_BASE64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
