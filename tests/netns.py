"""Separate hosts on one machine, for the many-servers test: Linux network namespaces, each with
a network stack of its own (its own loopback, addresses and ports), joined to this one by a
veth pair, as hosts on one network are.

Each host has an address of 10.231.0.0/16 in a /30 link of its own (a random one, so that two
test runs at once on one machine do not collide); this namespace has the link's other address.
A server started in a host binds the host's address and is reached from here at it. The
tests' PostgreSQL listens on 127.0.0.1 only (this machine's settings are not the tests' to
change), so each host reaches it through a small TCP relay that listens on 10.231.k.1:5432
and connects to 127.0.0.1:5432: the servers talk to the database over the network, as
separate hosts do.

Making namespaces needs root and `ip` (iproute2); `cannot_make` says why they cannot be made
here, and the test falls back to processes on distinct ports.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from relay import Relay

SUBNET = "10.231"


@dataclass(frozen=True)
class Host:
    """One namespace: its name, its address, and this namespace's address on its link."""

    namespace: str
    address: str
    gateway: str

    def command(self, *argv: str) -> list[str]:
        """`argv`, run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def cannot_make() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "not root"
    probe = "sc-probe-" + secrets.token_hex(3)
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, check=False)
    if made.returncode != 0:
        return "`ip netns add` refused: " + made.stderr.decode(errors="replace").strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def hosts(count: int) -> Iterator[list[Host]]:
    """`count` hosts, removed (with their links) after."""
    tag = secrets.token_hex(2)
    links = secrets.SystemRandom().sample(range(256 * 64), count)  # /30 links in the /16
    made: list[Host] = []
    try:
        for k, link in enumerate(links, start=1):
            namespace, outer, inner = f"sc{tag}h{k}", f"sc{tag}o{k}", f"sc{tag}i{k}"
            third, fourth = divmod(link * 4, 256)
            prefix = f"{SUBNET}.{third}."
            host = Host(namespace, prefix + str(fourth + 2), prefix + str(fourth + 1))
            _ip("netns", "add", namespace)
            made.append(host)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", namespace)
            _ip("addr", "add", f"{host.gateway}/30", "dev", outer)
            _ip("link", "set", outer, "up")
            for args in (
                ("addr", "add", f"{host.address}/30", "dev", inner),
                ("link", "set", inner, "up"),
                ("link", "set", "lo", "up"),
            ):
                _ip("-n", namespace, *args)
        yield made
    finally:
        for host in made:  # deleting a namespace deletes its end of the pair, hence the pair
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True, check=False)


def url_via(url: str, host: Host) -> str:
    """`url` (a postgresql:// URL on 127.0.0.1) as `host` reaches it: through its relay."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    port = parts.port if parts.port is not None else 5432
    where = f"{host.gateway}:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{where}" if len(netloc) == 2 else where))


@contextmanager
def relays(hosts_: list[Host], port: int = 5432) -> Iterator[None]:
    """A TCP relay on each host's gateway address to 127.0.0.1:`port`, for as long as this
    lasts."""
    with ExitStack() as stack:
        for host in hosts_:
            stack.enter_context(Relay(("127.0.0.1", port), listen=(host.gateway, port)))
        yield
