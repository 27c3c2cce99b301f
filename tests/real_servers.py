"""Eight MCP servers nobody here wrote, called directly and through `strictcall federate`, and
the one list of what strictcall changes on the way (`through_listing`, `through_result`).

The servers: from npm server-everything, -filesystem, -memory and -sequential-thinking
(tests/upstreams/package.json); from PyPI mcp-server-fetch, -time and -git (a venv of their own,
tests/servers_setup.py); and the FastMCP notes server over HTTP. Each stateful one
works in a folder of its own per run (`Place`): a run directly and each run through a
federation start from the same files, so the same calls in the same order give the same answers.

The documented changes, and nothing else, are what may differ:

- a tool is served as `prefix_name`;
- its inputSchema and outputSchema are read as JSON Schema 2020-12 (`$schema` dropped); the
  inputSchema, its root declared `type: "object"`, is listed as strictcall enforces it, made
  strict (`strictcall.core.schema.strict`: objects closed to unknown members, an integer
  written as one); the outputSchema is listed and enforced as the upstream declares it (its
  own clients read its results by it); a tool without an outputSchema is listed without one;
- `execution` (tasks) is not listed: the federation runs no tasks, so a host calls a tool
  that requires them and gets the upstream's refusal (`TASKS_REQUIRED`);
- a tool whose schema does not compile is not served (`NOT_SERVED`), and an answer that breaks
  the tool's own outputSchema is refused (`BROKEN_OUTPUT`: `invalid_tool_result`);
- a tool the server lists only to a client offering sampling, elicitation or roots (`ASKING`)
  is not listed to a caller on /mcp at 2025-11-25, which is never asked anything;
- on 2026-07-28 a result's `_meta` names its server, strictcall (the wire's envelope);
- a result always says `isError`: `false` where the upstream left it out (MCP reads the two
  the same);
- a tool reporting its own process' environment reports the federation's (`OWN_ENVIRONMENT`);
- what the upstream answers is its own but for values that change from one run to the next by
  themselves (the folder a run works in, clocks, commit hashes: `steady`).
"""

from __future__ import annotations

import base64
import copy
import http.server
import json
import os
import queue
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

import pytest
from mcp_types import SERVER_INFO_META_KEY

from mcp_peers import fastmcp_command
from servers import create_token, lines_of
from servers_setup import ensure_servers
from strictcall.core.listing import object_rooted
from strictcall.core.schema.strict import EXACT_INTEGER, make_strict
from strictcall.errors import INVALID_TOOL_RESULT

UPSTREAMS_DIR: Final = Path(__file__).resolve().parent / "upstreams"
NODE: Final = UPSTREAMS_DIR / "node_modules" / "@modelcontextprotocol"
SERVERS_BIN: Final = UPSTREAMS_DIR / ".venv-servers" / "bin"
SEPARATOR: Final = "_"
DEADLINE_S: Final = 60.0
"""How long any one wait of these tests may take (a start, a listing, a call)."""
PREFIXES: Final = (
    "everything",
    "filesystem",
    "memory",
    "thinking",
    "fetch",
    "time",
    "git",
    "notes",
)
NAMES: Final = {prefix: f"{prefix}{SEPARATOR}" for prefix in PREFIXES}
"""What each server's tools are served as through the federation: `prefix_name`."""
LISTENING: Final = re.compile(r"listening on (http://[0-9.]+:\d+)")
PAGE: Final = (
    b"<html><head><title>Refunds</title></head>"
    b"<body><h1>Refunds</h1><p>The refund window is 7 days.</p></body></html>"
)

NOT_SERVED: Final = {"notes": frozenset({"bad_schema"})}
"""Tools an upstream lists that the federation does not serve: their schema does not compile."""

BROKEN_OUTPUT: Final = frozenset({("notes", "broken_count")})
"""Tools whose answers break their own outputSchema: refused at stage output
(`invalid_tool_result`); the official client, called directly, raises instead."""

