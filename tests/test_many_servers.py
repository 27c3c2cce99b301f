"""Three `strictcall serve` processes on one PostgreSQL database, as three hosts behind a load
balancer: driven at once, with the same call sent to two of them together, and one killed with
kill -9 mid-burst. Every acknowledged write is there exactly once; every call sent twice is
applied once, and both servers answer it alike.

Run twice: as processes on distinct ports of this host, and as three hosts, each server in a
network namespace of its own that reaches the database over its own link (tests/netns.py);
the second skips, with its reason, where namespaces cannot be made (not root, no iproute2).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import netns
from drill import drive_kill_and_check
from servers import RunningServer, create_token, start_server


@contextmanager
def three_servers(pg_url: str, placement: str) -> Iterator[list[RunningServer]]:
    """Three servers on `pg_url`: processes on distinct ports here, or one in each of three
    network namespaces, bound to its host's address and reaching the database through it."""
    if placement == "processes":
        yield [start_server(pg_url) for _ in range(3)]
        return
    reason = netns.cannot_make()
    if reason is not None:
        pytest.skip("network namespaces cannot be made here: " + reason)
    with netns.hosts(3) as hosts, netns.relays(hosts):
        servers = []
        try:
            for host in hosts:
                servers.append(
                    start_server(
                        pg_url,
                        "--host",
                        host.address,
                        prefix=host.command(),
                        db_url=netns.url_via(pg_url, host),
                    )
                )
            yield servers
        finally:
            for server in servers:
                server.stop(signal.SIGKILL)  # already stopped by the test, unless it failed


@pytest.mark.parametrize("placement", ["processes", "namespaces"])
def test_three_servers_one_killed_mid_burst_keep_every_acknowledged_write_once(
    pg_url: str, placement: str
) -> None:
    token = create_token(pg_url, "u1")
    with three_servers(pg_url, placement) as servers:
        drive_kill_and_check(pg_url, token, servers)
        if placement == "namespaces":  # each one was served on its own host's address
            addresses = {s.base_url.split("//")[1].rsplit(":")[0] for s in servers}
            assert len(addresses) == 3
            assert all(a.startswith(netns.SUBNET + ".") for a in addresses)
