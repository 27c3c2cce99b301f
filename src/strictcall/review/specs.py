"""Fields whose falsy values a published specification makes legal, for `strictcall lint`:
JSON-RPC 2.0's `result` and `id`, MCP's tool result fields, and the sampling parameters of the
OpenAI and Anthropic APIs; and what a comment or docstring says a falsy value means."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from strictcall.review.legal import EMPTY_LIST, EMPTY_OBJECT, EMPTY_TEXT, FALSE, NULL, ZERO


@dataclass(frozen=True, slots=True)
class Specified:
    """The falsy values a specification makes legal for a field, and which specification."""

    meant: frozenset[str]
    says: str


_JSONRPC_KEYS: Final = frozenset({"jsonrpc"})
_MCP_RESULT_KEYS: Final = frozenset({"structuredContent", "isError"})

_SAMPLING: Final[dict[str, str]] = {
    "temperature": "a sampling temperature of 0 (greedy decoding) is legal in the OpenAI and "
    "Anthropic APIs",
    "top_p": "top_p ranges from 0 to 1 in the OpenAI and Anthropic APIs, 0 included",
    "seed": "a sampling seed of 0 is a seed like any other (OpenAI's `seed` is any integer)",
    "frequency_penalty": "frequency_penalty ranges from -2.0 to 2.0 in the OpenAI API; 0 is no "
    "penalty",
    "presence_penalty": "presence_penalty ranges from -2.0 to 2.0 in the OpenAI API; 0 is no "
    "penalty",
}
"""LLM sampling parameters where 0 is a legal value with a meaning of its own."""


def specified(key: str | None, keys_read: Collection[str], use: str) -> Specified | None:
    """What a specification says of `key`'s falsy values, where the code shows the message is
    one it specifies (`keys_read`: the other keys the function reads from the same receiver);
    `use` is "truth", "or" or "none"."""
    if key is None:
        return None
    if key in _SAMPLING:
        return Specified(frozenset({ZERO}), _SAMPLING[key])
    if key == "structuredContent":
        return Specified(
            frozenset({EMPTY_OBJECT}),
            "MCP's CallToolResult.structuredContent is a JSON object, and {} is a legal one",
        )
    if key == "isError" and use == "or":
        return Specified(
            frozenset({FALSE}), "MCP's CallToolResult.isError false says the call succeeded"
        )
    if key == "content" and _MCP_RESULT_KEYS & set(keys_read):
        return Specified(
            frozenset({EMPTY_LIST}),
            "MCP's CallToolResult.content is a list of blocks, and [] is a legal one",
        )
    jsonrpc = bool(_JSONRPC_KEYS & set(keys_read)) or {"result", "error"} <= set(keys_read)
    if key == "result" and jsonrpc:
        return Specified(
            frozenset({ZERO, FALSE, EMPTY_TEXT, EMPTY_LIST, EMPTY_OBJECT, NULL}),
            'JSON-RPC 2.0: `result` is any JSON value, 0, false, "", [], {} and null included',
        )
    if key == "id" and jsonrpc:
        says = 'JSON-RPC 2.0: an id is a string or a number, 0 and "" too'
        return Specified(frozenset({ZERO, EMPTY_TEXT}), says)
    return None


def spec_says_absent_is_false(key: str | None) -> bool:
    """MCP's `isError` may be left out, meaning false: a truth test on it reads it rightly."""
    return key == "isError"
