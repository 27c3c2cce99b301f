"""A tool's display (title, annotations, icons, `_meta`): set on a library user's own tool and
checked there, neutralised when an upstream lists it, listed for MCP on both wire versions and
left out of the OpenAI and Anthropic listings, which have no member for any of it."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from strictcall import Annotations, Display, Gateway, Icon, Tool, tool
from strictcall.core.display import (
    MAX_ICON_DATA_CHARS,
    MAX_ICON_SIZES,
    MAX_ICON_URL_CHARS,
    MAX_ICONS,
    MAX_META_BYTES,
    MAX_TITLE_CHARS,
    display_from_listing,
    neutral_text,
)
from strictcall.errors import JSONValue
from strictcall.services.proxy.pins import definition_of, listed_of
from strictcall.services.proxy.tools import display_of
from strictcall.transports.mcp.adapter import describe_tools, listing_message

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
SHOWN = Display(
    title="Read a note",
    annotations=Annotations(title="Note reader", read_only_hint=True, open_world_hint=False),
    icons=(Icon(src="https://example.test/note.png", mime_type="image/png", sizes=("48x48",)),),
    meta={"com.example/owner": "docs"},
)
LISTED_DISPLAY = {
    "title": "Read a note",
    "annotations": {"title": "Note reader", "readOnlyHint": True, "openWorldHint": False},
    "icons": [
        {"src": "https://example.test/note.png", "mimeType": "image/png", "sizes": ["48x48"]}
    ],
    "_meta": {"com.example/owner": "docs"},
}


@tool(display=SHOWN)
def read_note(note_id: str) -> str:
    """Read one note."""
    return note_id


def plain(ctx: Any, args: dict[str, JSONValue]) -> JSONValue:
    return None


def test_a_users_tool_lists_its_display_for_mcp_and_nothing_more_elsewhere() -> None:
    gateway = Gateway([read_note])
    (listed,) = gateway.list_tools("mcp")
    assert {key: listed[key] for key in LISTED_DISPLAY} == LISTED_DISPLAY
    assert set(listed) == {"name", "description", "inputSchema", "outputSchema", *LISTED_DISPLAY}
    (chat,) = gateway.list_tools("openai")
    assert set(chat["function"]) == {"name", "description", "parameters", "strict"}
    (responses,) = gateway.list_tools("openai-responses")
    assert set(responses) == {"type", "name", "description", "parameters", "strict"}
    (anthropic,) = gateway.list_tools("anthropic")
    assert set(anthropic) == {"name", "description", "input_schema"}


def test_a_tool_without_a_display_lists_as_before() -> None:
    gateway = Gateway([Tool("t", "d", {"type": "object"}, True, plain)])
    (listed,) = gateway.list_tools("mcp")
    assert set(listed) == {"name", "description", "inputSchema", "outputSchema"}


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_the_display_is_written_on_both_wire_versions(version: str) -> None:
    gateway = Gateway([read_note])
    written = listing_message(1, gateway.listing(), version)["result"]
    assert isinstance(written, dict)
    (tool_written,) = written["tools"]
    assert {key: tool_written[key] for key in LISTED_DISPLAY} == LISTED_DISPLAY
    (model,) = describe_tools(gateway)  # the SDK's model, as its server writes it
    dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert dumped == tool_written


@pytest.mark.parametrize(
    "make",
    [
        lambda: Display(title="x" * (MAX_TITLE_CHARS + 1)),
        lambda: Display(title="evil\u202eelif"),
        lambda: Display(title="two\nlines"),
        lambda: Annotations(title="\x1b[2J"),
        lambda: Annotations(read_only_hint=1),  # type: ignore[arg-type]
        lambda: Icon(src="http://example.test/i.png"),
        lambda: Icon(src="javascript:alert(1)"),
        lambda: Icon(src="https://user:pw@example.test/i.png"),
        lambda: Icon(src="https://example.test/" + "a" * MAX_ICON_URL_CHARS),
        lambda: Icon(src="data:image/png;base64,not base64!"),
        lambda: Icon(src="data:text/html;base64,PGI+"),
        lambda: Icon(src=PNG, mime_type="text/html"),
        lambda: Icon(src=PNG, sizes=("48",)),
        lambda: Icon(src=PNG, sizes=("any",) * (MAX_ICON_SIZES + 1)),
        lambda: Icon(src=PNG, theme="blue"),  # type: ignore[arg-type]
        lambda: Display(icons=(Icon(src=PNG),) * (MAX_ICONS + 1)),
        lambda: Display(meta={"not a key": 1}),
        lambda: Display(meta={"k": "x" * MAX_META_BYTES}),
        lambda: Display(meta={"k": float("nan")}),
    ],
)
def test_a_users_display_out_of_bounds_is_refused_when_made(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


def test_every_display_bound_is_met_at_its_edge() -> None:
    Display(title="x" * MAX_TITLE_CHARS)
    Display(icons=(Icon(src=PNG),) * MAX_ICONS)
    Icon(src="https://example.test/" + "a" * (MAX_ICON_URL_CHARS - len("https://example.test/")))
    padded = "data:image/png;base64,"
    Icon(src=padded + "A" * ((MAX_ICON_DATA_CHARS - len(padded)) // 4 * 4))
    Icon(src=PNG, sizes=("16x16",) * MAX_ICON_SIZES, theme="dark")
    Display(meta={"k": "x" * (MAX_META_BYTES - len('{"k":""}'))})
    Display(title="family \U0001f468\u200d\U0001f469\u200d\U0001f467")  # ZWJ kept


def test_an_upstreams_display_is_neutralised_and_never_refused() -> None:
    hostile = {
        "title": "evil\u202eelif\x1b[2J" + "x" * 500,
        "annotations": {"title": "a\u2066b", "readOnlyHint": True, "destructiveHint": "no"},
        "icons": [
            {"src": "javascript:alert(1)"},
            {"src": "http://example.test/i.png"},
            {"src": "https://example.test/ok.png", "sizes": ["bad"]},
            *({"src": PNG} for _ in range(MAX_ICONS + 2)),
        ],
        "_meta": {"ok/key": 1, "bad key": 2},
    }
    shown = display_from_listing(hostile)
    assert shown.title is not None and len(shown.title) == MAX_TITLE_CHARS
    assert shown.title.startswith("evil\ufffdelif\ufffd[2J")
    assert shown.annotations == Annotations(title="a\ufffdb", read_only_hint=True)
    assert shown.icons == (Icon(src=PNG),) * MAX_ICONS
    assert shown.meta is None  # one bad key: the whole _meta goes


def test_neutral_text_leaves_printable_text_alone() -> None:
    assert neutral_text("Résumé — 読む") == "Résumé — 読む"
    assert neutral_text("a\u2028b\u200bc") == "a\ufffdb\ufffdc"


def sdk_tool(**members: Any) -> types.Tool:
    return types.Tool.model_validate({"name": "t", "inputSchema": {"type": "object"}, **members})


def test_a_proxied_tool_keeps_its_upstreams_display() -> None:
    assert display_of(sdk_tool(**LISTED_DISPLAY)).listed() == LISTED_DISPLAY
    assert display_of(sdk_tool()).listed() == {}


def test_the_display_is_pinned_and_a_changed_annotation_is_a_changed_definition() -> None:
    before = sdk_tool(**LISTED_DISPLAY)
    after = sdk_tool(**{**LISTED_DISPLAY, "annotations": {"readOnlyHint": False}})
    assert definition_of(before, "up") != definition_of(after, "up")
    assert listed_of(definition_of(before, "up")) == before  # served as pinned, display and all
    retitled = sdk_tool(**{**LISTED_DISPLAY, "title": "Delete everything"})
    assert definition_of(retitled, "up") != definition_of(before, "up")


def test_a_tool_without_a_display_pins_as_it_did_before_displays_were_pinned() -> None:
    bare = sdk_tool(description="d")
    assert json.loads(definition_of(bare, "up")) == {
        "upstream": "up",
        "name": "t",
        "description": "d",
        "inputSchema": {"type": "object"},
        "outputSchema": None,
    }


def test_the_docs_example_lists_its_display() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "LISTINGS.md").read_text("utf-8")
    (snippet,) = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(snippet, namespace)
    (listed,) = Gateway([namespace["read_note"]]).list_tools("mcp")
    assert listed["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert listed["title"] == "Read a note" and listed["_meta"] == {"com.example/team": "docs"}
