"""Per-upstream budgets (`strictcall.services.proxy.budgets`): each at its edge (within: served;
one past: that upstream's listing refused whole, in one line), through a federation whose other
upstreams stay served, and `strictcall proxy` in front of an upstream whose tool names are
100,010 characters of ESC and newlines."""

from __future__ import annotations

import gc
import json
import shlex
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import mcp_types as types
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

import strictcall.services.proxy.stdio as stdio_module
from listing_federation import LISTING_UPSTREAM, ListingFederation
from mcp_peers import error_of, proxy_argv
from servers import create_token
from stdio_peer import DEADLINE_S, StdioPeer, until
from strictcall import Client
from strictcall.errors import UNKNOWN_TOOL
from strictcall.services.proxy.budgets import (
    NAMES,
    Budgets,
    NotificationRate,
    Refusal,
    content_refusal,
    name_refusal,
    tools_refusal,
)
from strictcall.services.proxy.config import ConfigError, federation_config
from strictcall.services.proxy.spawn import make_home
from strictcall.services.proxy.stdio import GC_PAUSED_BYTES, parse_line

OBJECT: dict[str, Any] = {"type": "object"}
SMALL = Budgets(
    max_tools=3,
    max_resources=3,
    max_templates=3,
    max_prompts=3,
    max_description_bytes=10,
    max_schema_bytes=40,
    max_uri_chars=20,
    notifications_per_second=5,
)


def tools(count: int, **extra: Any) -> list[types.Tool]:
    return [
        types.Tool(name=f"t{i}", input_schema=extra.get("schema", OBJECT), **extra.get("more", {}))
        for i in range(count)
    ]


# --- each budget at its edge ------------------------------------------------------------------


def test_tools_per_listing_at_the_edge() -> None:
    assert tools_refusal(tools(3), SMALL) is None
    refusal = tools_refusal(tools(4), SMALL)
    assert refusal is not None and refusal.budget == "max_tools"


@pytest.mark.parametrize(
    ("budget", "within", "past"),
    [
        ("max_resources", {"resources": 3}, {"resources": 4}),
        ("max_templates", {"templates": 3}, {"templates": 4}),
        ("max_prompts", {"prompts": 3}, {"prompts": 4}),
    ],
)
def test_resources_templates_and_prompts_per_listing_at_the_edge(
    budget: str, within: dict[str, int], past: dict[str, int]
) -> None:
    def listed(counts: dict[str, int]) -> Refusal | None:
        resources = [
            types.Resource(uri=f"m://{i}", name="r") for i in range(counts.get("resources", 0))
        ]
        templates = [
            types.ResourceTemplate(uri_template=f"m://{i}/{{x}}", name="t")
            for i in range(counts.get("templates", 0))
        ]
        prompts = [types.Prompt(name=f"p{i}") for i in range(counts.get("prompts", 0))]
        return content_refusal(resources, templates, prompts, SMALL)

    assert listed(within) is None
    refusal = listed(past)
    assert refusal is not None and refusal.budget == budget


def test_a_description_at_the_edge_in_utf8_bytes() -> None:
    assert tools_refusal(tools(1, more={"description": "é" * 5}), SMALL) is None  # 10 bytes
    refusal = tools_refusal(tools(1, more={"description": "é" * 5 + "x"}), SMALL)
    assert refusal is not None and refusal.budget == "max_description_bytes"
    prompt = types.Prompt(name="p", description="x" * 11)
    refused = content_refusal([], [], [prompt], SMALL)
    assert refused is not None and refused.budget == "max_description_bytes"


def test_a_schema_at_the_edge_in_compact_json_bytes() -> None:
    fits = {"type": "object", "title": "x" * 12}  # {"type":"object","title":"xx..."} = 40
    assert len(json.dumps(fits, separators=(",", ":"))) == 40
    assert tools_refusal(tools(1, schema=fits), SMALL) is None
    over = {"type": "object", "title": "x" * 13}
    refusal = tools_refusal(tools(1, schema=over), SMALL)
    assert refusal is not None and refusal.budget == "max_schema_bytes"
    out = types.Tool(name="o", input_schema=OBJECT, output_schema=over)
    refused = tools_refusal([out], SMALL)
    assert refused is not None and "output schema" in refused.why


