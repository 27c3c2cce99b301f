"""Request ids: the one rule that the gateway, the transports and the reply reader share.

An id a strict peer mints is a non-empty str or an int (never a bool, a float or null). A server
answers only to ids every JSON-RPC peer can hold without loss: a non-empty str of at most
`MAX_CALL_ID_LENGTH` characters, or an int that fits 64 bits.

Call ids, which idempotency rests on (a write is done once per identity and call id), are
minted here alone (`mint_call_id`): for a call whose caller gave none (a JSON-RPC notification,
the command line) and for the scope of a connection (MCP's request ids are unique only within
one).
"""

from __future__ import annotations

import os
from typing import Final

from strictcall.errors import MAX_CALL_ID_LENGTH, JSONValue

MIN_WIRE_ID: Final = -(2**63)
MAX_WIRE_ID: Final = 2**63 - 1


MINTED_BYTES: Final = 16
"""Random bytes in a minted call id: 128 bits, as in a UUID4 (no two calls ever share one)."""


def mint_call_id(prefix: str) -> str:
    """A new call id no other call has: `prefix`, "-", and 32 random hex digits."""
    return f"{prefix}-{os.urandom(MINTED_BYTES).hex()}"


def check_request_id(request_id: object) -> None:
    """Refuse an id that a strict caller could not have minted.

    Raises:
        TypeError: the id is neither a str nor an int (bool is not an int here).
        ValueError: the id is an empty str.
    """
    if isinstance(request_id, bool):
        raise TypeError("a request id is a non-empty str or an int")
    if isinstance(request_id, int):
        return
    if not isinstance(request_id, str):
        raise TypeError("a request id is a non-empty str or an int")
    if not request_id:
        raise ValueError("a request id is a non-empty str or an int")


def wire_id(request_id: JSONValue) -> str | int | None:
    """`request_id` if a strict server answers to it (a non-empty str of at most
    `MAX_CALL_ID_LENGTH` characters, or an int that fits 64 bits), else None."""
    if type(request_id) is str:
        return request_id if 0 < len(request_id) <= MAX_CALL_ID_LENGTH else None
    if type(request_id) is int and MIN_WIRE_ID <= request_id <= MAX_WIRE_ID:
        return request_id
    return None


def valid_id(message: JSONValue) -> str | int | None:
    """The id of a JSON-RPC message if a strict server answers to it, else None (no id, or one
    that is not a `wire_id`)."""
    if type(message) is not dict:
        return None
    return wire_id(message.get("id"))


def id_too_long(message: JSONValue) -> bool:
    """Whether a JSON-RPC message's id is a str longer than `MAX_CALL_ID_LENGTH`."""
    if type(message) is not dict:
        return False
    request_id = message.get("id")
    return type(request_id) is str and len(request_id) > MAX_CALL_ID_LENGTH
