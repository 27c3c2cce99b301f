"""The provider over HTTP: its metadata (RFC 8414, else OpenID Connect discovery), its JWKS and
its introspection endpoint (RFC 7662). Every fault is one `ProviderUnavailable` that says what
failed in the operator's words: never a response body, never a token. An answer is read up to
`MAX_ANSWER_BYTES` (a longer one is a fault, the rest never read) and parsed by orjson, whose
nesting limit makes a 100,000-deep document a fault too, never a `RecursionError`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import orjson

from strictcall.errors import MissingExtra, StrictcallError

try:
    import httpx
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("oauth", "httpx") from None

MAX_ANSWER_BYTES: Final = 1024 * 1024
"""The longest metadata, JWKS or introspection answer read (a JWKS of a hundred RSA keys is
about 50 KB); past it the answer is a fault, read no further."""


class ProviderUnavailable(StrictcallError):
    """The identity provider did not answer as it should (down, slow, an error status, not
    JSON, metadata for another issuer)."""


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    """What strictcall reads of the provider's metadata."""

    issuer: str
    jwks_uri: str
    introspection_endpoint: str | None


def discovery_urls(issuer: str) -> tuple[str, ...]:
    """Where an issuer's metadata may be: RFC 8414's well-known path (inserted before the
    issuer's path), then OpenID Connect discovery's (appended to it)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return (
        urlunsplit(
            (parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + path, "", "")
        ),
        urlunsplit(
            (parts.scheme, parts.netloc, path + "/.well-known/openid-configuration", "", "")
        ),
    )


class ProviderClient:
    """One HTTP client to the provider, closed with `aclose`."""

    def __init__(self, timeout_s: float) -> None:
        self._http = httpx.AsyncClient(timeout=timeout_s, follow_redirects=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get_json(self, url: str) -> Mapping[str, Any]:
        """The JSON object at `url`.

        Raises:
            ProviderUnavailable: no answer, an error status, or not a JSON object.
        """
        request = self._http.build_request("GET", url, headers={"accept": "application/json"})
        return await self._send(request, f"GET {url}")

    async def post_form(
        self, url: str, form: Mapping[str, str], *, auth: tuple[str, str]
    ) -> Mapping[str, Any]:
        """The JSON object answered to a form POSTed to `url` with HTTP Basic `auth`.

        Raises:
            ProviderUnavailable: no answer, an error status, or not a JSON object.
        """
        request = self._http.build_request(
            "POST", url, data=dict(form), headers={"accept": "application/json"}
        )
        return await self._send(request, f"POST {url}", httpx.BasicAuth(*auth))

    async def _send(
        self, request: httpx.Request, what: str, auth: httpx.Auth | None = None
    ) -> Mapping[str, Any]:
        """The JSON object `request` is answered with, read up to `MAX_ANSWER_BYTES`."""
        try:
            response = await self._http.send(request, auth=auth, stream=True)
            try:
                if response.status_code != 200:
                    raise ProviderUnavailable(f"{what}: HTTP {response.status_code}")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                    raise ProviderUnavailable(f"{what}: longer than {MAX_ANSWER_BYTES} bytes")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise ProviderUnavailable(f"{what}: longer than {MAX_ANSWER_BYTES} bytes")
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(f"{what}: {type(exc).__name__}") from None
        return _object(bytes(body), what)

    async def metadata(self, issuer: str, url: str | None) -> ProviderMetadata:
        """The provider's metadata, from `url` or discovered under `issuer`; its `issuer`
        must be `issuer` exactly (RFC 8414 section 3.3).

        Raises:
            ProviderUnavailable: none found, or it is for another issuer or names no JWKS.
        """
        found: Mapping[str, Any] | None = None
        failure: ProviderUnavailable | None = None
        for candidate in (url,) if url is not None else discovery_urls(issuer):
            try:
                found = await self.get_json(candidate)
                break
            except ProviderUnavailable as exc:
                failure = exc
        if found is None:
            assert failure is not None
            raise failure
        if found.get("issuer") != issuer:
            raise ProviderUnavailable("the provider's metadata is for another issuer")
        jwks_uri = found.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ProviderUnavailable("the provider's metadata names no jwks_uri")
        introspection = found.get("introspection_endpoint")
        return ProviderMetadata(
            issuer, jwks_uri, introspection if isinstance(introspection, str) else None
        )


def _object(body: bytes, what: str) -> Mapping[str, Any]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:  # not JSON, or nested past orjson's limit (1024)
        raise ProviderUnavailable(f"{what}: not JSON") from None
    if not isinstance(value, dict):
        raise ProviderUnavailable(f"{what}: not a JSON object")
    return value