OWN_ENVIRONMENT: Final = frozenset({("everything", "get-env")})
"""Tools that answer with their own process' environment, which is the federation's when
it starts them, not the test's: compared by the kinds of their blocks only."""

MODERN: Final = "2026-07-28"
SERVER_INFO: Final = {"name": "strictcall", "version": version("strictcall")}
"""What a 2026-07-28 result's `_meta` names as its server (the wire's own: strictcall's)."""

NOT_LISTED: Final = frozenset({"execution"})
"""Members of an upstream's tool the federation does not list."""

TASKS_REQUIRED: Final = frozenset({("everything", "simulate-research-query")})
"""Tools listed as requiring tasks (`execution.taskSupport: "required"`): a client that reads
that (the TypeScript one) refuses to call them directly; through the federation, which lists no
`execution`, the call reaches the upstream, and its answer (a refusal) is the upstream's own."""


@dataclass(frozen=True)
class Place:
    """The folder one run of the stateful servers works in: files, a git repository, a memory."""

    base: Path

    @property
    def files(self) -> Path:
        return self.base / "files"

    @property
    def repo(self) -> Path:
        return self.base / "repo"

    @property
    def memory(self) -> Path:
        return self.base / "memory.jsonl"


def make_place(base: Path) -> Place:
    """A place with the same files and the same repository (same commit hash) as every other."""
    place = Place(base)
    place.files.mkdir(parents=True)
    (place.files / "notes.txt").write_text("line one\nline two\nline three\n", encoding="utf-8")
    (place.files / "dot.png").write_bytes(_TINY_PNG)
    (place.files / "sub").mkdir()
    (place.files / "sub" / "deep.md").write_text("# deep\n", encoding="utf-8")
    place.repo.mkdir()
    fixed = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.test",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.test",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        "PATH": "/usr/bin:/bin",
        "HOME": str(base),
    }
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.name", "t"],
        ["git", "config", "user.email", "t@example.test"],
    ):
        subprocess.run(argv, cwd=place.repo, env=fixed, check=True, timeout=30)
    (place.repo / "readme.txt").write_text("first\n", encoding="utf-8")
    subprocess.run(["git", "add", "readme.txt"], cwd=place.repo, env=fixed, check=True, timeout=30)
    subprocess.run(
        ["git", "commit", "-q", "-m", "first"], cwd=place.repo, env=fixed, check=True, timeout=30
    )
    (place.repo / "readme.txt").write_text("first\nsecond\n", encoding="utf-8")
    return place


_TINY_PNG: Final = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def stdio_upstreams(place: Place) -> dict[str, list[str]]:
    """The seven stdio servers' command lines, working in `place`, by prefix."""
    return {
        "everything": ["node", str(NODE / "server-everything" / "dist" / "index.js")],
        "filesystem": [
            "node",
            str(NODE / "server-filesystem" / "dist" / "index.js"),
            str(place.files),
        ],
        "memory": ["node", str(NODE / "server-memory" / "dist" / "index.js")],
        "thinking": ["node", str(NODE / "server-sequential-thinking" / "dist" / "index.js")],
        "fetch": [
            str(SERVERS_BIN / "mcp-server-fetch"),
            "--allow-private-ips",
            "--ignore-robots-txt",
        ],
        "time": [str(SERVERS_BIN / "mcp-server-time"), "--local-timezone", "UTC"],
        "git": [str(SERVERS_BIN / "mcp-server-git"), "--repository", str(place.repo)],
    }


def upstream_env(prefix: str, place: Place) -> dict[str, str]:
    """The environment one server needs beyond PATH (server-memory's file)."""
    if prefix == "memory":
        return {"MEMORY_FILE_PATH": str(place.memory)}
    if prefix == "thinking":
        return {"DISABLE_THOUGHT_LOGGING": "true"}
    return {}


