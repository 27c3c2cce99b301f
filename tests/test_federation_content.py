"""A federation's resources and prompts (`strictcall.services.proxy.content`): listed from the
MCP SDK, FastMCP and npm servers, merged in order and prefixed as tools are (a resource keeps its
URI, routed by the registry built from the listings), read through under the tools' policy, with
the official Python client on both wire versions and the TypeScript client; and the hostile
upstream's tricks (a colliding URI, an oversized resource, a prompt name with control
characters, a URI with a newline, a read of a URI no upstream listed)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from mcp_peers import UPSTREAMS, everything_command, fastmcp_command, proxy_argv
from stdio_peer import DEADLINE_S
from strictcall.core.tools import ToolFailure
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    RESULT_TOO_LARGE,
    UPSTREAM_UNAVAILABLE,
    ErrorKind,
)
from strictcall.services.proxy.config import UpstreamConfig
from strictcall.services.proxy.content import FederatedContent, UpstreamContent, index_content
from strictcall.services.proxy.upstream import Upstream, UpstreamSpec
from strictcall.transports.jsonrpc import ERROR_CODES

Mode = Literal["legacy", "auto"]
SDK_NOTES = shlex.join([sys.executable, str(UPSTREAMS / "sdk_notes.py")])
HOSTILE = shlex.join([sys.executable, str(UPSTREAMS / "content_upstream.py")])


def assert_refused(exc: MCPError, kind: ErrorKind) -> None:
    assert exc.code == ERROR_CODES[kind.stage][0]
    data = exc.error.data
    assert isinstance(data, dict)
    assert (data["code"], data["stage"], data["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    )


def write_config(path: Path, upstreams: dict[str, str]) -> Path:
    path.write_text(
        "".join(
            f"[upstreams.{name}]\ncommand = {json.dumps(cmd)}\n" for name, cmd in upstreams.items()
        ),
        encoding="utf-8",
    )
    return path


def federate_args(config: Path, db: Path, *extra: str) -> list[str]:
    return [
        "-m",
        "strictcall",
        "federate",
        "--config",
        str(config),
        "--stdio",
        "--identity",
        "u1",
        "--db",
        str(db),
        *extra,
    ]


def run_session(args: list[str], mode: Mode, work: Any, stderr: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=args)

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S * 2), stderr.open("w", encoding="utf-8") as errlog:
            async with Client(
                stdio_client(params, errlog=errlog), mode=mode, read_timeout_seconds=DEADLINE_S
            ) as client:
                await work(client)

    anyio.run(session)


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
def test_the_official_client_lists_and_reads_the_upstreams_resources_and_prompts(
    tmp_path: Path, mode: Mode, version: str
) -> None:
    config = write_config(
        tmp_path / "federation.toml",
        {
            "sdk": SDK_NOTES,
            "fast": fastmcp_command(),
            "ev": everything_command(),
            "bad": HOSTILE,
        },
    )

    async def work(client: Client) -> None:
        assert client.protocol_version == version
        resources = (await client.list_resources()).resources
        uris = [resource.uri for resource in resources]
        assert uris == sorted(uris)
        named = {resource.uri: resource.name for resource in resources}
        assert named["notes://n1"] == "sdk_refund_note"
        assert named["memo://refunds"] == "fast_refunds"
        assert any(uri.startswith("demo://") and named[uri].startswith("ev_") for uri in uris)
        assert not any("\n" in uri for uri in uris)  # the hostile URI is not served
        templates = [
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        ]
        assert templates == sorted(templates) and "notes://{note_id}" in templates
        prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
        assert prompts == sorted(prompts)
        assert {"sdk_summarize", "fast_greet", "ev_simple-prompt", "bad_plain"} <= set(prompts)
        assert not any("\x1b" in name or "\x07" in name for name in prompts)

        read = await client.read_resource("notes://n1")
        assert [c.text for c in read.contents if hasattr(c, "text")] == [
            "The refund window is 7 days."
        ]
        templated = await client.read_resource("notes://missing-id")  # through the template
        assert [c.uri for c in templated.contents] == ["notes://missing-id"]
        fast = await client.read_resource("memo://refunds")
        assert len(fast.contents) == 1
        got = await client.get_prompt("sdk_summarize", {"note_id": "n1"})
        assert [m.content.text for m in got.messages if hasattr(m.content, "text")] == [
            "Summarize the note n1."
        ]
        ev = await client.get_prompt("ev_simple-prompt")
        assert ev.messages

        for uri in ("nope://never-listed", "line://a\nb"):
            with pytest.raises(MCPError) as unlisted:
                await client.read_resource(uri)
            assert_refused(unlisted.value, FORBIDDEN_OR_MISSING)
        for name in ("summarize", "sdk_nope", "bad_evil\x1b]0;pwned\x07"):
            with pytest.raises(MCPError) as unknown:
                await client.get_prompt(name)
            assert_refused(unknown.value, FORBIDDEN_OR_MISSING)
        with pytest.raises(MCPError) as big:
            await client.read_resource("blob://big")
        assert_refused(big.value, RESULT_TOO_LARGE)

        # an upstream that goes down: its resources and prompts answer upstream_unavailable
        # (with its restart's time) while the others' are read
        with pytest.raises(MCPError) as down:
            await client.read_resource("crash://now")
        assert_refused(down.value, UPSTREAM_UNAVAILABLE)
        data = down.value.error.data
        assert isinstance(data, dict) and data["retry_after_ms"] >= 1
        assert (await client.read_resource("notes://n1")).contents

    stderr = tmp_path / "stderr"
    run_session(federate_args(config, tmp_path / "db.sqlite3"), mode, work, stderr)
    log = stderr.read_text(encoding="utf-8")
    assert "\x1b" not in log and "\x07" not in log  # the hostile names, escaped in the log
    assert "not served" in log and "line://a\\\\nb" in log


def test_a_resource_uri_two_upstreams_list_is_refused_at_start_in_one_line_naming_both(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "collide.toml", {"sdk": SDK_NOTES, "bad": f"{HOSTILE} --collide"}
    )
    done = subprocess.run(
        [sys.executable, *federate_args(config, tmp_path / "db.sqlite3")],
        input="",
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "collides" in line]
    assert len(lines) == 1 and "notes://n1" in lines[0]
    assert "upstream sdk" in lines[0] and "upstream bad" in lines[0]
    assert done.stdout == ""


def test_the_policy_judges_resources_and_prompts_by_their_prefixed_names(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\nname = "sdk"\nwho = ["u1"]\ntools = ["sdk_*"]\n', encoding="utf-8")
    config = write_config(
        tmp_path / "federation.toml", {"sdk": SDK_NOTES, "fast": fastmcp_command()}
    )

    async def work(client: Client) -> None:
        resources = (await client.list_resources()).resources
        assert {resource.uri for resource in resources} == {"notes://n1"}
        assert [p.name for p in (await client.list_prompts()).prompts] == ["sdk_summarize"]
        assert (await client.read_resource("notes://n1")).contents
        # a forbidden one and one that does not exist get the same answer
        for uri in ("memo://refunds", "memo://never-listed"):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert_refused(refused.value, FORBIDDEN_OR_MISSING)
            assert refused.value.error.model_dump() == _refusal_of(FORBIDDEN_OR_MISSING)
        with pytest.raises(MCPError) as forbidden:
            await client.get_prompt("fast_greet", {"name": "x"})
        assert_refused(forbidden.value, FORBIDDEN_OR_MISSING)

    args = federate_args(config, tmp_path / "db.sqlite3", "--policy", str(policy))
    run_session(args, "legacy", work, tmp_path / "stderr")


def _refusal_of(kind: ErrorKind) -> dict[str, Any]:
    code, message = ERROR_CODES[kind.stage]
    return {"code": code, "message": message, "data": kind.as_error()}


def test_resources_and_prompts_are_not_advertised_when_no_upstream_has_them(tmp_path: Path) -> None:
    scripted = shlex.join(
        [sys.executable, str(UPSTREAMS / "scripted_upstream.py"), str(tmp_path / "log")]
    )
    config = write_config(tmp_path / "federation.toml", {"s": scripted})

    async def work(client: Client) -> None:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.tools is not None
        assert capabilities.resources is None and capabilities.prompts is None
        with pytest.raises(MCPError) as absent:
            await client.list_resources()
        assert absent.value.code == -32601

    run_session(federate_args(config, tmp_path / "db.sqlite3"), "legacy", work, tmp_path / "stderr")


def test_the_typescript_client_lists_and_reads_resources_and_prompts(tmp_path: Path) -> None:
    from node_client import TS_DIR, node_with_packages

    node = node_with_packages()
    config = write_config(
        tmp_path / "federation.toml", {"sdk": SDK_NOTES, "ev": everything_command()}
    )
    done = subprocess.run(
        [
            node,
            str(TS_DIR / "federation_content.mjs"),
            sys.executable,
            *federate_args(config, tmp_path / "db.sqlite3"),
        ],
        cwd=TS_DIR,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "resources" in report["capabilities"] and "prompts" in report["capabilities"]
    uris = [uri for uri, _ in report["resources"]]
    assert uris == sorted(uris) and ["notes://n1", "sdk_refund_note"] in report["resources"]
    assert report["templates"] == sorted(report["templates"])
    assert report["prompts"] == sorted(report["prompts"]) and "sdk_summarize" in report["prompts"]
    assert report["read"]["contents"][0]["text"] == "The refund window is 7 days."
    assert report["prompt"]["messages"][0]["content"]["text"] == "Summarize the note n1."
    unlisted = report["unlisted"]
    assert unlisted["code"] == ERROR_CODES[FORBIDDEN_OR_MISSING.stage][0]
    assert unlisted["data"] == FORBIDDEN_OR_MISSING.as_error()


def test_the_proxy_of_one_upstream_serves_its_resources_and_prompts_as_listed(
    tmp_path: Path,
) -> None:
    argv = proxy_argv(SDK_NOTES, tmp_path / "db.sqlite3")

    async def work(client: Client) -> None:
        resources = (await client.list_resources()).resources
        assert {r.uri: r.name for r in resources} == {"notes://n1": "refund_note"}
        assert [p.name for p in (await client.list_prompts()).prompts] == ["summarize"]
        read = await client.read_resource("notes://n1")
        assert [c.text for c in read.contents if isinstance(c, types.TextResourceContents)] == [
            "The refund window is 7 days."
        ]
        got = await client.get_prompt("summarize", {"note_id": "n2"})
        assert [
            m.content.text for m in got.messages if isinstance(m.content, types.TextContent)
        ] == ["Summarize the note n2."]
        with pytest.raises(MCPError) as unlisted:
            await client.read_resource("memo://never-listed")
        assert_refused(unlisted.value, FORBIDDEN_OR_MISSING)

    run_session(argv[1:], "auto", work, tmp_path / "stderr")


# --- the registry, without upstreams running -----------------------------------------------------


def _member(name: str) -> tuple[UpstreamConfig, Upstream]:
    spec = UpstreamSpec(command=("unused",))
    return UpstreamConfig(name, spec, name, 5.0), Upstream(spec, lambda _: None, errlog=sys.stderr)


def _template(name: str, uri_template: str) -> types.ResourceTemplate:
    return types.ResourceTemplate(name=name, uri_template=uri_template)


@pytest.mark.parametrize(
    ("uri_template", "uri", "matches"),
    [
        ("notes://{id}", "notes://n1", True),
        ("notes://{id}", "notes://n1/more", False),
        ("notes://{id}", "other://n1", False),
        ("files://{+path}", "files://a/b/c.txt", True),
        ("search://q{?term,page}", "search://q?term=x&page=2", True),
        ("search://q{?term,page}", "search://q", True),
        ("lit://a.b", "lit://aXb", False),  # literal parts are literal, not patterns
    ],
)
def test_a_template_routes_the_uris_it_expands_to(
    uri_template: str, uri: str, matches: bool
) -> None:
    config, upstream = _member("a")
    content = UpstreamContent(
        templates=(_template("t", uri_template),), offers=frozenset({"resources"})
    )
    index, refused, collisions = index_content([(config, upstream, content)], "_")
    assert (refused, collisions) == ({}, [])
    (served,) = index.templates
    assert served.pattern is not None
    assert (served.pattern.fullmatch(uri) is not None) is matches


def test_a_uri_two_upstreams_templates_match_is_not_read_and_a_shared_template_collides() -> None:
    (config_a, upstream_a), (config_b, upstream_b) = _member("a"), _member("b")
    a = UpstreamContent(templates=(_template("x", "x://{id}"),), offers=frozenset({"resources"}))
    b = UpstreamContent(templates=(_template("y", "x://{+path}"),), offers=frozenset({"resources"}))
    index, _, collisions = index_content(
        [(config_a, upstream_a, a), (config_b, upstream_b, b)], "_"
    )
    assert collisions == []
    content = FederatedContent(lambda identity, name, claims: True)
    content.index = index

    async def read() -> None:
        with pytest.raises(ToolFailure) as ambiguous:
            await content.read_resource("u1", "x://n1")
        assert ambiguous.value.kind is FORBIDDEN_OR_MISSING

    anyio.run(read)
    same = UpstreamContent(templates=(_template("z", "x://{id}"),), offers=frozenset({"resources"}))
    _, _, collided = index_content([(config_a, upstream_a, a), (config_b, upstream_b, same)], "_")
    assert len(collided) == 1 and "upstream a" in collided[0] and "upstream b" in collided[0]


def test_an_unbalanced_template_is_not_served() -> None:
    config, upstream = _member("a")
    content = UpstreamContent(
        templates=(_template("t", "x://{id"),), offers=frozenset({"resources"})
    )
    index, refused, _ = index_content([(config, upstream, content)], "_")
    assert index.templates == () and len(refused) == 1
