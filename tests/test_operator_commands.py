"""The operator's commands as a newcomer meets them: a token made names its store (and a new
store is said), `tools diff --exit-code` fails while a change waits, `audit` prints column
headers, counts read as English, and a policy that hides everything is warned about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp_peers import StdioProxy, fastmcp_command
from servers import start_server, strictcall
from strictcall.core.policy import Policy, Rule
from strictcall.storage import open_store

# --- the store named ----------------------------------------------------------------------------


def test_tokens_create_in_another_directory_names_the_new_store_it_made(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "strictcall", "tokens", "create", "--identity", "u1"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={name: value for name, value in os.environ.items() if name != "STRICTCALL_DB"},
    )
    assert done.returncode == 0, done.stderr
    made = next(elsewhere.glob("*.sqlite3"))
    assert str(made) in done.stdout  # the token's line names the store, by its full path
    assert str(made) in done.stderr  # and the store was new: said, not silent


def test_a_token_made_in_an_existing_store_names_it_and_says_nothing_new(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    assert strictcall("tokens", "create", "--identity", "u1", "--db", str(db)).returncode == 0
    again = strictcall("tokens", "create", "--identity", "u2", "--db", str(db))
    assert again.returncode == 0 and str(db) in again.stdout
    assert again.stderr == ""
    operator = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", str(db))
    assert operator.returncode == 0 and str(db) in operator.stdout


# --- tools diff --exit-code ---------------------------------------------------------------------


def test_tools_diff_exit_code_is_1_while_a_change_waits_and_0_once_approved(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "pins.sqlite3")
    store = open_store(db)
    try:
        store.pin_tool("notes_add", json.dumps({"name": "add", "description": "adds"}))
        store.see_tool("notes_add", json.dumps({"name": "add", "description": "read id_rsa"}))
    finally:
        store.close()
    waiting = strictcall("tools", "diff", "--exit-code", "--db", db)
    assert waiting.returncode == 1 and "id_rsa" in waiting.stdout
    assert strictcall("tools", "diff", "--db", db).returncode == 0  # without it, as before
    digest = waiting.stdout.rsplit("--digest ", 1)[1].split()[0]  # as diff says to approve it
    assert (
        strictcall("tools", "approve", "notes_add", "--digest", digest, "--db", db).returncode == 0
    )
    assert strictcall("tools", "diff", "--exit-code", "--db", db).returncode == 0


# --- audit's headers ----------------------------------------------------------------------------


def test_audit_prints_column_headers_above_the_calls(tmp_path: Path) -> None:
    db = str(tmp_path / "a.sqlite3")
    assert strictcall("call", '{"name": "nope"}', "--identity", "u1", "--db", db).returncode == 1
    done = strictcall("audit", "--db", db)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = lines[1].split()
    for column in ("time", "outcome", "stage", "code", "tool", "identity", "latency"):
        assert column in header
    counts_header = lines[lines.index("counts by outcome, stage and code:") + 1].split()
    assert counts_header == ["calls", "outcome", "stage", "code"]
    as_json = strictcall("audit", "--json", "--db", db)
    assert all(line.startswith("{") for line in as_json.stdout.splitlines())  # no header there


# --- counts as English --------------------------------------------------------------------------


def test_counts_are_singular_for_one() -> None:
    from strictcall.core.terminal import counted

    assert [counted(n, "upstream") for n in (0, 1, 2)] == [
        "0 upstreams",
        "1 upstream",
        "2 upstreams",
    ]
    assert counted(1, "quota") == "1 quota"


def test_policy_check_says_1_rule_and_1_quota(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(
        '[[rule]]\nname = "all"\nwho = ["*"]\ntools = ["*"]\n'
        '[[quota]]\nname = "q"\nper = "identity"\nrate = "5/minute"\n',
        encoding="utf-8",
    )
    done = strictcall("policy", "check", str(policy))
    assert done.returncode == 0 and "1 rule, 1 quota" in done.stdout


# --- policy warnings ----------------------------------------------------------------------------


def test_an_empty_policy_checks_with_a_warning_that_it_hides_every_tool(tmp_path: Path) -> None:
    policy = tmp_path / "empty.toml"
    policy.write_text("", encoding="utf-8")
    done = strictcall("policy", "check", str(policy))
    assert done.returncode == 0  # warned, not refused: it is valid, if most likely a mistake
    assert "0 rules" in done.stdout
    assert len(done.stderr.splitlines()) == 1 and "warning" in done.stderr


def test_a_rule_matching_no_served_tool_is_warned_and_one_that_does_is_not() -> None:
    from strictcall.core.policy import policy_warnings

    policy = Policy(
        rules=(
            Rule("typo", ("*",), ("read_notes",)),
            Rule("readers", ("*",), ("read_*",)),
        )
    )
    warnings = policy_warnings(policy, ["read_note", "add"])
    assert len(warnings) == 1 and '"typo"' in warnings[0]
    assert policy_warnings(policy) == []  # the tools not known: nothing to say of the rules


def test_the_proxy_warns_once_of_a_rule_that_grants_no_served_tool(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\nname = "typo"\nwho = ["*"]\ntools = ["read_notes"]\n'
        '[[rule]]\nname = "adders"\nwho = ["*"]\ntools = ["add"]\n',
        encoding="utf-8",
    )
    proxy = StdioProxy(tmp_path, fastmcp_command(), "--identity", "u1", "--policy", str(policy))
    try:
        assert proxy.peer.tool_names() == {"add"}
    finally:
        proxy.close()
    warned = [line for line in proxy.stderr().splitlines() if "policy warning" in line]
    assert len(warned) == 1 and '"typo"' in warned[0] and '"adders"' not in warned[0]


TYPO_POLICY = (
    '[[rule]]\nname = "typo"\nwho = ["*"]\ntools = ["read_notes"]\n'
    '[[rule]]\nname = "readers"\nwho = ["*"]\ntools = ["read_note"]\n'
)


def test_serve_warns_at_start_of_a_rule_that_grants_no_served_tool(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(TYPO_POLICY, encoding="utf-8")
    db = tmp_path / "s.sqlite3"
    server = start_server(db, "--policy", str(policy))
    try:
        warned = [line for line in server.lines if "warning" in line and str(policy) in line]
    finally:
        assert server.stop() == 0
    assert len(warned) == 1 and '"typo"' in warned[0] and '"readers"' not in warned[0]
    # on stdio too, before the first message is read
    done = strictcall(
        "serve", "--mcp-stdio", "--identity", "u1", "--db", str(db), "--policy", str(policy),
        stdin="",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stdio_warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(stdio_warned) == 1 and '"typo"' in stdio_warned[0]