@contextmanager
def page_server() -> Iterator[str]:
    """A web page on 127.0.0.1 for mcp-server-fetch (it never fetches anything else)."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/refunds.html"
    finally:
        server.shutdown()
        server.server_close()


def require_servers() -> None:
    """Install the real servers when missing; skip without them locally, fail in CI."""
    why = ensure_servers()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the real MCP servers are needed on CI: {why}")
    pytest.skip(f"the real MCP servers are not installed: {why}")


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert time.monotonic() < deadline, "the server did not listen"
        time.sleep(0.05)


@contextmanager
def notes_server() -> Iterator[str]:
    """The FastMCP notes server over HTTP on 127.0.0.1: its /mcp URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    notes = subprocess.Popen(
        [*shlex.split(fastmcp_command()), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        notes.terminate()
        notes.wait(timeout=DEADLINE_S)


def federation_config(place: Place, notes_url: str) -> Path:
    """A federation of the eight, working in `place`."""
    lines = []
    for prefix, argv in stdio_upstreams(place).items():
        lines.append(f"[upstreams.{prefix}]")
        lines.append(f"command = {json.dumps(shlex.join(argv))}")
        env = upstream_env(prefix, place)
        if env:
            pairs = ", ".join(f"{key} = {json.dumps(value)}" for key, value in env.items())
            lines.append(f"credentials.env = {{ {pairs} }}")
    lines += ["[upstreams.notes]", f"url = {json.dumps(notes_url)}"]
    config = place.base / "federation.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def federate_argv(place: Place, notes_url: str) -> list[str]:
    """`strictcall federate` of the eight, its store in `place`; add a downstream."""
    config = federation_config(place, notes_url)
    db = place.base / "federation.sqlite3"
    return [
        sys.executable,
        "-m",
        "strictcall",
        "federate",
        "--config",
        str(config),
        "--db",
        str(db),
    ]


def stdio_federate_argv(place: Place, notes_url: str) -> list[str]:
    """The federation of the eight with a stdio downstream, as identity u1."""
    return [*federate_argv(place, notes_url), "--stdio", "--identity", "u1"]


@contextmanager
def http_federation(place: Place, notes_url: str) -> Iterator[tuple[str, str]]:
    """The federation of the eight serving /mcp on 127.0.0.1: its URL and a token of u1's."""
    token = create_token(place.base / "federation.sqlite3", "u1")
    process = subprocess.Popen(
        [*federate_argv(place, notes_url), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        try:
            first = lines_of(process.stdout).get(timeout=DEADLINE_S)
        except queue.Empty:
            first = None
        match = LISTENING.search(first or "")
        assert match is not None, first
        yield match.group(1) + "/mcp", token
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_S)


def calls(place: Place, page: str) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Two or three calls of every tool of each server, by prefix, in the order they are made
    (the stateful ones' later calls read what the earlier ones wrote)."""
    files, repo = str(place.files), str(place.repo)
    entity = {"name": "Ada", "entityType": "person", "observations": ["writes programs"]}
    return {
        "everything": [
            ("echo", {"message": "hi"}),
            ("echo", {"message": "line\nbreak"}),
            ("get-annotated-message", {"messageType": "success"}),
            ("get-annotated-message", {"messageType": "error", "includeImage": True}),
            ("get-env", {}),
            ("get-resource-links", {"count": 2}),
            ("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
            ("get-resource-reference", {"resourceType": "Blob", "resourceId": 3}),
            ("get-structured-content", {"location": "Chicago"}),
            ("get-structured-content", {"location": "New York"}),
            ("get-sum", {"a": 2, "b": 3}),
            ("get-sum", {"a": -1.5, "b": 1}),
            ("get-tiny-image", {}),
            ("gzip-file-as-resource", {"name": "n.gz", "data": "data:text/plain;base64,aGk="}),
            (
                "gzip-file-as-resource",
                {"data": "data:text/plain;base64,aGk=", "outputType": "resource"},
            ),
            ("toggle-simulated-logging", {}),
            ("toggle-simulated-logging", {}),
            ("toggle-subscriber-updates", {}),
            ("toggle-subscriber-updates", {}),
            ("trigger-long-running-operation", {"duration": 0.1, "steps": 1}),
            ("simulate-research-query", {"topic": "refunds"}),
        ],
        "filesystem": [
            ("list_allowed_directories", {}),
            ("read_text_file", {"path": f"{files}/notes.txt"}),
            ("read_text_file", {"path": f"{files}/notes.txt", "head": 1}),
            ("read_file", {"path": f"{files}/notes.txt", "tail": 1}),
            ("read_media_file", {"path": f"{files}/dot.png"}),
            ("read_multiple_files", {"paths": [f"{files}/notes.txt", f"{files}/sub/deep.md"]}),
            ("write_file", {"path": f"{files}/new.txt", "content": "written\n"}),
            (
                "edit_file",
                {
                    "path": f"{files}/new.txt",
                    "edits": [{"oldText": "written", "newText": "edited"}],
                    "dryRun": True,
                },
            ),
            (
                "edit_file",
                {
                    "path": f"{files}/new.txt",
                    "edits": [{"oldText": "written", "newText": "edited"}],
                },
            ),
            ("create_directory", {"path": f"{files}/made"}),
            ("list_directory", {"path": files}),
            ("list_directory_with_sizes", {"path": files, "sortBy": "size"}),
            ("directory_tree", {"path": files}),
            ("move_file", {"source": f"{files}/new.txt", "destination": f"{files}/made/new.txt"}),
            ("search_files", {"path": files, "pattern": "*.md"}),
            ("get_file_info", {"path": f"{files}/sub/deep.md"}),
            ("read_text_file", {"path": "/etc/hostname"}),  # outside: the server's own error
        ],
        "memory": [
            (
                "create_entities",
                {"entities": [entity, {"name": "Bob", "entityType": "person", "observations": []}]},
            ),
            (
                "create_relations",
                {"relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}]},
            ),
            ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["reads"]}]}),
            ("read_graph", {}),
            ("search_nodes", {"query": "reads"}),
            ("open_nodes", {"names": ["Ada"]}),
            (
                "delete_observations",
                {"deletions": [{"entityName": "Bob", "observations": ["reads"]}]},
            ),
            (
                "delete_relations",
                {"relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}]},
            ),
            ("delete_entities", {"entityNames": ["Bob"]}),
            ("read_graph", {}),
        ],
        "thinking": [
            (
                "sequentialthinking",
                {
                    "thought": "first",
                    "nextThoughtNeeded": True,
                    "thoughtNumber": 1,
                    "totalThoughts": 2,
                },
            ),
            (
                "sequentialthinking",
                {
                    "thought": "second",
                    "nextThoughtNeeded": False,
                    "thoughtNumber": 2,
                    "totalThoughts": 2,
                },
            ),
        ],
        "fetch": [
            ("fetch", {"url": page}),
            ("fetch", {"url": page, "raw": True, "max_length": 40}),
            ("fetch", {"url": page, "start_index": 10, "max_length": 20}),
        ],
        "time": [
            (
                "convert_time",
                {"source_timezone": "UTC", "time": "12:30", "target_timezone": "Asia/Tokyo"},
            ),
            (
                "convert_time",
                {
                    "source_timezone": "Europe/Paris",
                    "time": "09:00",
                    "target_timezone": "America/New_York",
                },
            ),
            ("get_current_time", {"timezone": "Europe/London"}),
            ("get_current_time", {"timezone": "Not/AZone"}),
        ],
        "git": [
            ("git_status", {"repo_path": repo}),
            ("git_diff_unstaged", {"repo_path": repo}),
            ("git_add", {"repo_path": repo, "files": ["readme.txt"]}),
            ("git_diff_staged", {"repo_path": repo, "context_lines": 1}),
            ("git_reset", {"repo_path": repo}),
            ("git_add", {"repo_path": repo, "files": ["readme.txt"]}),
            ("git_commit", {"repo_path": repo, "message": "second"}),
            ("git_log", {"repo_path": repo, "max_count": 1}),
            ("git_diff", {"repo_path": repo, "target": "HEAD~1"}),
            ("git_show", {"repo_path": repo, "revision": "HEAD~1"}),
            ("git_create_branch", {"repo_path": repo, "branch_name": "side"}),
            ("git_checkout", {"repo_path": repo, "branch_name": "side"}),
            ("git_branch", {"repo_path": repo, "branch_type": "local"}),
            ("git_checkout", {"repo_path": repo, "branch_name": "main"}),
        ],
        "notes": [
            ("read_note", {"note_id": "n1"}),
            ("read_note", {"note_id": "missing"}),
            ("add", {"a": 2, "b": 3}),
            ("add", {"a": -4, "b": 4}),
            ("broken_count", {}),
            ("slow", {"seconds": 0}),
        ],
    }


# --- the documented changes --------------------------------------------------------------------


def _ours(schema: Any) -> Any:
    """A schema as strictcall reads every schema: `$schema` dropped at its root."""
    if not isinstance(schema, dict):
        return schema
    return {key: value for key, value in schema.items() if key != "$schema"}


def _listed_strict(schema: Any) -> Any:
    """A schema as strictcall lists it: made strict, without its exact-integer marker."""
    return _without_marker(make_strict(schema))


def _without_marker(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_marker(item) for item in schema]
    if isinstance(schema, dict):
        return {k: _without_marker(v) for k, v in schema.items() if k != EXACT_INTEGER}
    return schema


def through_listing(prefix: str, direct: dict[str, Any]) -> dict[str, Any] | None:
    """What the federation lists for a tool an upstream lists as `direct` (MCP's JSON): the same
    but for the documented changes (the module's docstring); None for a tool not served."""
    if direct["name"] in NOT_SERVED.get(prefix, ()):
        return None
    expected = {key: copy.deepcopy(value) for key, value in direct.items() if key not in NOT_LISTED}
    expected["name"] = f"{prefix}{SEPARATOR}{direct['name']}"
    expected.setdefault("description", "")
    expected["inputSchema"] = _listed_strict(object_rooted(_ours(direct["inputSchema"])))
    if "outputSchema" in direct:
        expected["outputSchema"] = _ours(direct["outputSchema"])
    return expected


def through_result(prefix: str, name: str, direct: dict[str, Any], version: str) -> dict[str, Any]:
    """What the federation answers for a call the upstream answered `direct` (a tools/call
    result as JSON, read on 2025-11-25) to a host on wire `version`: the upstream's own answer,
    but for the documented changes (the module's docstring), as written on the wire."""
    if (prefix, name) in BROKEN_OUTPUT:
        text = json.dumps(INVALID_TOOL_RESULT.as_error(), separators=(",", ":"))
        expected: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    else:
        expected = copy.deepcopy(direct)
        if "content" in expected:  # a result, not what a client raised reading one
            expected.setdefault("isError", False)
    if version == MODERN:
        expected["_meta"] = {**expected.get("_meta", {}), SERVER_INFO_META_KEY: SERVER_INFO}
    return expected


ASKING: Final = {
    "everything": frozenset(
        {
            "get-roots-list",
            "trigger-elicitation-request",
            "trigger-sampling-request",
            "trigger-url-elicitation",
        }
    )
}
"""The tools a server lists only to a client offering sampling, elicitation or roots (the
direct client offers all three): strictcall lists them to a caller it can ask them of, so not
on /mcp at 2025-11-25, where the caller is never asked."""


def expected_listings(
    prefix: str, direct: dict[str, dict[str, Any]], asked: bool = True
) -> dict[str, Any]:
    """What the federation lists of a server that lists `direct` (by name): each served tool
    as `through_listing` says, by its name on the upstream; to a caller that is never `asked`,
    none of the server's `ASKING` tools."""
    hidden = frozenset() if asked else ASKING.get(prefix, frozenset())
    return {
        name: listed
        for name, tool in direct.items()
        if name not in hidden and (listed := through_listing(prefix, tool)) is not None
    }


def served_names(direct: dict[str, dict[str, dict[str, Any]]], asked: bool = True) -> list[str]:
    """Every name the federation serves of servers that list `direct` (by prefix, by name), to
    a caller that is `asked` or not (`expected_listings`)."""
    return sorted(
        f"{NAMES[prefix]}{name}"
        for prefix, tools in direct.items()
        for name in expected_listings(prefix, tools, asked)
    )


def compared_answers(
    prefix: str,
    direct: tuple[Place, list[dict[str, Any]]],
    through: tuple[Place, list[dict[str, Any]]],
    version: str,
    client_defaults: Mapping[str, Any] | None = None,
) -> Iterator[tuple[str, Any, Any]]:
    """(tool, expected, got) for each call of `prefix` (`calls`), answered directly and through
    the federation in their places, to a host on wire `version`: as compared (`steady`,
    `comparable`), the direct answer changed only as `through_result` says, then read as the
    client reads a result, filling in `client_defaults` where the wire has no such member."""
    (direct_place, direct_answers), (through_place, through_answers) = direct, through
    sequence = calls(direct_place, "")[prefix]
    assert len(through_answers) == len(direct_answers) == len(sequence)
    for (name, _), answer, got in zip(sequence, direct_answers, through_answers, strict=True):
        expected = through_result(prefix, name, answer, version)
        if "content" in expected:
            expected = {**(client_defaults or {}), **expected}
        expected = comparable(prefix, name, steady(expected, direct_place.base))
        yield name, expected, comparable(prefix, name, steady(got, through_place.base))


def comparable(prefix: str, name: str, answer: dict[str, Any]) -> dict[str, Any]:
    """An answer as compared: a tool that reports its own process' environment
    (`OWN_ENVIRONMENT`) only by the kinds of its blocks."""
    if (prefix, name) not in OWN_ENVIRONMENT:
        return answer
    return {**answer, "content": [block["type"] for block in answer.get("content", [])]}


_VARIES: Final = [
    (re.compile(r"\b[0-9a-f]{40}\b"), "<commit>"),
    (re.compile(r"\b[0-9a-f]{7,12}\b(?=[ \]:])"), "<short>"),
    (re.compile(r"\b\d\d?:\d\d:\d\d\s?(?:AM|PM)"), "<when>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<when>"),
    (
        re.compile(
            r"(?m)^(Date|Modified|Created|Accessed|\s*\"?(created|modified|accessed)\"?): .*$"
        ),
        r"\1: <when>",
    ),
    (
        re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d? \w{3} \d{4} [\d:]+ [+-]\d{4}"),
        "<when>",
    ),
]


def steady(value: Any, base: Path) -> Any:
    """`value` with what changes from run to run by itself written as a placeholder: the run's
    folder, commit hashes, timestamps (inside text blobs too)."""
    if isinstance(value, str):
        text = value.replace(str(base), "<place>")
        for pattern, placeholder in _VARIES:
            text = pattern.sub(placeholder, text)
        return text
    if isinstance(value, list):
        return [steady(item, base) for item in value]
    if isinstance(value, dict):
        return {
            key: _steady_blob(item, base) if key == "blob" else steady(item, base)
            for key, item in value.items()
        }
    return value


def _steady_blob(blob: Any, base: Path) -> Any:
    """A resource's base64 blob compared by its steady text where it is UTF-8 text (the
    server-everything blobs hold a clock time), else as it is."""
    try:
        text = base64.b64decode(blob, validate=True).decode("utf-8")
    except (ValueError, TypeError):
        return blob
    return "base64 of " + steady(text, base)


def remove_place(place: Place) -> None:
    shutil.rmtree(place.base, ignore_errors=True)