def test_a_uri_at_the_edge() -> None:
    assert content_refusal([types.Resource(uri="m://" + "x" * 16, name="r")], [], [], SMALL) is None
    refusal = content_refusal([types.Resource(uri="m://" + "x" * 17, name="r")], [], [], SMALL)
    assert refusal is not None and refusal.budget == "max_uri_chars"


@pytest.mark.parametrize(
    ("name", "served"),
    [
        ("a" * 128, True),
        ("a" * 129, False),
        ("files.read-all_2", True),
        ("", False),
        ("has space", False),
        ("esc\x1b[2J", False),
        ("new\nline", False),
        ("cyrillic_\u0435", False),
        ("slash/name", False),
    ],
    ids=lambda value: repr(value)[:20],
)
def test_a_tool_name_keeps_the_specifications_rules(name: str, served: bool) -> None:
    refusal = name_refusal(name)
    assert (refusal is None) is served
    if refusal is not None:
        assert refusal.isprintable() and len(refusal) < 400  # escaped and cut


def test_notifications_past_the_rate_are_dropped_and_the_rate_refills() -> None:
    rate = NotificationRate(5, now=0.0)
    admitted = sum(rate.admit(0.0) for _ in range(20))
    assert admitted == 10  # a burst of as many again as a second's
    assert rate.dropped == 10
    assert rate.admit(0.1) is False  # half a notification refilled
    assert rate.admit(0.2) is True  # one more
    assert sum(rate.admit(10.0) for _ in range(20)) == 10  # refilled to the burst, no more


def test_budgets_are_read_from_the_config_with_defaults() -> None:
    config = federation_config(
        {
            "federation": {"budgets": {"max_tools": 50}},
            "upstreams": {
                "a": {"command": "a", "budgets": {"max_prompts": 7}},
                "b": {"command": "b"},
            },
        }
    )
    a, b = config.upstreams
    assert (a.budgets.max_tools, a.budgets.max_prompts) == (50, 7)
    assert (b.budgets.max_tools, b.budgets.max_prompts) == (50, Budgets().max_prompts)


