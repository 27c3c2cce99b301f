"""The proxy's own credentials for an HTTP upstream: an OAuth client-credentials grant of the
proxy's (never the caller's token: MCP's "no token passthrough"), its access token fetched
before the first call and again before it expires (once `REFRESH_FRACTION` of its lifetime is
left, at least `REFRESH_MIN_S` early), and once more after a 401 from the upstream.

The grant's faults are one `UpstreamAuthFailed` naming the token endpoint and the HTTP status
(never a response body or a secret): the proxy answers the call `upstream_unavailable`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Final

import anyio
import httpx2

from strictcall.errors import StrictcallError

REFRESH_FRACTION: Final = 0.2
REFRESH_MIN_S: Final = 10.0
DEFAULT_LIFETIME_S: Final = 300.0
"""Assumed when the token endpoint does not say `expires_in`."""


class UpstreamAuthFailed(StrictcallError):
    """The proxy could not get an access token for its upstream."""


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """The proxy's OAuth client at the upstream's provider."""

    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str | None = None
    resource: str | None = None
    """The upstream's canonical URI (RFC 8707), sent as `resource`; None: not sent."""


class ClientCredentialsAuth(httpx2.Auth):
    """`Authorization: Bearer` with the proxy's own token, fetched and refreshed as above."""

    requires_response_body = False  # an upstream's event stream is not read whole here

    def __init__(
        self, credentials: ClientCredentials, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._credentials = credentials
        self._clock = clock
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock = anyio.Lock()
        self.fetched = 0
        """How many tokens were fetched (for the tests and the operator)."""

    def _token_request(self) -> httpx2.Request:
        credentials = self._credentials
        form = {
            "grant_type": "client_credentials",
            "client_id": credentials.client_id,
            "client_secret": credentials.client_secret,
        }
        if credentials.scope is not None:
            form["scope"] = credentials.scope
        if credentials.resource is not None:
            form["resource"] = credentials.resource
        return httpx2.Request(
            "POST", credentials.token_url, data=form, headers={"accept": "application/json"}
        )

    def _take(self, response: httpx2.Response) -> None:
        where = self._credentials.token_url
        if response.status_code != 200:
            raise UpstreamAuthFailed(
                f"the token endpoint {where} answered HTTP {response.status_code}"
                + _oauth_error(response)
            )
        try:
            answer = response.json()
        except ValueError:
            raise UpstreamAuthFailed(f"the token endpoint {where} answered no JSON") from None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or token == "":
            raise UpstreamAuthFailed(f"the token endpoint {where} answered no access_token")
        lifetime = answer.get("expires_in")
        if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
            lifetime = DEFAULT_LIFETIME_S
        early = max(REFRESH_MIN_S, lifetime * REFRESH_FRACTION)
        self._token = token
        self._refresh_at = self._clock() + max(0.0, lifetime - early)
        self.fetched += 1

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        async with self._lock:
            if self._token is None or self._clock() >= self._refresh_at:
                fetched = yield self._token_request()
                await fetched.aread()
                self._take(fetched)
            token = self._token
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        async with self._lock:  # revoked, or the upstream's keys changed: one new token
            if self._token == token:
                fetched = yield self._token_request()
                await fetched.aread()
                self._take(fetched)
            token = self._token
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


def _oauth_error(response: httpx2.Response) -> str:
    """The OAuth `error` code of a token endpoint's refusal (e.g. ` (invalid_target)`), when it
    is one: a short word of the protocol, never its free-text description."""
    try:
        answer = response.json()
    except ValueError:
        return ""
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, str) and 0 < len(error) <= 40 and error.replace("_", "").isalpha():
        return f" ({error})"
    return ""
