"""One token in, a verdict out: a `Principal`, `Refused` (401) or `Unavailable` (503).

A JWT is checked against the issuer's keys (`KeyCache`): a signature that fails on a known
`kid` fetches the JWKS again (at most once per `refresh_interval_s`, as an unknown kid does), so
a key rotated under the same kid is followed at once; any other token, when introspection is
configured, by the provider (`Introspector`). A verified JWT is remembered until it expires (at
most `CACHE_SIZE` of them, forgotten when the key set changes), so that a busy caller costs one
dict lookup, as strictcall's own tokens do; the signature is checked once per token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

from strictcall.identity.fetch import ProviderClient
from strictcall.identity.introspection import Introspector
from strictcall.identity.jwts import header_of, looks_like_jwt, signing_key, verify
from strictcall.identity.keys import KeyCache
from strictcall.identity.principal import (
    MAX_TOKEN_LENGTH,
    Failure,
    Principal,
    Refused,
    Unavailable,
    Verdict,
)
from strictcall.identity.settings import OAuthSettings

CACHE_SIZE: Final = 10_000
OWN_TOKEN_PREFIX: Final = "sc_"
LOG_EVERY_S: Final = 1.0
"""A flood of refused tokens writes one line per reason per second, with a count."""

log = logging.getLogger("strictcall")


class OAuthVerifier:
    """The provider's tokens, checked. Run `lifespan()` while serving (it fetches the keys and
    owns the HTTP client)."""

    def __init__(self, settings: OAuthSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.settings: Final = settings
        self._clock = clock
        self._client: ProviderClient | None = None
        self._keys: KeyCache | None = None
        self._introspector: Introspector | None = None
        self._verified: dict[str, Principal] = {}
        self._generation = 0
        self._logged: dict[Failure, tuple[float, int]] = {}
        """Per reason: when a refusal was last logged, and how many were not since."""

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Open the HTTP client and start fetching the keys (in the background: the server
        starts even while the provider is down, and says so in one line)."""
        client = ProviderClient(self.settings.http_timeout_s)
        self._client = client
        self._keys = KeyCache(self.settings, client)
        if self.settings.introspection is not None:
            self._introspector = Introspector(self.settings, client, self._keys)
        keys = self._keys
        keys.refresh_soon()
        try:
            yield
        finally:
            await keys.aclose()
            self._keys = None
            self._introspector = None
            self._client = None
            await client.aclose()

    def owns(self, token: str) -> bool:
        """Whether `token` is the provider's to check: a JWT, or (with introspection) any token
        but strictcall's own, or any at all when strictcall's own are not accepted."""
        if looks_like_jwt(token):
            return True
        own = token.startswith(OWN_TOKEN_PREFIX) and self.settings.own_tokens
        return not own and (self.settings.introspection is not None or not self.settings.own_tokens)

    def check_now(self, token: str) -> Verdict | None:
        """The verdict on `token` without waiting on the network, or None when it must be
        awaited (`check`): a key to fetch, a provider to ask."""
        keys = self._keys
        if keys is None:
            return None
        if keys.generation != self._generation:
            self._verified.clear()
            self._generation = keys.generation
        known = self._verified.get(token)
        if known is not None:
            if known.expires_at is not None and self._clock() < known.expires_at:
                return known
            del self._verified[token]
        if len(token) > MAX_TOKEN_LENGTH:
            return self._refused(Failure.MALFORMED)
        if not looks_like_jwt(token):
            if self._introspector is None:
                return self._refused(Failure.MALFORMED)
            return self._introspector.cached(token)
        header = header_of(token, self.settings)
        if isinstance(header, Refused):
            return self._refused(header.failure)
        alg, kid = header
        jwk = keys.keys.get(kid)
        if jwk is None:
            settled = keys.loaded and not (keys.failing or keys.refreshing)
            if settled and not keys.may_refresh():
                return self._refused(Failure.UNKNOWN_KEY)
            return None  # a fetch may find it, or the provider cannot be asked now
        if keys.stale():
            keys.refresh_soon()
        verdict = self._verified_by(token, jwk, alg)
        if _bad_signature(verdict) and (keys.may_refresh() or keys.refreshing):
            return None  # the key may have been rotated under the same kid: fetch, then judge
        return self._settled(token, verdict)

    async def check(self, token: str, client: str = "") -> Verdict:
        """The verdict on `token` (sent from the address `client`), fetching the keys or asking
        the provider when needed."""
        now = self.check_now(token)
        if now is not None:
            return now
        keys = self._keys
        if keys is None:  # not serving (stopped): nothing can be checked
            return Unavailable(self.settings.refresh_interval_s)
        if not looks_like_jwt(token):
            assert self._introspector is not None
            verdict = await self._introspector.check(token, client)
            return self._refused(verdict.failure) if isinstance(verdict, Refused) else verdict
        header = header_of(token, self.settings)
        assert not isinstance(header, Refused)  # check_now refused it otherwise
        alg, kid = header
        known = keys.keys.get(kid)
        if known is not None:
            verdict = self._verified_by(token, known, alg)
            if not _bad_signature(verdict):
                return self._settled(token, verdict)
        if keys.may_refresh() or keys.refreshing:
            if not await keys.refresh():  # one fetch, shared by every caller waiting on it
                return Unavailable(keys.retry_after_s())
        elif keys.failing or not keys.loaded:
            return Unavailable(keys.retry_after_s())
        jwk = keys.keys.get(kid)
        if jwk is None:
            return self._refused(Failure.UNKNOWN_KEY)
        return self._settled(token, self._verified_by(token, jwk, alg))

    def _verified_by(self, token: str, jwk: Mapping[str, Any], alg: str) -> Principal | Refused:
        """The verdict of `jwk` on `token` (not yet logged nor remembered)."""
        key = signing_key(jwk, alg)
        if isinstance(key, Refused):
            return key
        return verify(token, key, alg, self.settings)

    def _settled(self, token: str, verdict: Principal | Refused) -> Principal | Refused:
        """`verdict` on `token`, logged when a refusal, remembered when a principal."""
        if isinstance(verdict, Refused):
            return self._refused(verdict.failure)
        if verdict.expires_at is not None and self._clock() < verdict.expires_at:
            if len(self._verified) >= CACHE_SIZE:
                del self._verified[next(iter(self._verified))]  # the oldest
            self._verified[token] = verdict
        return verdict

    def _refused(self, failure: Failure) -> Refused:
        """A log line per refused token (at most one a second per reason, then with how many
        more there were): why, and nothing of the token."""
        now = self._clock()
        last, unsaid = self._logged.get(failure, (-LOG_EVERY_S, 0))
        if now - last < LOG_EVERY_S:
            self._logged[failure] = (last, unsaid + 1)
            return Refused(failure)
        more = f" (and {unsaid} more since)" if unsaid else ""
        log.warning("strictcall: a bearer token was refused: %s%s", failure.value, more)
        self._logged[failure] = (now, 0)
        return Refused(failure)


def _bad_signature(verdict: Principal | Refused) -> bool:
    return isinstance(verdict, Refused) and verdict.failure is Failure.SIGNATURE
