"""Eight real MCP servers (tests/real_servers.py) called directly and through `strictcall
federate`, with the official TypeScript client (tests/ts/real_servers.mjs): every tool's
listing and the answers of two or three calls of each are what the same client hands back
called directly, but for the documented changes (`real_servers.through_listing`,
`through_result`), on a stdio downstream and on /mcp.

The TypeScript SDK knows no version past 2025-11-25, so that is what it negotiates on both
downstreams (pinned below). One node run makes every session in turn: each server directly,
then one federation per downstream serving all eight (each in its own place: the calls change
their upstreams' state); everything is gathered once per module. Without node and npm the
tests are skipped locally and fail in CI (CI=true).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import mcp_types as types
import pytest

from node_client import TS_DIR, node_with_packages
from real_servers import (
    DEADLINE_S,
    NAMES,
    PREFIXES,
    Place,
    calls,
    compared_answers,
    expected_listings,
    http_federation,
    make_place,
    notes_server,
    page_server,
    require_servers,
    served_names,
    stdio_federate_argv,
    stdio_upstreams,
    upstream_env,
)
from real_servers import TASKS_REQUIRED as TASKS

NEGOTIATED: Final = "2025-11-25"
"""The newest version the TypeScript SDK (tests/ts/package.json) knows, and so offers."""
RUN_DEADLINE_S: Final = 240.0
"""The whole node run: every session, each of its requests bounded by DEADLINE_S."""
WIRES: Final = ("stdio", "http")


@dataclass
class Run:
    """What the TypeScript client saw in one place: each tool's listing and each call's answer,
    by prefix, and what each session negotiated."""

    place: Place
    listings: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    versions: list[str | None] = field(default_factory=list)
    servers: list[str | None] = field(default_factory=list)
    cursors: list[str | None] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    refused_here: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    """What the client handed back, calling directly, for a call it refused to make itself
    (`TASKS_REQUIRED`); `answers` holds the upstream's own answer, sent past the client's checks."""


@dataclass(frozen=True)
class World:
    direct: Run
    stdio: Run
    http: Run


def direct_calls(prefix: str, place: Place, page: str) -> list[tuple[Any, ...]]:
    """A server's calls as the client makes them, then those it refuses to make itself
    (`TASKS_REQUIRED`) once more, sent as they are (the upstream's own answer)."""
    sequence = calls(place, page)[prefix]
    raw = [(name, arguments, True) for name, arguments in sequence if (prefix, name) in TASKS]
    return [*sequence, *raw]


def direct_sessions(place: Place, page: str, notes_url: str) -> list[dict[str, Any]]:
    """Each server on its own, with the environment the Python test gives it."""
    base_env = {"PATH": os.environ["PATH"], "HOME": str(place.base)}
    sessions: list[dict[str, Any]] = [
        {
            "name": prefix,
            "stdio": {
                "command": argv[0],
                "args": argv[1:],
                "env": {**base_env, **upstream_env(prefix, place)},
            },
            "calls": direct_calls(prefix, place, page),
        }
        for prefix, argv in stdio_upstreams(place).items()
    ]
    sessions.append(
        {"name": "notes", "url": notes_url, "calls": direct_calls("notes", place, page)}
    )
    return sessions


def through_calls(place: Place, page: str) -> list[tuple[str, dict[str, Any]]]:
    """Every server's calls, by their served names, in the order `calls` gives them."""
    return [
        (NAMES[prefix] + name, arguments)
        for prefix, sequence in calls(place, page).items()
        for name, arguments in sequence
    ]


def take_session(run: Run, report: dict[str, Any]) -> None:
    run.versions.append(report["version"])
    run.servers.append(report["server"])
    run.cursors.append(report["nextCursor"])


def take_direct(run: Run, prefix: str, report: dict[str, Any], page: str) -> None:
    take_session(run, report)
    run.listings[prefix] = {tool["name"]: tool for tool in report["tools"]}
    sequence = calls(run.place, page)[prefix]
    answers, raw = report["answers"][: len(sequence)], iter(report["answers"][len(sequence) :])
    for at, (name, _) in enumerate(sequence):
        if (prefix, name) in TASKS:
            run.refused_here.setdefault((prefix, name), []).append(answers[at])
            answers[at] = next(raw)
    assert next(raw, None) is None
    run.answers[prefix] = answers


def take_through(run: Run, report: dict[str, Any], page: str) -> None:
    take_session(run, report)
    listed: list[dict[str, Any]] = report["tools"]
    run.served = [tool["name"] for tool in listed]
    answers = iter(report["answers"])
    for prefix, sequence in calls(run.place, page).items():
        served = NAMES[prefix]
        run.listings[prefix] = {
            tool["name"][len(served) :]: tool for tool in listed if tool["name"].startswith(served)
        }
        run.answers[prefix] = [next(answers) for _ in sequence]
    assert next(answers, None) is None


def run_node(node: str, plan: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [node, str(TS_DIR / "real_servers.mjs")],
        cwd=TS_DIR,
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])["sessions"]
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_servers()
    node = node_with_packages()
    tmp = tmp_path_factory.mktemp("real-servers-ts")
    with notes_server() as notes_url, page_server() as page:
        direct = Run(make_place(tmp / "direct"))
        stdio = Run(make_place(tmp / "stdio"))
        http = Run(make_place(tmp / "http"))
        argv = stdio_federate_argv(stdio.place, notes_url)
        with http_federation(http.place, notes_url) as (url, token):
            through_stdio = {
                "name": "through stdio",
                "stdio": {"command": argv[0], "args": argv[1:], "env": dict(os.environ)},
                "calls": through_calls(stdio.place, page),
            }
            through_http = {
                "name": "through http",
                "url": url,
                "token": token,
                "calls": through_calls(http.place, page),
            }
            groups = [
                direct_sessions(direct.place, page, notes_url),
                [through_stdio],
                [through_http],
            ]
            reports = run_node(node, {"timeout_ms": DEADLINE_S * 1000, "groups": groups})
        for prefix in PREFIXES:
            take_direct(direct, prefix, reports[prefix], page)
        take_through(stdio, reports["through stdio"], page)
        take_through(http, reports["through http"], page)
        yield World(direct, stdio, http)


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("wire", WIRES)
def test_every_tool_is_listed_as_its_upstream_lists_it(
    world: World, prefix: str, wire: str
) -> None:
    through = getattr(world, wire).listings[prefix]
    # /mcp at 2025-11-25 never asks its caller anything (`real_servers.ASKING`)
    expected = expected_listings(prefix, world.direct.listings[prefix], wire != "http")
    assert sorted(through) == sorted(expected)
    for name in expected:
        assert through[name] == expected[name], name


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("wire", WIRES)
def test_every_call_answers_as_its_upstream_answers(world: World, prefix: str, wire: str) -> None:
    run: Run = getattr(world, wire)
    direct = (world.direct.place, world.direct.answers[prefix])
    for name, expected, got in compared_answers(
        prefix, direct, (run.place, run.answers[prefix]), NEGOTIATED
    ):
        assert got == expected, name


