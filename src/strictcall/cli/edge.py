"""The HTTP edge's flags (`serve`, `proxy`, `federate`): added to a command's parser, read back
as `EdgeLimits`, and the first one given where it does not apply."""

from __future__ import annotations

import argparse

from strictcall.cli.arguments import _positive_float, _positive_int
from strictcall.server.edge import (
    DEFAULT_BODY_GRACE_S,
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_UNAUTHENTICATED_RATE,
    EdgeLimits,
)
from strictcall.transports.serving import INPUT_ROUND_WAIT_S, MAX_HELD_ROUNDS
from strictcall.transports.streams import (
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_IDENTITY,
    DEFAULT_STREAM_KEEPALIVE_S,
)


def _add_edge_arguments(parser: argparse.ArgumentParser) -> None:
    """The HTTP edge's flags, the same for `serve` and `proxy`."""
    edge = parser.add_argument_group("the edge (HTTP)")
    edge.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin that may call, e.g. https://app.example (repeatable; loopback "
        "origins are allowed when bound to a loopback address)",
    )
    edge.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="S",
        help=f"seconds for a request's headers (default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    edge.add_argument(
        "--body-grace",
        type=_positive_float,
        default=DEFAULT_BODY_GRACE_S,
        metavar="S",
        help=f"seconds a body may take before the minimum rate applies "
        f"(default {DEFAULT_BODY_GRACE_S:g})",
    )
    edge.add_argument(
        "--body-min-rate",
        type=_positive_int,
        default=DEFAULT_BODY_MIN_RATE,
        metavar="BYTES",
        help=f"bytes a second a body must keep up after its grace "
        f"(default {DEFAULT_BODY_MIN_RATE})",
    )
    edge.add_argument(
        "--max-connections",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"connections open at once (default {DEFAULT_MAX_CONNECTIONS})",
    )
    edge.add_argument(
        "--max-connections-per-client",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        metavar="N",
        help=f"connections open at once from one client address (an IPv6 /64) "
        f"(default {DEFAULT_MAX_CONNECTIONS_PER_CLIENT})",
    )
    edge.add_argument(
        "--max-unauthenticated-rate",
        type=_positive_int,
        default=DEFAULT_UNAUTHENTICATED_RATE,
        metavar="N",
        help=f"requests a second one client address may send without a valid token, after "
        f"a 5 s burst; more are refused auth_throttled (default {DEFAULT_UNAUTHENTICATED_RATE})",
    )
    edge.add_argument(
        "--max-in-flight",
        type=_positive_int,
        default=DEFAULT_MAX_IN_FLIGHT,
        metavar="N",
        help=f"one identity's calls answered at once; more are refused busy "
        f"(default {DEFAULT_MAX_IN_FLIGHT})",
    )
    edge.add_argument(
        "--max-streams",
        type=_positive_int,
        default=DEFAULT_MAX_STREAMS,
        metavar="N",
        help=f"/mcp change streams open at once, every identity's (a proxy's, a "
        f"federation's); more are refused busy (default {DEFAULT_MAX_STREAMS})",
    )
    edge.add_argument(
        "--max-streams-per-identity",
        type=_positive_int,
        default=DEFAULT_MAX_STREAMS_PER_IDENTITY,
        metavar="N",
        help=f"/mcp change streams one identity may hold open; more are refused busy "
        f"(default {DEFAULT_MAX_STREAMS_PER_IDENTITY})",
    )
    edge.add_argument(
        "--stream-keepalive",
        type=_positive_float,
        default=DEFAULT_STREAM_KEEPALIVE_S,
        metavar="S",
        help=f"seconds of silence on a change stream before a keep-alive comment "
        f"(default {DEFAULT_STREAM_KEEPALIVE_S:g})",
    )
    edge.add_argument(
        "--round-wait",
        type=_positive_float,
        default=INPUT_ROUND_WAIT_S,
        metavar="S",
        help=f"seconds a 2026-07-28 input_required round waits for the caller's answer "
        f"(default {INPUT_ROUND_WAIT_S:g})",
    )
    edge.add_argument(
        "--max-rounds-per-identity",
        type=_positive_int,
        default=MAX_HELD_ROUNDS,
        metavar="N",
        help=f"input_required rounds one identity may have held at once; one more is refused "
        f"to the upstream (default {MAX_HELD_ROUNDS})",
    )


def _edge_of(args: argparse.Namespace) -> EdgeLimits:
    """The edge limits the flags ask for."""
    return EdgeLimits(
        header_timeout_s=args.header_timeout,
        body_grace_s=args.body_grace,
        body_min_rate=args.body_min_rate,
        max_connections=args.max_connections,
        max_in_flight=args.max_in_flight,
        max_connections_per_client=args.max_connections_per_client,
        unauthenticated_rate=args.max_unauthenticated_rate,
        max_streams=args.max_streams,
        max_streams_per_identity=args.max_streams_per_identity,
        stream_keepalive_s=args.stream_keepalive,
        round_wait_s=args.round_wait,
        max_rounds_per_identity=args.max_rounds_per_identity,
    )


def _edge_flags_given(args: argparse.Namespace) -> str | None:
    """The first HTTP edge flag given a value other than its default, or None."""
    if args.allow_origin:
        return "--allow-origin"
    asked, defaults = _edge_of(args), EdgeLimits()
    for flag, field in (
        ("--header-timeout", "header_timeout_s"),
        ("--body-grace", "body_grace_s"),
        ("--body-min-rate", "body_min_rate"),
        ("--max-connections", "max_connections"),
        ("--max-connections-per-client", "max_connections_per_client"),
        ("--max-in-flight", "max_in_flight"),
        ("--max-unauthenticated-rate", "unauthenticated_rate"),
        ("--max-streams", "max_streams"),
        ("--max-streams-per-identity", "max_streams_per_identity"),
        ("--stream-keepalive", "stream_keepalive_s"),
        ("--round-wait", "round_wait_s"),
        ("--max-rounds-per-identity", "max_rounds_per_identity"),
    ):
        if getattr(asked, field) != getattr(defaults, field):
            return flag
    return None
