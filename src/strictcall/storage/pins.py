"""Tool pins, the same on both databases: the shared statements over one small method each
store provides for reads (`_select`) and one for writes (`_change`: the rows changed)."""

from __future__ import annotations

import time
from typing import Any

from strictcall.storage.base import ToolPin
from strictcall.storage.sql import Statements


class SharedPins:
    """`PinStore` (`strictcall.storage.base`) on the shared statements."""

    _sql: Statements

    def _select(self, sql: str, params: tuple[object, ...], *, many: bool = False) -> Any:
        raise NotImplementedError

    def _change(self, sql: str, params: tuple[object, ...]) -> int:
        """Run one write statement in a transaction of its own; the rows it changed.

        Raises:
            StoreUnavailable: the database cannot answer now.
        """
        raise NotImplementedError

    def tool_pins(self) -> list[ToolPin]:
        """Every pinned tool, by name."""
        return [ToolPin(*row) for row in self._select(self._sql.tool_pins, (), many=True)]

    def pin_tool(self, name: str, definition: str) -> bool:
        """Pin `definition` as the tool `name`'s, unless it is pinned already; whether it was
        pinned now (first sight)."""
        return self._change(self._sql.pin_tool, (name, definition, time.time())) > 0

    def see_tool(self, name: str, definition: str | None) -> None:
        """Keep `definition` as the tool's changed definition, waiting for approval (None: its
        upstream is back to the pinned one, nothing waits)."""
        self._change(self._sql.see_tool, (definition, name))

    def approve_tool(self, name: str, seen: str) -> bool:
        """Pin the tool's changed definition in place of the old, if `seen` is the one waiting
        (the one the operator reviewed); whether it was."""
        return self._change(self._sql.approve_tool, (time.time(), name, seen)) > 0