@pytest.mark.parametrize(
    "budgets", [{"max_tool": 5}, {"max_tools": 0}, {"max_tools": True}, {"max_tools": 2.5}]
)
def test_a_budget_not_shaped_as_documented_is_refused(budgets: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        federation_config({"upstreams": {"a": {"command": "a", "budgets": budgets}}})


# --- through a federation: that upstream's listing refused, the rest served -------------------


def test_a_relisting_past_max_tools_is_refused_in_one_line_and_the_others_served(
    tmp_path: Path,
) -> None:
    federation = ListingFederation(
        tmp_path,
        {"big": {"tools": ["one"]}, "calm": {"tools": ["quiet"]}},
        prefixes={"big": "big", "calm": "calm"},
        extra="budgets = { max_tools = 3 }\n",
        pinning=False,
    )
    try:
        federation.peer.initialize()
        assert set(federation.tools()) == {"big_one", "calm_quiet"}
        federation.relist("big", {"tools": ["one", "two", "three"]})  # at the edge: served
        until(lambda: "big_three" in federation.tools(), "the edge is served")
        federation.relist("big", {"tools": ["one"], "many": 60_000})
        until(lambda: "max_tools" in federation.stderr(), "the refusal is said")
        assert set(federation.tools()) == {"calm_quiet"}
        assert federation.peer.call("calm_quiet", {})["isError"] is False
        lines = [x for x in federation.stderr().splitlines() if "max_tools" in x]
        assert len(lines) == 1 and "big" in lines[0] and len(lines[0]) < 300
    finally:
        assert federation.close() == 0


def budget_refusals(base_url: str) -> dict[tuple[str, str], float]:
    """strictcall_upstream_budget_refusals_total's samples on `base_url`'s /metrics, by
    (upstream, budget)."""
    answer = httpx.get(base_url + "/metrics", timeout=DEADLINE_S)
    assert answer.status_code == 200
    counted = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            if sample.name == "strictcall_upstream_budget_refusals_total":
                counted[(sample.labels["upstream"], sample.labels["budget"])] = sample.value
    return counted


@pytest.mark.parametrize("multiprocess", [False, True], ids=["", "multiprocess-directory-set"])
def test_a_listing_refused_past_a_budget_is_counted_in_metrics_by_upstream_and_budget(
    multiprocess: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if multiprocess:  # set in the operator's environment: a one-process server's families stay
        (tmp_path / "metrics").mkdir()
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    federation = ListingFederation(
        tmp_path,
        {"big": {"tools": ["one"]}, "calm": {"tools": ["quiet"]}},
        prefixes={"big": "big", "calm": "calm"},
        extra="budgets = { max_tools = 3 }\n",
        pinning=False,
        http=True,
    )
    try:
        assert budget_refusals(federation.base_url) == {}
        federation.relist("big", {"tools": ["one"], "many": 3})  # one past max_tools
        until(lambda: "max_tools" in federation.stderr(), "the refusal is said")
        until(lambda: budget_refusals(federation.base_url), "the refusal is counted")
        counted = budget_refusals(federation.base_url)  # each relisting refused counts (one or two)
        assert set(counted) == {("big", "max_tools")} and counted["big", "max_tools"] >= 1
        federation.relist("big", {"tools": ["one", "a b"]})  # within, one name left out
        until(lambda: ("big", NAMES) in budget_refusals(federation.base_url), "the name is counted")
        assert set(budget_refusals(federation.base_url)) == {("big", "max_tools"), ("big", NAMES)}
    finally:
        assert federation.close() == 0


def test_a_flood_of_notifications_is_dropped_past_the_rate_and_said_once_a_second(
    tmp_path: Path,
) -> None:
    federation = ListingFederation(
        tmp_path,
        {"loud": {"tools": ["one"]}, "calm": {"tools": ["quiet"]}},
        prefixes={"loud": "loud", "calm": "calm"},
        extra="budgets = { notifications_per_second = 50 }\n",
        pinning=False,
    )
    try:
        federation.peer.initialize()
        started = time.monotonic()
        federation.relist("loud", {"tools": ["one", "two"], "flood": 20_000, "wave": 1})
        until(lambda: "notifications_per_second" in federation.stderr(), "the drop is said")
        assert federation.peer.call("calm_quiet", {})["isError"] is False
        # the list_changed sent with the flood is not lost: the new tool is served
        until(lambda: "loud_two" in federation.tools(), "the relisting is read")
        said = [x for x in federation.stderr().splitlines() if "notifications_per_second" in x]
        # once a second at most, not once a notification (20,000 of them)
        assert 1 <= len(said) <= time.monotonic() - started + 2
    finally:
        assert federation.close() == 0


# --- strictcall proxy: names a host must never see ----------------------------------------------


def test_the_proxy_serves_no_tool_whose_name_breaks_the_specifications_rules(
    tmp_path: Path,
) -> None:
    hostile = "x" * 100_000 + "\x1b[2J\nforged"  # 100,010 characters with ESC and a newline
    listing = tmp_path / "listing.json"
    listing.write_text(json.dumps({"tools": ["fine", hostile, "a" * 129]}), encoding="utf-8")
    upstream = shlex.join([sys.executable, str(LISTING_UPSTREAM), "up", str(listing)])
    stderr_path = tmp_path / "proxy.stderr"
    with stderr_path.open("wb") as stderr:
        peer = StdioPeer(proxy_argv(upstream, tmp_path / "db.sqlite3"), stderr)
        try:
            peer.initialize()
            assert peer.tool_names() == {"fine"}
            started = time.monotonic()
            answer = peer.request("tools/call", {"name": hostile, "arguments": {}})
            error = error_of(answer["result"])
            assert (error["code"], error["stage"]) == (UNKNOWN_TOOL.code, UNKNOWN_TOOL.stage.value)
            assert len(json.dumps(answer)) < 2_000  # the name is never echoed
            assert time.monotonic() - started >= 0  # (printed below; no time asserted)
        finally:
            assert peer.close() == 0
    text = stderr_path.read_text(encoding="utf-8", errors="replace")
    assert "\x1b" not in text and "forged" not in text.replace("\\nforged", "")
    assert max(len(line) for line in text.splitlines()) < 1_000


# --- a long listing line: parsed with the garbage collector paused ------------------------------


def line_of(size: int) -> bytes:
    """A JSON line of exactly `size` bytes holding many small objects (each a collection's
    worth of allocations)."""
    head, tail = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[', b"{}]}}"
    count = (size - len(head) - len(tail)) // 3
    line = head + b"{}," * count + tail
    return line[:-2] + b" " * (size - len(line)) + line[-2:]


@pytest.mark.parametrize(
    ("size", "paused"), [(GC_PAUSED_BYTES - 1, False), (GC_PAUSED_BYTES, True)]
)
def test_a_line_from_the_limit_on_is_parsed_with_the_collector_paused(
    size: int, paused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = line_of(size)
    assert len(line) == size
    collector_on: list[bool] = []  # at the parse itself, not the moments around it

    def loads(data: bytes) -> Any:
        collector_on.append(gc.isenabled())
        return orjson.loads(data)

    # the collector is watched where the parse runs: a collection just after it (the collector
    # given back, its count run up by the parse) is the right one, not one the parse had
    monkeypatch.setattr(stdio_module, "orjson", SimpleNamespace(loads=loads))
    parsed = parse_line(line)
    assert parsed["id"] == 1 and len(parsed["result"]["tools"]) > 300_000
    assert collector_on == [not paused]
    assert gc.isenabled()  # given back


def test_a_listing_of_an_identitys_own_instance_refused_past_a_budget_is_counted_as_its_upstreams(
    tmp_path: Path,
) -> None:
    # each process of "big" lists what its own home's listing.json holds: the shared one's is
    # within max_tools, u1's own instance's one past it
    homes = tmp_path / "homes"
    shared = Path(make_home(str(homes), "big", None), "listing.json")
    shared.write_text(json.dumps({"tools": ["one"]}), encoding="utf-8")
    own = Path(make_home(str(homes), "big", "u1"), "listing.json")
    own.write_text(json.dumps({"tools": ["one"], "many": 3}), encoding="utf-8")
    script = 'exec "$0" "$1" big "$LISTING"'
    command = shlex.join(["/bin/sh", "-c", script, sys.executable, str(LISTING_UPSTREAM)])
    config = tmp_path / "federate.toml"
    config.write_text(
        f"[federation]\npinning = false\nhomes = {json.dumps(str(homes))}\n"
        f"budgets = {{ max_tools = 3 }}\n[upstreams.big]\ncommand = {json.dumps(command)}\n"
        'prefix = "big"\ninstances = "per-identity"\n'
        "credentials.env = { LISTING = '~/listing.json' }\n",
        encoding="utf-8",
    )
    db = tmp_path / "federation.sqlite3"
    token = create_token(db, "u1")
    argv = [sys.executable, "-m", "strictcall", "federate", "--config", str(config)]
    with (tmp_path / "federate.stderr").open("wb") as stderr:
        peer = StdioPeer([*argv, "--db", str(db), "--port", "0"], stderr)
    try:
        line = peer.line()  # the one line, once it listens (None: it died)
        assert line is not None and b"listening on " in line, line
        base_url = line.decode().split("listening on ", 1)[1].split()[0]
        assert budget_refusals(base_url) == {}  # the shared one's is within
        with Client(base_url, token) as client:
            client.call("big_one")  # u1's instance starts, and lists past max_tools
        until(lambda: budget_refusals(base_url), "the refusal is counted")
        counted = budget_refusals(base_url)
        assert set(counted) == {("big", "max_tools")} and counted["big", "max_tools"] >= 1
    finally:
        peer.process.terminate()
        assert peer.close() == 0
