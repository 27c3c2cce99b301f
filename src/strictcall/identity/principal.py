"""Who called, with which scopes, and the refusals admission answers instead."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller the transport vouched for: its identity and, for a provider's token, its
    scopes (None: strictcall's own token, which no scope limits)."""

    identity: str
    scopes: frozenset[str] | None = None
    expires_at: float | None = None
    """When the token stops being valid (epoch seconds), where it says."""
    groups: frozenset[str] = frozenset()
    """The groups the token names in the configured claim (`groups_claim`); none without."""


class Failure(StrEnum):
    """Why a token was not accepted: for the operator's one log line and the tests, never in
    an answer (the answer says `invalid_token` and no more)."""

    MALFORMED = "malformed"
    ALGORITHM = "algorithm"
    UNKNOWN_KEY = "unknown_key"
    SIGNATURE = "signature"
    ISSUER = "issuer"
    AUDIENCE = "audience"
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    NO_IDENTITY = "no_identity"
    INACTIVE = "inactive"
    TYPE = "type"


@dataclass(frozen=True, slots=True)
class Refused:
    """A token that was checked and is not valid here: HTTP 401, `invalid_token`."""

    failure: Failure


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The token could not be checked now (the provider, its keys or its introspection
    endpoint did not answer): HTTP 503 `auth_unavailable`, retry after `retry_after_s`."""

    retry_after_s: float


@dataclass(frozen=True, slots=True)
class Throttled:
    """The token was not asked of the provider: its client address has `PER_CLIENT` questions
    waiting already, or the queue is full (HTTP 429 `auth_throttled`)."""

    retry_after_s: float


Verdict = Principal | Refused | Unavailable | Throttled
"""What checking one token gives."""

MAX_TOKEN_LENGTH: Final = 8192
"""A longer bearer value is refused unread (a 4 KiB header of garbage is read, then refused)."""


def missing_scopes(granted: frozenset[str] | None, needed: tuple[str, ...]) -> tuple[str, ...]:
    """The scopes in `needed` that `granted` lacks (none for strictcall's own tokens)."""
    if granted is None:
        return ()
    return tuple(scope for scope in needed if scope not in granted)


def seconds(value: object) -> float | None:
    """A NumericDate claim (`exp`, `nbf`) as epoch seconds; None when absent or not a number
    (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
