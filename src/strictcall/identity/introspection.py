"""Opaque access tokens, checked by the provider's RFC 7662 introspection endpoint as a client
of its own: active, for this issuer and resource, unexpired; the answer is kept until the token
expires or `CACHE_MAX_S` has passed, whichever is first (a revoked token lives that long). A
token the provider called inactive is refused without asking again for `REFUSED_S` (kept by its
SHA-256), at most `CONCURRENT` questions are asked at once, at most `QUEUED` wait for their
turn and at most `PER_CLIENT` of one client address are asked or waiting (past either, the
token is `Throttled`, not asked), so a flood of made-up tokens from one address costs the
provider little and never stands in front of another address's new token."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from strictcall.identity.fetch import ProviderClient, ProviderUnavailable
from strictcall.identity.jwts import principal_of, times_are_numbers
from strictcall.identity.keys import FAILURE_BACKOFF_S, KeyCache
from strictcall.identity.principal import (
    Failure,
    Principal,
    Refused,
    Throttled,
    Unavailable,
    Verdict,
    seconds,
)
from strictcall.identity.settings import OAuthSettings

CACHE_MAX_S: Final = 60.0
CACHE_SIZE: Final = 10_000
REFUSED_S: Final = 10.0
CONCURRENT: Final = 16
QUEUED: Final = 256
PER_CLIENT: Final = 4
THROTTLED_S: Final = 1.0
"""What a token not asked (its address's share, or the queue, full) is told to wait."""


class Introspector:
    """Introspection with its cache of active tokens (inactive ones are asked again)."""

    def __init__(
        self,
        settings: OAuthSettings,
        client: ProviderClient,
        keys: KeyCache,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert settings.introspection is not None
        self._settings = settings
        self._client_settings = settings.introspection
        self._client = client
        self._keys = keys  # holds the provider's metadata, which names the endpoint
        self._clock = clock
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._refused: dict[bytes, float] = {}
        self._asking = asyncio.Semaphore(CONCURRENT)
        self._waiting = 0  # questions asked or waiting for their turn
        self._by_client: dict[str, int] = {}  # of those, per client address

    def cached(self, token: str) -> Principal | None:
        """The principal of a token answered active not long ago, or None."""
        hit = self._cache.get(token)
        if hit is None:
            return None
        if self._clock() < hit[1]:
            return hit[0]
        del self._cache[token]
        return None

    async def check(self, token: str, client: str = "") -> Verdict:
        """Ask the provider about `token`, sent from `client` (an address; or answer from the
        caches, or throttle it)."""
        hit = self.cached(token)
        if hit is not None:
            return hit
        digest = hashlib.sha256(token.encode()).digest()
        refused_until = self._refused.get(digest)
        if refused_until is not None and self._clock() < refused_until:
            return Refused(Failure.INACTIVE)
        held = self._by_client.get(client, 0)  # absent: none of its tokens asked or waiting
        if held >= PER_CLIENT or self._waiting >= CONCURRENT + QUEUED:
            return Throttled(THROTTLED_S)
        self._by_client[client] = held + 1
        self._waiting += 1
        try:
            async with self._asking:
                return await self._ask(token, digest)
        finally:
            self._waiting -= 1
            left = self._by_client[client] - 1
            if left:
                self._by_client[client] = left
            else:
                del self._by_client[client]

    async def _ask(self, token: str, digest: bytes) -> Verdict:
        endpoint = self._client_settings.endpoint
        if endpoint is None:
            if self._keys.metadata is None and not await self._keys.refresh():
                return Unavailable(self._keys.retry_after_s())
            assert self._keys.metadata is not None
            endpoint = self._keys.metadata.introspection_endpoint
            if endpoint is None:
                return Unavailable(self._settings.refresh_interval_s)  # until it is configured
        try:
            answer = await self._client.post_form(
                endpoint,
                {"token": token, "token_type_hint": "access_token"},
                auth=(self._client_settings.client_id, self._client_settings.client_secret),
            )
        except ProviderUnavailable:
            return Unavailable(FAILURE_BACKOFF_S)
        verdict = self._judge(answer)
        if isinstance(verdict, Refused):
            if len(self._refused) >= CACHE_SIZE:
                del self._refused[next(iter(self._refused))]  # the oldest
            self._refused[digest] = self._clock() + REFUSED_S
        if isinstance(verdict, Principal):
            until = self._clock() + CACHE_MAX_S
            if verdict.expires_at is not None:
                until = min(until, verdict.expires_at)
            if len(self._cache) >= CACHE_SIZE:
                del self._cache[next(iter(self._cache))]  # the oldest
            self._cache[token] = (verdict, until)
        return verdict

    def _judge(self, answer: Mapping[str, Any]) -> Principal | Refused:
        if answer.get("active") is not True:
            return Refused(Failure.INACTIVE)
        settings = self._settings
        issuer = answer.get("iss")
        if issuer is not None and issuer != settings.issuer:  # optional in RFC 7662
            return Refused(Failure.ISSUER)
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or settings.resource not in audiences:
            return Refused(Failure.AUDIENCE)  # absent too: a token for any resource is not ours
        if not times_are_numbers(answer):
            return Refused(Failure.MALFORMED)
        now = self._clock()
        expires = seconds(answer.get("exp"))
        if expires is not None and now > expires + settings.leeway_s:
            return Refused(Failure.EXPIRED)
        not_before = seconds(answer.get("nbf"))
        if not_before is not None and now + settings.leeway_s < not_before:
            return Refused(Failure.NOT_YET_VALID)
        return principal_of(answer, settings)
