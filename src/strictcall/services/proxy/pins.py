"""Pinning: a served tool's (and resource's, template's, prompt's) definition recorded in the
store with the upstream that serves it (a tool's title, annotations, icons and `_meta` with its
name, description and schemas, where it has them); a later change is not served until an
operator approves what they reviewed (`strictcall tools approve NAME --digest D`).

At start, what is seen for the first time is pinned (trust on first use). What appears later
(an upstream's relisting, a restart that lists a tool it did not list before) waits for an
approval like a change: nothing is approved for it yet, so it is not served. A changed tool is
listed as it was pinned (the host never sees the changed description, where a poisoned
instruction would be, nor a read-only hint it was not approved with) and every call answers
`tool_changed`; a changed resource, template or prompt is not served. Each change is logged
once per process and counted (`changes`, in /metrics). Approvals made by another process (the
command line) are read back by `refresh`.

The pin of each is keyed by its served name (a tool's), or `resource:URI`, `template:URI` and
`prompt:NAME`; its definition names the upstream, so two upstreams without a prefix keep
their pins apart and a name taken over by another upstream is a change, shown with that
upstream's name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final, TextIO

import mcp_types as types

from strictcall.core.terminal import one_line
from strictcall.services.proxy.config import UpstreamConfig
from strictcall.services.proxy.tools import display_members
from strictcall.storage.base import PinStore, StoreUnavailable

PIN_POLL_S: Final = 1.0
"""How often a federation with something held back reads the store for an approval."""
NOTHING: Final = ""
"""The approved definition of one that appeared mid-run: none yet."""


def canonical(value: dict[str, object]) -> str:
    """`value` as canonical JSON (sorted keys, no spaces), the text that is pinned."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


DISPLAY_MEMBERS: Final = ("title", "annotations", "icons", "_meta")
"""The members of a listed tool pinned beside its name, description and schemas, where the
upstream lists them (a tool without any pins exactly as before they were pinned)."""


def definition_of(listed: types.Tool, upstream: str) -> str:
    """What is pinned of a listed tool: its upstream, name, description and schemas, and its
    title, annotations, icons and `_meta` where it has them."""
    return canonical(
        {
            "upstream": upstream,
            "name": listed.name,
            "description": listed.description,
            "inputSchema": listed.input_schema,
            "outputSchema": listed.output_schema,
            **display_members(listed),
        }
    )


def content_definition(
    listed: types.Resource | types.ResourceTemplate | types.Prompt, upstream: str
) -> str:
    """What is pinned of a listed resource, template or prompt: its upstream and what it
    lists (without `_meta`)."""
    dumped = listed.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"meta"})
    return canonical({**dumped, "upstream": upstream})


def digest_of(definition: str) -> str:
    """The digest an operator names to approve exactly `definition` (SHA-256, hex)."""
    return hashlib.sha256(definition.encode("utf-8", "surrogatepass")).hexdigest()


def upstream_of(definition: str) -> str | None:
    """The upstream a pinned definition names (None: pinned before pins named it, or none)."""
    if not definition:
        return None
    found = json.loads(definition).get("upstream")
    return found if isinstance(found, str) else None


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


def shown_key(key: str) -> str:
    """A pin's key as the log and `tools diff` print it: its kind, then its name or URI as
    JSON, every character a terminal acts on escaped (`tool "notes_add"`)."""
    kind, colon, rest = key.partition(":")
    if colon and kind in ("resource", "template", "prompt"):
        return f"{kind} {one_line(json.dumps(rest))}"
    return f"tool {one_line(json.dumps(key))}"


def _same(pinned: str, definition: str) -> bool:
    """Whether `definition` is the one pinned (a pin written before pins named their upstream
    is compared without it)."""
    if pinned == definition:
        return True
    if not pinned:
        return False
    old = json.loads(pinned)
    if "upstream" in old:
        return False
    new = json.loads(definition)
    new.pop("upstream", None)
    return bool(old == new)


class Pins:
    """The store's pins, kept in memory between listings; `check` is asked of every tool of
    every listing (not of calls)."""

    def __init__(self, store: PinStore, errlog: TextIO, log_as: str) -> None:
        self._store = store
        self._errlog = errlog
        self._log_as = log_as
        self._pinned: dict[str, str] = {}
        self._waiting: dict[str, str | None] = {}
        """The served names held back, waiting for an approval: each one's upstream."""
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
        self._waiting = {pin.name: upstream_of(pin.seen) for pin in pins if pin.seen is not None}

    def refresh(self) -> bool:
        """Read the pins again; whether one of the tools held back was approved meanwhile."""
        before = dict(self._pinned)
        try:
            self.load()
        except StoreUnavailable:
            return False
        return any(before.get(name) != pinned for name, pinned in self._pinned.items())

    def check(self, name: str, definition: str, *, new_waits: bool = False) -> str | None:
        """None when the one served as `name` may be served as `definition`; else the
        definition pinned for it (its first sight, or the last one approved), served instead of
        a tool's, every call answering `tool_changed` ("": nothing approved, not served).

        One never pinned is pinned now, unless `new_waits` (it appeared mid-run): then it waits
        for an approval, as a change does. A store that cannot answer holds a new or changed
        one back."""
        pinned = self._pinned.get(name)
        try:
            if pinned is None:
                if new_waits:
                    if self._store.pin_tool(name, NOTHING):
                        self._pinned[name] = NOTHING
                    else:  # another process was first
                        self.load()
                    return self.check(name, definition)
                if not self._store.pin_tool(name, definition):  # another process was first
                    self.load()
                    return self.check(name, definition) if name in self._pinned else NOTHING
                self._pinned[name] = definition
                return None
            if _same(pinned, definition):
                if name in self._waiting:  # the upstream went back to what was approved
                    self._store.see_tool(name, None)
                    self._waiting.pop(name, None)
                return None
            if (name, definition) not in self._logged:
                self._store.see_tool(name, definition)
                self._waiting[name] = upstream_of(definition)
                self._logged.add((name, definition))
                self.changes += 1
                what = "appeared" if pinned == NOTHING else "changed"
                upstream = upstream_of(definition) or "?"
                self._note(
                    f"{shown_key(name)} {what} upstream {upstream} (digest"
                    f" {digest_of(definition)[:12]}); not served until an operator approves it"
                    " (strictcall tools diff)"
                )
        except StoreUnavailable:
            self._note(f"{shown_key(name)} held back: the store cannot record its pin")
            return NOTHING if pinned is None else pinned
        return pinned

    def pinned_for(self, upstream: UpstreamConfig, separator: str) -> list[types.Tool]:
        """The tools pinned for `upstream` (those pinned as its, or else, pinned before pins
        named their upstream, those its prefix names), as they were pinned."""
        found = []
        for served, definition in sorted(self._pinned.items()):
            if not definition or ":" in served:  # nothing approved yet; not a tool
                continue
            owner = upstream_of(definition)
            if owner is not None and owner != upstream.name:
                continue
            listed = listed_of(definition)
            if upstream.served_name(listed.name, separator) == served:
                found.append(listed)
        return found

    def waiting_for(self, upstream: str) -> int:
        """How many of `upstream`'s tools, resources and prompts wait for an approval."""
        return sum(owner == upstream for owner in self._waiting.values())

    @property
    def holding(self) -> bool:
        """Whether some tool is held back, waiting for an approval."""
        return bool(self._waiting)

    def _note(self, line: str) -> None:
        self._errlog.write(f"{self._log_as}: {line}\n")
        self._errlog.flush()
