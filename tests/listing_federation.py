"""`strictcall federate` on stdio in front of hand-written upstreams whose listings a test
rewrites while it runs (tests/upstreams/listing_upstream.py): an impostor that relists another's
names, a tool that appears mid-run, a listing past a budget, a flood of notifications."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from mcp_peers import UPSTREAMS
from stdio_peer import StdioPeer

LISTING_UPSTREAM = UPSTREAMS / "listing_upstream.py"


class ListingFederation:
    """A federation of listing upstreams, each named, with its prefix ("" by default) and its
    first listing; `relist` rewrites one's listing (it then sends list_changed)."""

    def __init__(
        self,
        tmp: Path,
        upstreams: dict[str, dict[str, Any]],
        *,
        prefixes: dict[str, str] | None = None,
        pinning: bool = True,
        extra: str = "",
        db: Path | None = None,
        missing: frozenset[str] = frozenset(),
        name: str = "federate",
        http: bool = False,
        args: tuple[str, ...] = (),
    ) -> None:
        """`http`: served over HTTP on a port of its own (`base_url`), not on stdio; `args`:
        more of `strictcall federate`'s flags."""
        self.tmp = tmp
        self.db = db or tmp / "federation.sqlite3"
        prefixes = prefixes or {}
        lines = [f"[federation]\npinning = {str(pinning).lower()}\n{extra}"]
        for upstream, listing in upstreams.items():
            self.relist(upstream, listing, touch=False)
            command = [sys.executable, str(LISTING_UPSTREAM), upstream, str(self.path(upstream))]
            if upstream in missing:  # down: it exits at once (a program not there is refused)
                command = [sys.executable, "-c", "raise SystemExit(3)"]
            lines.append(
                f"[upstreams.{upstream}]\ncommand = {json.dumps(shlex.join(command))}\n"
                f"prefix = {json.dumps(prefixes.get(upstream, ''))}\n"
            )
        self.config = tmp / f"{name}.toml"
        self.config.write_text("".join(lines), encoding="utf-8")
        self.stderr_path = tmp / f"{name}.stderr"
        self._stderr = self.stderr_path.open("wb")
        argv = [
            sys.executable,
            "-m",
            "strictcall",
            "federate",
            "--config",
            str(self.config),
            "--db",
            str(self.db),
            *(("--port", "0") if http else ("--stdio", "--identity", "u1")),
            *args,
        ]
        self.peer = StdioPeer(argv, self._stderr)
        self.base_url = ""
        """Over HTTP, where it listens."""
        if http:
            line = self.peer.line()  # the one line, once it listens (None: it died)
            assert line is not None and b"listening on " in line, line
            self.base_url = line.decode().split("listening on ", 1)[1].split()[0]

    def path(self, upstream: str) -> Path:
        return self.tmp / f"{upstream}.listing.json"

    def relist(self, upstream: str, listing: dict[str, Any], *, touch: bool = True) -> None:
        """Write `upstream`'s listing; it notices and sends list_changed."""
        path = self.path(upstream)
        part = path.with_suffix(".part")
        part.write_text(json.dumps(listing), encoding="utf-8")
        part.replace(path)  # whole, never half-written

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def tools(self) -> dict[str, dict[str, Any]]:
        listed = self.peer.request("tools/list")["result"]["tools"]
        return {tool["name"]: tool for tool in listed}

    def resources(self) -> dict[str, dict[str, Any]]:
        listed = self.peer.request("resources/list")["result"]["resources"]
        return {resource["uri"]: resource for resource in listed}

    def close(self) -> int:
        try:
            if self.base_url:  # over HTTP it serves until it is stopped
                self.peer.process.terminate()
            return self.peer.close()
        finally:
            self._stderr.close()
