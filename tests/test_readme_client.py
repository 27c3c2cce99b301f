"""The README's Client snippet runs as written against what `make run` serves and prints what the
README shows; a Client given the /rpc URL the curl lines use works, and one given another
endpoint is told which URL answered and what was expected."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from doc_pages import documented
from servers import RunningServer, create_token, start_server
from strictcall import Client
from strictcall.client.http import ProtocolError
from strictcall.errors import INVALID_REQUEST, Reason, Stage

ROOT = Path(__file__).resolve().parents[1]
README = documented()
README_BASE = "http://127.0.0.1:8765"


def noted(note: str) -> tuple[list[str], list[str]]:
    """The block after `<!-- readme-test: note -->` and the text block after it."""
    after = README.split(f"<!-- readme-test: {note} -->\n", 1)[1]
    code, rest = re.match(r"```\w*\n(.*?)```(.*)", after, re.S).groups()  # type: ignore[union-attr]
    shown = re.search(r"```text\n(.*?)```", rest, re.S)
    assert shown is not None
    return code.splitlines(), shown.group(1).splitlines()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[RunningServer]:
    """What `make run` serves: `serve --demo` on ./strictcall.sqlite3."""
    server = start_server(tmp_path / "strictcall.sqlite3", "--demo")
    try:
        yield server
    finally:
        assert server.stop() == 0


def test_the_client_snippet_runs_as_written_and_prints_what_the_readme_shows(
    demo: RunningServer,
) -> None:
    code, shown = noted("client")
    cwd = Path(demo.db).parent
    (cwd / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
    (cwd / "client.py").write_text(
        "\n".join(line.replace(README_BASE, demo.base_url) for line in code) + "\n",
        encoding="utf-8",
    )
    for _ in range(2):  # and again: it leaves the count as it found it
        done = subprocess.run(
            [sys.executable, "client.py"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == shown


def test_a_client_given_the_rpc_url_of_the_curl_lines_calls_the_same_endpoint(
    demo: RunningServer,
) -> None:
    token = create_token(demo.db, "u3")
    for url in (demo.base_url, demo.base_url + "/", demo.base_url + "/rpc"):
        with Client(url, token) as client:
            assert client.call("count_notes") == 0


@pytest.mark.parametrize("path", ["/healthz", "/api", "/rpc/rpc"])
def test_a_client_given_another_endpoint_is_told_which_url_answered(
    demo: RunningServer, path: str
) -> None:
    token = create_token(demo.db, "u3")
    with Client(demo.base_url + path, token) as client, pytest.raises(ProtocolError) as caught:
        client.call("count_notes")
    endpoint = demo.base_url + (path if path.endswith("/rpc") else path + "/rpc")
    assert endpoint in str(caught.value)
    assert token not in str(caught.value)


def test_a_request_without_jsonrpc_is_refused_naming_the_member(demo: RunningServer) -> None:
    token = create_token(demo.db, "u3")
    for body, pointer, reason, expected in (
        ({"id": 1, "method": "tools/list"}, "", Reason.MISSING_MEMBER, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, "/jsonrpc", Reason.CONST, "2.0"),
    ):
        answer = httpx.post(
            demo.base_url + "/rpc", json=body, headers={"Authorization": f"Bearer {token}"}
        ).json()
        data = answer["error"]["data"]
        assert (data["code"], data["stage"]) == (INVALID_REQUEST.code, Stage.PROTOCOL)
        assert (data["pointer"], data["reason"], data["expected"]) == (pointer, reason, expected)


def test_mcp_on_stdio_names_the_member_the_same_way(tmp_path: Path) -> None:
    lines = [
        {"id": 1, "method": "tools/list"},
        {"jsonrpc": "1.0", "id": 2, "method": "tools/list"},
    ]
    db = str(tmp_path / "s.sqlite3")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "strictcall",
            "serve",
            "--mcp-stdio",
            "--identity",
            "u1",
            "--db",
            db,
        ],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    for request_id, pointer, reason, expected in (
        (1, "", Reason.MISSING_MEMBER, "jsonrpc"),
        (2, "/jsonrpc", Reason.CONST, "2.0"),
    ):
        data = answers[request_id]["error"]["data"]
        assert (data["code"], data["stage"]) == (INVALID_REQUEST.code, Stage.PROTOCOL)
        assert (data["pointer"], data["reason"], data["expected"]) == (pointer, reason, expected)
