"""Identity from the team's identity provider: strictcall as an OAuth 2.1 resource server.

    settings      the one `[oauth]` block (flags and a TOML file): issuer, resource, algorithms
    principal     who called and with which scopes; the refusals admission answers with
    challenge     the protected resource metadata (RFC 9728) and the WWW-Authenticate values
    fetch         the provider's metadata, JWKS and introspection over HTTP (httpx)
    keys          the issuer's keys, cached; refreshed on an unknown kid at most once per interval
    jwts          access tokens that are JWTs, verified with PyJWT against those keys
    introspection opaque tokens by RFC 7662, cached within their lifetime
    verifier      the three together: one token in, a principal or a refusal out

This layer imports the catalogue and nothing else of strictcall; the server's admission and
the command line import it. It writes no cryptography: signatures are PyJWT's (on
`cryptography`), the transport is httpx's.
"""