@pytest.mark.parametrize("wire", WIRES)
def test_the_typescript_client_negotiates_2025_11_25_and_gets_every_tool_in_one_page(
    world: World, wire: str
) -> None:
    run: Run = getattr(world, wire)
    assert run.versions == [NEGOTIATED]
    assert run.servers == ["strictcall"]
    assert run.cursors == [None]
    assert sorted(run.served) == served_names(world.direct.listings, wire != "http")


def test_the_upstreams_called_directly_answer_the_typescript_client_on_2025_11_25(
    world: World,
) -> None:
    assert world.direct.versions == [NEGOTIATED] * len(PREFIXES)
    assert world.direct.cursors == [None] * len(PREFIXES)


def test_a_tool_that_requires_tasks_is_refused_by_the_client_directly_and_answered_through(
    world: World,
) -> None:
    """Called directly, the client refuses the call itself (the tool's listing requires
    tasks); through the federation, which lists no `execution`, the upstream answers it (the
    answers compared above): its own refusal, an error result."""
    required = {
        (prefix, name)
        for prefix, tools in world.direct.listings.items()
        for name, tool in tools.items()
        if tool.get("execution", {}).get("taskSupport") == "required"
    }
    assert required == TASKS
    refused = {"client threw": types.INVALID_REQUEST}
    assert world.direct.refused_here == {task: [refused] for task in TASKS}
    for prefix, name in TASKS:
        sequence = calls(world.direct.place, "")[prefix]
        upstreams = [
            answer
            for (called, _), answer in zip(sequence, world.direct.answers[prefix], strict=True)
            if called == name
        ]
        assert upstreams
        assert all(answer["isError"] is True for answer in upstreams)
