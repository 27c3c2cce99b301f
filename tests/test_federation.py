"""`strictcall federate`: many real MCP servers behind one strictcall, from one config file:
tools prefixed and listed in order, each upstream on its own (one down, the others serve; one
missing at start, the rest served), collisions refused at start, and tool pinning (a rug pull
held back as `tool_changed` until `strictcall tools approve`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doc_pages import page
from mcp_peers import error_of, everything_command, fastmcp_command
from servers import running
from stdio_peer import DEADLINE_S, StdioPeer, until
from strictcall.errors import (
    RATE_LIMITED,
    TOOL_CHANGED,
    UNKNOWN_TOOL,
    UPSTREAM_UNAVAILABLE,
    ErrorKind,
)
from strictcall.services.proxy.config import (
    HOST_NAME,
    ConfigError,
    federation_config,
    load_config,
)

LIST_CHANGED = "notifications/tools/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"


def assert_kind(error: dict[str, Any], kind: ErrorKind) -> None:
    assert (error["code"], error["stage"], error["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    ), error


def toml_text(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is written as JSON writes one


def federate_argv(config: Path, db: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "strictcall",
        "federate",
        "--config",
        str(config),
        "--db",
        str(db),
        *extra,
    ]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strictcall", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )


# --- the config file ---------------------------------------------------------------------------


def test_a_config_names_upstreams_with_their_own_prefix_credentials_timeout_and_restart() -> None:
    config = federation_config(
        {
            "federation": {"separator": "-", "timeout": 5},
            "upstreams": {
                "files": {"command": "node files.js", "credentials": {"env": {"TOKEN": "t"}}},
                "tickets": {
                    "url": "https://tickets.example/mcp",
                    "credentials": {"headers": {"Authorization": "Bearer x"}},
                    "prefix": "jira",
                    "timeout": 0.5,
                    "restart": {"min": 1, "max": 30},
                    "pass_errors": ["search"],
                },
                "plain": {"command": "srv", "prefix": ""},
            },
        }
    )
    files, tickets, plain = config.upstreams
    assert config.pinning is True  # on by default for a federation
    assert files.spec.command == ("node", "files.js") and files.spec.env == {"TOKEN": "t"}
    assert files.timeout == 5.0 and files.served_name("read", "-") == "files-read"
    assert tickets.spec.headers == {"Authorization": "Bearer x"}
    assert (tickets.timeout, tickets.restart_min_s, tickets.restart_max_s) == (0.5, 1.0, 30.0)
    assert tickets.served_name("search", "-") == "jira-search"
    assert tickets.pass_errors == {"search"}
    assert plain.served_name("x", "-") == "x"  # an empty prefix is no prefix, not the default


@pytest.mark.parametrize(
    "data",
    [
        {"upstreams": {}},
        {"federation": {}},
        {"upstreams": {"a": {"command": "x", "comand": "y"}}},
        {"upstreams": {"a": {"command": "x", "url": "http://h/mcp"}}},
        {"upstreams": {"a": {}}},
        {"upstreams": {"a": {"command": "x", "timeout": 0}}},
        {"upstreams": {"a": {"command": "x", "timeout": True}}},
        {"upstreams": {"a": {"command": "x", "restart": {"min": 2, "max": 1}}}},
        {"upstreams": {"a": {"command": "x", "credentials": {"headers": {"A": "b"}}}}},
        {"upstreams": {"a": {"url": "http://h/mcp", "credentials": {"env": {"A": "b"}}}}},
        {"upstreams": {"a": {"url": "ftp://h/mcp"}}},
        {"upstreams": {"a.b": {"command": "x"}}},
        {"upstreams": {"a": {"command": "x", "prefix": "a.b"}}},
        {"upstreams": {"a": {"command": "x"}, "b": {"command": "y", "prefix": "a"}}},
        {"federation": {"separator": "."}, "upstreams": {"a": {"command": "x"}}},
        {"federation": {"pinning": "yes"}, "upstreams": {"a": {"command": "x"}}},
        {"upstreams": {"a": {"command": "x", "pass_errors": "read"}}},
    ],
    ids=[
        "no-upstream",
        "no-upstreams-table",
        "unknown-key",
        "command-and-url",
        "neither",
        "timeout-0",
        "timeout-bool",
        "restart-max-below-min",
        "headers-for-a-command",
        "env-for-a-url",
        "not-http",
        "name-hosts-refuse",
        "prefix-hosts-refuse",
        "same-prefix",
        "separator-hosts-refuse",
        "pinning-not-bool",
        "pass-errors-not-a-list",
    ],
)
def test_a_config_not_shaped_as_documented_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        federation_config(data)


def test_a_config_file_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[upstreams.a\ncommand = ", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_config(str(path))


# --- one federation of real upstreams over stdio -----------------------------------------------


class Federation:
    """`strictcall federate` on stdio in front of the FastMCP notes server (with its rug pull),
    server-everything (npm) and an upstream that is not there."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pids = tmp / "pids"
        self.calls = tmp / "calls.log"
        self.db = tmp / "federation.sqlite3"
        notes = f"{fastmcp_command(self.calls)} --rug-pull"
        recorded = "sh -c " + shlex.quote(f"echo $$ >> {self.pids}; exec {notes}")
        down = shlex.join([sys.executable, "-c", "raise SystemExit(3)", "no-such-server"])
        config = tmp / "federation.toml"
        config.write_text(
            f"[upstreams.notes]\n"
            f"command = {toml_text(recorded)}\n"
            f"credentials.env = {{ NOTES_SECRET = 's3cret-value' }}\n"
            f"[upstreams.everything]\n"
            f"command = {toml_text(everything_command())}\n"
            f"[upstreams.down]\n"
            # it exits at once (a command that is not there at all is a config error)
            f"command = {toml_text(down)}\n",
            encoding="utf-8",
        )
        self.config = config
        self.stderr_path = tmp / "federate.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.peer = StdioPeer(
            federate_argv(config, self.db, "--stdio", "--identity", "u1"), self._stderr
        )
        self.peer.initialize()

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def listing(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.peer.request("tools/list")["result"]["tools"]
        return tools

    def close(self) -> None:
        try:
            assert self.peer.close() == 0
        finally:
            self._stderr.close()


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    running = Federation(tmp_path_factory.mktemp("federation"))
    yield running
    running.close()


def test_tools_are_prefixed_per_upstream_with_names_hosts_accept_and_listed_in_order(
    federation: Federation,
) -> None:
    names = [tool["name"] for tool in federation.listing()]
    assert names == sorted(names)
    assert {"notes_add", "notes_read_note", "everything_echo"} <= set(names)
    assert all(name.startswith(("notes_", "everything_")) for name in names)
    assert all(HOST_NAME.fullmatch(name) for name in names)
    assert names == [tool["name"] for tool in federation.listing()]  # the same, asked again


def test_each_upstream_serves_its_tools_under_its_prefix(federation: Federation) -> None:
    added = federation.peer.call("notes_add", {"a": 2, "b": 3})
    assert added["structuredContent"] == {"result": 5}
    echoed = federation.peer.call("everything_echo", {"message": "hi"})
    assert echoed["isError"] is False, echoed
    assert "add" in federation.calls.read_text().split()


def digest_in(diff: str, key: str) -> str:
    """The digest `tools diff` shows for the change of `key` (`tool "notes_add"`)."""
    found = re.search(rf"{re.escape(key)} \w+ upstream .*digest ([0-9a-f]{{64}}):", diff)
    assert found is not None, diff
    return found.group(1)


def test_an_upstreams_list_changed_reaches_the_downstream_stdio_session(
    federation: Federation,
) -> None:
    peer = federation.peer
    db = str(federation.db)
    assert "notes_late" not in {tool["name"] for tool in federation.listing()}
    assert peer.call("notes_grow", {})["isError"] is False
    # a tool (and a resource) that appears mid-run waits for an approval: not served
    diff = until(
        lambda: (
            (out := run_cli("tools", "diff", "--db", db).stdout) and "memo://late" in out and out
        ),
        "the new tool and resource wait",
    )
    assert "notes_late" not in {tool["name"] for tool in federation.listing()}
    for key, name in (('tool "notes_late"', "notes_late"), ('resource "memo://late"', "")):
        approved = run_cli(
            "tools",
            "approve",
            name or "resource:memo://late",
            "--digest",
            digest_in(diff, key),
            "--db",
            db,
        )
        assert approved.returncode == 0, approved.stderr
    seen: list[dict[str, Any]] = []
    while not (
        any(m.get("method") == LIST_CHANGED for m in seen)
        and any(m.get("method") == RESOURCES_CHANGED for m in seen)  # its new resource too
    ):
        seen.append(peer.message())
    names = [tool["name"] for tool in federation.listing()]
    assert "notes_late" in names and names == sorted(names)  # approved: served
    assert peer.call("notes_late", {})["isError"] is False
    resources = peer.request("resources/list")["result"]["resources"]
    assert {"uri": "memo://late", "name": "notes_late_memo"}.items() <= {
        key: value for r in resources if r["uri"] == "memo://late" for key, value in r.items()
    }.items()


def test_a_start_with_an_upstream_missing_serves_the_rest_and_names_it(
    federation: Federation,
) -> None:
    stderr = federation.stderr()
    line = next(line for line in stderr.splitlines() if "missing" in line)
    assert "down (" in line  # named, with the reason it is missing
    assert "s3cret-value" not in stderr  # an upstream's credentials never reach the log


def test_a_rug_pull_is_held_back_as_tool_changed_until_an_operator_approves_it(
    federation: Federation,
) -> None:
    before = {tool["name"]: tool for tool in federation.listing()}["notes_add"]
    peer = federation.peer
    peer.send(
        b'{"jsonrpc":"2.0","id":"pull","method":"tools/call",'
        b'"params":{"name":"notes_rug_pull","arguments":{}}}'
    )
    # no list_changed: what is listed did not change
    assert peer.answer_to("pull")["result"]["isError"] is False
    until(lambda: "changed upstream" in federation.stderr(), "the change is logged")
    # still listed as pinned: the poisoned description never reaches the host
    assert {tool["name"]: tool for tool in federation.listing()}["notes_add"] == before
    calls_before = federation.calls.read_text().split().count("add")
    assert_kind(error_of(peer.call("notes_add", {"a": 1, "b": 1})), TOOL_CHANGED)
    assert_kind(error_of(peer.call("notes_add", {"a": 1, "b": 2})), TOOL_CHANGED)
    assert federation.calls.read_text().split().count("add") == calls_before  # never forwarded
    assert federation.stderr().count("changed upstream") == 1  # logged once

    diff = run_cli("tools", "diff", "--db", str(federation.db))
    assert diff.returncode == 0, diff.stderr
    assert '"notes_add"' in diff.stdout and "id_rsa" in diff.stdout
    assert '"notes_read_note"' not in diff.stdout
    assert "upstream notes" in diff.stdout  # the upstream the change comes from
    digest = digest_in(diff.stdout, 'tool "notes_add"')
    approved = run_cli(
        "tools", "approve", "notes_add", "--digest", digest, "--db", str(federation.db)
    )
    assert approved.returncode == 0, approved.stderr

    def served() -> bool:
        result = peer.call("notes_add", {"a": 2, "b": 2})
        if result["isError"]:
            assert_kind(error_of(result), TOOL_CHANGED)
            return False
        return bool(result["structuredContent"] == {"result": 4})

    until(served, "the approved change is served")
    now = {tool["name"]: tool for tool in federation.listing()}["notes_add"]
    assert "id_rsa" in now["description"]  # approved: the operator's call
    again = run_cli("tools", "approve", "notes_add", "--digest", digest, "--db", str(federation.db))
    assert again.returncode == 1  # nothing waits any more
    assert run_cli("tools", "diff", "--db", str(federation.db)).stdout.startswith("no pinned tool")


def test_one_upstream_down_answers_upstream_unavailable_while_the_others_serve(
    federation: Federation,
) -> None:
    def served() -> bool:
        return not federation.peer.call("notes_read_note", {"note_id": "n1"})["isError"]

    until(served, "the upstream has started")
    first = int(federation.pids.read_text().split()[0])
    os.kill(first, signal.SIGKILL)

    def down() -> dict[str, Any] | None:
        result = federation.peer.call("notes_read_note", {"note_id": "n1"})
        return error_of(result) if result["isError"] else None

    error = until(down, "the killed upstream is seen down")
    assert_kind(error, UPSTREAM_UNAVAILABLE)
    assert error["retry_after_ms"] >= 250
    assert federation.peer.call("everything_echo", {"message": "still"})["isError"] is False

    until(served, "the upstream restarted")
    # one process of it runs, a new one (those that probed it, at a start or a relisting
    # whose names were new, have stopped)
    alive = [pid for pid in map(int, federation.pids.read_text().split()) if running(pid)]
    assert len(alive) == 1 and alive[0] != first


# --- at start ----------------------------------------------------------------------------------


def test_a_name_collision_is_refused_at_start_in_one_line_naming_both(tmp_path: Path) -> None:
    notes = toml_text(fastmcp_command())
    config = tmp_path / "collide.toml"
    config.write_text(
        f'[upstreams.first]\ncommand = {notes}\nprefix = ""\n'
        f'[upstreams.second]\ncommand = {notes}\nprefix = ""\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        federate_argv(config, tmp_path / "db.sqlite3", "--stdio", "--identity", "u1"),
        input="",
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "collides" in line]
    assert len(lines) == 1 and "first" in lines[0] and "second" in lines[0]
    assert done.stdout == ""


def test_a_name_collision_over_http_is_one_line_and_exit_1_before_listening(
    tmp_path: Path,
) -> None:
    notes = toml_text(fastmcp_command())
    config = tmp_path / "collide.toml"
    config.write_text(
        f'[upstreams.first]\ncommand = {notes}\nprefix = ""\n'
        f'[upstreams.second]\ncommand = {notes}\nprefix = ""\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        federate_argv(config, tmp_path / "db.sqlite3", "--port", "0"),
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )
    assert done.returncode == 1
    ours = [line for line in done.stderr.splitlines() if line.startswith("strictcall federate:")]
    assert ours[-1].count("collides") == 1 and "first" in ours[-1] and "second" in ours[-1]
    assert "Traceback" not in done.stderr and "startup failed" not in done.stderr
    assert "listening" not in done.stdout


@pytest.mark.parametrize(
    "args",
    [["--stdio"], ["--stdio", "--identity", "u1", "--port", "1"], ["--identity", "u1"]],
    ids=["stdio-without-identity", "stdio-with-port", "identity-without-stdio"],
)
def test_federate_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[upstreams.a]\ncommand = "x"\n', encoding="utf-8")
    done = run_cli("federate", "--config", str(config), "--db", str(tmp_path / "d"), *args)
    assert done.returncode == 2


def test_a_malformed_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f"[upstreams.a]\ncommand = {toml_text(sys.executable)}\nbogus = 1\n", encoding="utf-8"
    )
    done = run_cli(
        "federate",
        "--config",
        str(config),
        "--db",
        str(tmp_path / "d"),
        "--stdio",
        "--identity",
        "u1",
    )
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "bogus" in done.stderr


