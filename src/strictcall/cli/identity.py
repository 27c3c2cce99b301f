"""The command line's identity settings: the `[oauth]` block (`--config FILE` and the
`--oauth-*` flags, read once), and the proxy's own OAuth client for its upstream."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strictcall.identity.settings import OAuthSettings, load_settings

if TYPE_CHECKING:
    from strictcall.services.proxy.credentials import ClientCredentials

UPSTREAM_SECRET_ENV = "STRICTCALL_UPSTREAM_CLIENT_SECRET"


@dataclass(frozen=True, slots=True)
class OAuthChoice:
    """The settings, and where they came from (what each worker process reads again)."""

    settings: OAuthSettings
    sources: dict[str, object]


def add_oauth_arguments(parser: argparse.ArgumentParser) -> None:
    """The identity provider's flags, the same for `serve` and `proxy` (HTTP only)."""
    group = parser.add_argument_group("identity provider (HTTP; see README: behind a team's IdP)")
    group.add_argument(
        "--config", metavar="FILE", help="a TOML file whose [oauth] table configures the provider"
    )
    add_oauth_flags(group)


def add_oauth_flags(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """The identity provider's flags besides `--config` (`federate`, whose `--config` is its
    federation's file, which may hold the `[oauth]` table)."""
    group.add_argument(
        "--oauth-issuer", metavar="URL", help="accept access tokens from this issuer (its exact id)"
    )
    group.add_argument(
        "--oauth-resource",
        metavar="URI",
        help="this server's canonical URI: the audience its tokens must name",
    )


def oauth_given(args: argparse.Namespace) -> str | None:
    """The first identity provider flag given, or None."""
    for flag, value in (
        ("--config", args.config),
        ("--oauth-issuer", args.oauth_issuer),
        ("--oauth-resource", args.oauth_resource),
    ):
        if value is not None:
            return flag
    return None


def oauth_of(args: argparse.Namespace, beside: frozenset[str] = frozenset()) -> OAuthChoice | None:
    """The provider the flags and the file configure, or None for strictcall's own tokens only;
    `beside`: the file's other tables (a federation's config).

    Raises:
        ValueError: the file or a value is not valid (the message says which).
    """
    sources: dict[str, object] = {
        "path": args.config,
        "issuer": args.oauth_issuer,
        "resource": args.oauth_resource,
    }
    settings = load_settings(
        args.config, issuer=args.oauth_issuer, resource=args.oauth_resource, beside=beside
    )
    return None if settings is None else OAuthChoice(settings, sources)


def add_upstream_oauth_arguments(parser: argparse.ArgumentParser) -> None:
    """The proxy's own OAuth client for an HTTP upstream (its secret: an environment variable)."""
    group = parser.add_argument_group(
        "the upstream's credentials (the caller's token is never passed on)"
    )
    group.add_argument(
        "--upstream-token-url",
        metavar="URL",
        help="with --upstream-url: get the proxy's own token there by the client-credentials"
        f" grant (with --upstream-client-id; the secret in ${UPSTREAM_SECRET_ENV})",
    )
    group.add_argument("--upstream-client-id", metavar="ID", help="the proxy's OAuth client")
    group.add_argument("--upstream-scope", metavar="SCOPES", help="scopes to ask for")
    group.add_argument(
        "--upstream-resource",
        metavar="URI",
        help="the upstream's resource URI for the token (default: --upstream-url)",
    )


def upstream_credentials_of(
    args: argparse.Namespace, environ: Mapping[str, str] = os.environ
) -> ClientCredentials | None:
    """The proxy's own OAuth client the flags describe, or None.

    Raises:
        ValueError: they are incomplete, or given without --upstream-url.
    """
    given = [
        args.upstream_token_url,
        args.upstream_client_id,
        args.upstream_scope,
        args.upstream_resource,
    ]
    if all(value is None for value in given):
        return None
    if args.upstream_url is None:
        raise ValueError("the --upstream-token-url flags go with --upstream-url")
    if args.upstream_token_url is None or args.upstream_client_id is None:
        raise ValueError("--upstream-token-url and --upstream-client-id go together")
    if not args.upstream_token_url.startswith(("https://", "http://")):
        raise ValueError("--upstream-token-url is an http(s) URL")
    secret = environ.get(UPSTREAM_SECRET_ENV)
    if secret is None or secret == "":
        raise ValueError(f"the upstream's OAuth client needs its secret in ${UPSTREAM_SECRET_ENV}")
    from strictcall.services.proxy.credentials import ClientCredentials

    resource = args.upstream_resource
    return ClientCredentials(
        args.upstream_token_url,
        args.upstream_client_id,
        secret,
        scope=args.upstream_scope,
        resource=resource if resource is not None else args.upstream_url,
    )
