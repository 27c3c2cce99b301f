"""Access tokens that are JWTs (RFC 9068), verified by PyJWT against a key of the issuer's JWKS:
the header's algorithm on the allow-list and bound to the key's type, the signature, `iss`,
`aud` (the server's resource), `exp` and `nbf` (and `iat`) within the leeway and each a finite
number (PyJWT alone takes the string "9999999999"), and the header's `typ`, where the token
sets one, among `token_types` (RFC 9068's `at+jwt` by default)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from strictcall.errors import MissingExtra
from strictcall.identity.principal import Failure, Principal, Refused, seconds
from strictcall.identity.settings import OAuthSettings

try:
    import jwt
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("oauth", "jwt") from None

_FAMILIES: Final = {
    "RSA": frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}),
    "EC": frozenset({"ES256", "ES384", "ES512"}),
    "OKP": frozenset({"EdDSA"}),
}
_FAILURES: Final[tuple[tuple[type[jwt.PyJWTError], Failure], ...]] = (
    (jwt.ExpiredSignatureError, Failure.EXPIRED),
    (jwt.ImmatureSignatureError, Failure.NOT_YET_VALID),
    (jwt.InvalidAudienceError, Failure.AUDIENCE),
    (jwt.InvalidIssuerError, Failure.ISSUER),
    (jwt.InvalidSignatureError, Failure.SIGNATURE),
    (jwt.InvalidAlgorithmError, Failure.ALGORITHM),
    (jwt.InvalidKeyError, Failure.ALGORITHM),
)


def looks_like_jwt(token: str) -> bool:
    """Whether `token` has a JWS's compact form (three parts), so is the issuer's to check."""
    return token.count(".") == 2


def header_of(token: str, settings: OAuthSettings) -> tuple[str, str] | Refused:
    """The (alg, kid) of a token's header ("" without a kid), or its refusal: not a JWS, or an
    algorithm not on the allow-list (`none` and HMAC never are)."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return Refused(Failure.MALFORMED)
    alg = header.get("alg")
    kid = header.get("kid", "")
    if not isinstance(alg, str) or alg not in settings.algorithms:
        return Refused(Failure.ALGORITHM)
    if not isinstance(kid, str):
        return Refused(Failure.MALFORMED)
    if "typ" in header and settings.token_types and not _typ_accepted(header["typ"], settings):
        return Refused(Failure.TYPE)
    return alg, kid


def _typ_accepted(typ: object, settings: OAuthSettings) -> bool:
    """Whether a header's `typ` names an accepted type: compared without case and without an
    `application/` prefix (RFC 7515 section 4.1.9)."""
    if not isinstance(typ, str):
        return False
    name = typ.lower().removeprefix("application/")
    return any(
        name == accepted.lower().removeprefix("application/") for accepted in settings.token_types
    )


def times_are_numbers(claims: Mapping[str, Any]) -> bool:
    """Whether `exp`, `nbf` and `iat`, where present, are finite numbers (not a bool, not a
    string, not NaN or Infinity, which Python's JSON reader takes)."""
    for name in ("exp", "nbf", "iat"):
        if name in claims:
            value = claims[name]
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
            if not math.isfinite(value):
                return False
    return True


def signing_key(jwk: Mapping[str, Any], alg: str) -> jwt.PyJWK | Refused:
    """The key of `jwk`, for `alg`: the JWK's own `alg` when it names one, else any algorithm of
    its type's family (an RSA key never verifies an ES256 token, no key an HMAC one)."""
    named = jwk.get("alg")
    if named is not None and named != alg:
        return Refused(Failure.ALGORITHM)
    if alg not in _FAMILIES.get(str(jwk.get("kty")), frozenset()):
        return Refused(Failure.ALGORITHM)
    try:
        return jwt.PyJWK(dict(jwk), algorithm=alg)
    except jwt.PyJWTError:
        return Refused(Failure.ALGORITHM)


def verify(token: str, key: jwt.PyJWK, alg: str, settings: OAuthSettings) -> Principal | Refused:
    """The principal of a token signed with `key`, or why it is refused."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[alg],
            audience=settings.resource,
            issuer=settings.issuer,
            leeway=settings.leeway_s,
            options={"require": ["exp", "iss", "aud"], "strict_aud": False},
        )
    except jwt.MissingRequiredClaimError as exc:
        return Refused(Failure.AUDIENCE if exc.claim == "aud" else Failure.MALFORMED)
    except jwt.PyJWTError as exc:
        for kind, failure in _FAILURES:
            if isinstance(exc, kind):
                return Refused(failure)
        return Refused(Failure.MALFORMED)
    if not times_are_numbers(claims):
        return Refused(Failure.MALFORMED)
    return principal_of(claims, settings)


def principal_of(claims: Mapping[str, Any], settings: OAuthSettings) -> Principal | Refused:
    """The identity (the configured claim, a non-empty string), scopes (`scope`, a
    space-separated string, or `scp`, a list or a string) and groups (`groups_claim`, where
    configured: a list, or a space-separated string) of verified claims; the identity is
    written under `identity_prefix`, apart from strictcall's own tokens' names."""
    identity = claims.get(settings.identity_claim)
    if not isinstance(identity, str) or identity == "":
        return Refused(Failure.NO_IDENTITY)
    identity = settings.identity_prefix + identity
    granted = claims.get("scope")
    if granted is None:
        granted = claims.get("scp")
    if isinstance(granted, str):
        scopes = frozenset(granted.split())
    elif isinstance(granted, list):
        scopes = frozenset(item for item in granted if isinstance(item, str))
    else:  # absent, or of another type: no scope at all
        scopes = frozenset()
    groups: frozenset[str] = frozenset()
    if settings.groups_claim is not None:
        named = claims.get(settings.groups_claim)
        if isinstance(named, str):
            groups = frozenset(named.split())
        elif isinstance(named, list):
            groups = frozenset(item for item in named if isinstance(item, str) and item)
    return Principal(identity, scopes, seconds(claims.get("exp")), groups)