def test_tools_diff_on_a_store_with_no_pins_says_so(tmp_path: Path) -> None:
    done = run_cli("tools", "diff", "--db", str(tmp_path / "empty.sqlite3"))
    assert done.returncode == 0
    assert re.match(r"no pinned tool changed \(0 pinned\)", done.stdout)


# --- the official TypeScript client --------------------------------------------------------------


def test_the_typescript_client_sees_prefixed_tools_and_a_rug_pull_held_back(tmp_path: Path) -> None:
    from node_client import TS_DIR, node_with_packages

    node = node_with_packages()
    config = tmp_path / "federation.toml"
    notes = toml_text(f"{fastmcp_command()} --rug-pull")
    config.write_text(
        f"[upstreams.notes]\ncommand = {notes}\n"
        f"[upstreams.everything]\ncommand = {toml_text(everything_command())}\n",
        encoding="utf-8",
    )
    argv = federate_argv(config, tmp_path / "db.sqlite3", "--stdio", "--identity", "u1")
    done = subprocess.run(
        [node, str(TS_DIR / "federation.mjs"), *argv],
        cwd=TS_DIR,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["names"] == sorted(report["names"])
    assert {"notes_add", "everything_echo"} <= set(report["names"])
    assert report["added"]["structuredContent"] == {"result": 5}
    assert report["pulled"]["isError"] is False
    held = json.loads(report["held"]["content"][0]["text"])
    assert (held["code"], held["stage"], held["retryable"]) == (
        TOOL_CHANGED.code,
        TOOL_CHANGED.stage.value,
        TOOL_CHANGED.retryable,
    )
    assert "id_rsa" not in report["listedAdd"]["description"]  # listed as pinned


# --- the README --------------------------------------------------------------------------------


def test_the_readmes_config_example_is_one_federate_reads() -> None:
    block = re.search(r"```toml\n(# federation.toml\n.*?)```", page("federation.md"), re.DOTALL)
    assert block is not None
    config = federation_config(tomllib.loads(block.group(1)))
    assert [u.name for u in config.upstreams] == ["files", "tickets"]
    assert [u.prefix for u in config.upstreams] == ["files", "jira"]
    assert config.upstreams[1].served_name("search", config.separator) == "jira_search"


# --- the policy file ---------------------------------------------------------------------------


def test_the_policy_file_judges_the_served_prefixed_names_on_list_and_call(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\nname = "notes"\nwho = ["u1"]\ntools = ["notes_read_*", "notes_add"]\n'
        'rate = "1/hour"\nburst = 1\n',
        encoding="utf-8",
    )
    config = tmp_path / "federation.toml"
    config.write_text(f"[upstreams.notes]\ncommand = {toml_text(fastmcp_command())}\n")
    argv = federate_argv(config, tmp_path / "db.sqlite3", "--stdio", "--identity", "u1")
    with (tmp_path / "stderr").open("wb") as stderr:
        peer = StdioPeer([*argv, "--policy", str(policy)], stderr)
        try:
            peer.initialize()
            assert peer.tool_names() == {"notes_add", "notes_read_note"}
            error = error_of(peer.call("notes_slow", {"seconds": 0}))
            assert (error["code"], error["available"]) == (
                UNKNOWN_TOOL.code,
                ["notes_add", "notes_read_note"],
            )
            assert peer.call("notes_add", {"a": 1, "b": 1})["structuredContent"] == {"result": 2}
            over = error_of(peer.call("notes_add", {"a": 1, "b": 1}))
            assert (over["code"], over["rule"]) == (RATE_LIMITED.code, "notes")
        finally:
            assert peer.close() == 0


# --- an upstream down at start, known from its pins ----------------------------------------------


def test_an_upstream_down_at_start_serves_its_pinned_tools_as_upstream_unavailable(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db.sqlite3"
    config = tmp_path / "federation.toml"
    config.write_text(f"[upstreams.notes]\ncommand = {toml_text(fastmcp_command())}\n")
    argv = federate_argv(config, db, "--stdio", "--identity", "u1")
    with (tmp_path / "first.stderr").open("wb") as stderr:
        first = StdioPeer(argv, stderr)
        first.initialize()
        pinned = first.tool_names()
        assert first.close() == 0
    # the same upstream, now down (it exits at once): its tools are known from the pins
    down = shlex.join([sys.executable, "-c", "raise SystemExit(3)"])
    config.write_text(f"[upstreams.notes]\ncommand = {toml_text(down)}\n")
    with (tmp_path / "second.stderr").open("wb") as stderr:
        second = StdioPeer(argv, stderr)
        try:
            second.initialize()
            assert second.tool_names() == pinned
            error = error_of(second.call("notes_add", {"a": 1, "b": 2}))
            assert_kind(error, UPSTREAM_UNAVAILABLE)
            assert error["retry_after_ms"] >= 250
        finally:
            assert second.close() == 0
