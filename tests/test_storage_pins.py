"""Tool pins (issue 28) on both stores: a first sight pins, a second sight of another
definition does not replace it, a change waits until approved, approval moves it in once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strictcall.storage import Store, open_store
from strictcall.storage.base import PinStore, ToolPin


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    db = str(tmp_path / "pins.sqlite3")
    if request.param == "postgres":
        db = request.getfixturevalue("pg_url")
    opened = open_store(db)
    yield opened
    opened.close()


def test_each_store_is_a_pin_store(store: Store) -> None:
    assert isinstance(store, PinStore)


def test_a_pin_is_kept_a_change_waits_and_approval_moves_it_in_once(store: Store) -> None:
    assert store.tool_pins() == []
    assert store.pin_tool("notes_add", "v1") is True
    assert store.pin_tool("notes_add", "v2") is False  # first sight only
    assert store.tool_pins() == [ToolPin("notes_add", "v1", None)]
    assert store.approve_tool("notes_add", "v2") is False  # nothing waits
    store.see_tool("notes_add", "v2")
    assert store.tool_pins() == [ToolPin("notes_add", "v1", "v2")]
    assert store.approve_tool("notes_add", "v3") is False  # not the one waiting
    assert store.approve_tool("notes_add", "v2") is True
    assert store.tool_pins() == [ToolPin("notes_add", "v2", None)]
    assert store.approve_tool("notes_add", "v2") is False
    store.see_tool("notes_add", "v3")
    store.see_tool("notes_add", None)  # the upstream went back: nothing waits
    assert store.tool_pins() == [ToolPin("notes_add", "v2", None)]
    assert store.approve_tool("no_such_tool", "v1") is False


def test_pins_are_listed_by_name(store: Store) -> None:
    for name in ("b_tool", "a_tool", "c_tool"):
        store.pin_tool(name, "{}")
    assert [pin.name for pin in store.tool_pins()] == ["a_tool", "b_tool", "c_tool"]
