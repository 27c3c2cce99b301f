"""Tool pinning: a tool's name, description and schemas, and its title, annotations, icons and
`_meta` where it has them, recorded in the store on first sight; a later change is not served
until an operator approves it (`strictcall tools approve NAME`).

Until then the tool is listed as it was pinned (the host never sees the changed description,
where a poisoned instruction would be, nor a read-only hint it was never approved with) and
every call answers `tool_changed`; the change is logged once per process and counted
(`changes`, in /metrics). Approvals made by another process (the command line) are read back
by `refresh`.
"""

from __future__ import annotations

import json
from typing import Final, TextIO

import mcp_types as types

from strictcall.services.proxy.config import UpstreamConfig
from strictcall.services.proxy.tools import display_members
from strictcall.storage.base import PinStore, StoreUnavailable

PIN_POLL_S: Final = 1.0
"""How often a federation with a tool held back reads the store for an approval."""


DISPLAY_MEMBERS: Final = ("title", "annotations", "icons", "_meta")
"""The members of a listed tool pinned beside its name, description and schemas, where the
upstream lists them (a tool without any pins exactly as before they were pinned)."""


def definition_of(listed: types.Tool) -> str:
    """What is pinned of a listed tool: its name, description, schemas, and its title,
    annotations, icons and `_meta` where it has them, as canonical JSON."""
    pinned: dict[str, object] = {
        "name": listed.name,
        "description": listed.description,
        "inputSchema": listed.input_schema,
        "outputSchema": listed.output_schema,
    }
    pinned |= display_members(listed)
    return json.dumps(
        pinned,
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def listed_of(definition: str) -> types.Tool:
    """The tool as it was pinned, to be listed in place of its changed definition."""
    pinned = json.loads(definition)
    return types.Tool(
        name=pinned["name"],
        description=pinned["description"],
        input_schema=pinned["inputSchema"],
        output_schema=pinned["outputSchema"],
        **{key: pinned[key] for key in DISPLAY_MEMBERS if key in pinned},
    )


class Pins:
    """The store's pins, kept in memory between listings; `check` is asked of every tool of
    every listing (not of calls)."""

    def __init__(self, store: PinStore, errlog: TextIO, log_as: str) -> None:
        self._store = store
        self._errlog = errlog
        self._log_as = log_as
        self._pinned: dict[str, str] = {}
        self._waiting: set[str] = set()
        self._logged: set[tuple[str, str]] = set()
        self.changes = 0
        """Changes seen (each tool's each new definition once) since the process started."""

    def load(self) -> None:
        """Read every pin from the store.

        Raises:
            StoreUnavailable: the store cannot answer.
        """
        pins = self._store.tool_pins()
        self._pinned = {pin.name: pin.pinned for pin in pins}
        self._waiting = {pin.name for pin in pins if pin.seen is not None}

    def refresh(self) -> bool:
        """Read the pins again; whether one of the tools held back was approved meanwhile."""
        before = dict(self._pinned)
        try:
            self.load()
        except StoreUnavailable:
            return False
        return any(before.get(name) != pinned for name, pinned in self._pinned.items())

    def check(self, name: str, definition: str) -> str | None:
        """None when the tool served as `name` may be served as `definition`; else the
        definition pinned for it (its first sight, or the last one approved), which is served
        instead, every call answering `tool_changed`. A store that cannot answer holds a new
        or changed tool back (no pinned definition known: "" here, the tool not served)."""
        pinned = self._pinned.get(name)
        try:
            if pinned is None:
                if not self._store.pin_tool(name, definition):  # another process was first
                    self.load()
                    return self.check(name, definition) if name in self._pinned else ""
                self._pinned[name] = definition
                return None
            if pinned == definition:
                if name in self._waiting:  # the upstream went back to what was approved
                    self._store.see_tool(name, None)
                    self._waiting.discard(name)
                return None
            if (name, definition) not in self._logged:
                self._store.see_tool(name, definition)
                self._waiting.add(name)
                self._logged.add((name, definition))
                self.changes += 1
                self._note(
                    f"tool {json.dumps(name)} changed upstream; not served until an operator"
                    f" approves it (strictcall tools diff; strictcall tools approve {name})"
                )
        except StoreUnavailable:
            self._note(f"tool {json.dumps(name)} held back: the store cannot record its pin")
            return "" if pinned is None else pinned
        return pinned

    def pinned_for(self, upstream: UpstreamConfig, separator: str) -> list[types.Tool]:
        """The tools pinned for `upstream` (those its prefix names), as they were pinned."""
        found = []
        for served, definition in sorted(self._pinned.items()):
            listed = listed_of(definition)
            if upstream.served_name(listed.name, separator) == served:
                found.append(listed)
        return found

    @property
    def holding(self) -> bool:
        """Whether some tool is held back, waiting for an approval."""
        return bool(self._waiting)

    def _note(self, line: str) -> None:
        self._errlog.write(f"{self._log_as}: {line}\n")
        self._errlog.flush()
