"""The command line's `[oauth]` block: `--config FILE` and the `--oauth-*` flags, read once."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from strictcall.identity.settings import OAuthSettings, load_settings


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


def oauth_of(args: argparse.Namespace) -> OAuthChoice | None:
    """The provider the flags and the file configure, or None for strictcall's own tokens only.

    Raises:
        ValueError: the file or a value is not valid (the message says which).
    """
    sources: dict[str, object] = {
        "path": args.config,
        "issuer": args.oauth_issuer,
        "resource": args.oauth_resource,
    }
    settings = load_settings(args.config, issuer=args.oauth_issuer, resource=args.oauth_resource)
    return None if settings is None else OAuthChoice(settings, sources)
