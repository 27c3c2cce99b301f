"""Issue 31: every failure a newcomer meets, in strictcall's own words: one line with the
command's prefix and exit 1 (2 for usage), no traceback, no uvicorn log, no password.

Every command runs as a real process; upstreams are real processes and a real HTTP server on
127.0.0.1; PostgreSQL failures are made against the real server (a missing database or role,
no TLS, a closed port) or a name that cannot resolve.
"""

from __future__ import annotations

import http.server
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

import pg
from servers import START_DEADLINE_S, unstamped
from strictcall.cli.parser import build_parser
from strictcall.storage.postgres.faults import why_not_connected

MODULE = [sys.executable, "-m", "strictcall"]
EXIT_FAILED = 1
EXIT_USAGE = 2
SANDBOX_LINE = "strictcall proxy: sandbox "
SECRET = "s3cret-Pa55"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*MODULE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=START_DEADLINE_S,
        check=False,
    )
    for stream in (done.stdout, done.stderr):
        assert "Traceback" not in stream
        assert SECRET not in stream
    return done


def failure_line(done: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The one line a failure prints: on stderr, with the command's prefix, exit 1."""
    assert done.returncode == EXIT_FAILED, done.stderr
    # a stdio upstream's start-up line says which sandbox it got; the failure is the one other
    lines = done.stderr.splitlines()
    (line,) = [text for text in lines if not unstamped(text).startswith(SANDBOX_LINE)]
    assert line.startswith(prefix)
    assert "ERROR:" not in line and "ExceptionGroup" not in line  # none of uvicorn's words
    return line


# --- 1. the HTTP proxy's start failures --------------------------------------------------------


def test_the_http_proxy_with_its_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = run("proxy", "--upstream-cmd", "true", "--port", port, "--db", str(tmp_path / "s"))
    line = failure_line(done, "strictcall proxy: ")
    assert port in line
    assert done.stdout == ""


def test_the_http_proxy_on_an_unknown_host_is_one_line_and_exit_1(tmp_path: Path) -> None:
    host = "no-such-host.invalid"
    done = run("proxy", "--upstream-cmd", "true", "--host", host, "--db", str(tmp_path / "s"))
    assert host in failure_line(done, "strictcall proxy: ")


# --- 2. upstreams that do not start, and why ---------------------------------------------------


@pytest.mark.parametrize("downstream", [["--port", "0"], ["--stdio", "--identity", "u1"]])
def test_an_upstream_command_that_is_not_found_is_one_line_naming_it(
    downstream: list[str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [*MODULE, "proxy", "--upstream-cmd", "no-such-server", *downstream],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_DEADLINE_S,
        check=False,
    )
    # refused as a fault of the command line, before anything is served, on either downstream
    assert done.returncode == EXIT_USAGE
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("strictcall proxy: ")
    assert "no-such-server" in lines[0]


def proxy_failure(*upstream: str, tmp_path: Path) -> str:
    done = run("proxy", *upstream, "--port", "0", "--db", str(tmp_path / "s.sqlite3"))
    return failure_line(done, "strictcall proxy: ")


def test_an_upstream_that_exits_before_answering_says_so_with_its_exit_status(
    tmp_path: Path,
) -> None:
    command = f"{sys.executable} -c 'raise SystemExit(42)'"
    line = proxy_failure("--upstream-cmd", command, tmp_path=tmp_path)
    assert "42" in line
    assert "-32000" not in line


@pytest.fixture
def refusing_upstream() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that answers every request 401; its /mcp URL."""

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_DELETE = do_POST

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_upstream_url_that_answers_401_says_so_and_never_prints_its_credentials(
    refusing_upstream: str, tmp_path: Path
) -> None:
    url = refusing_upstream.replace("http://", f"http://user:{SECRET}@") + f"?token={SECRET}"
    line = proxy_failure("--upstream-url", url, tmp_path=tmp_path)
    assert "401" in line
    assert "-32001" not in line and "-32603" not in line
    assert urlsplit(refusing_upstream).netloc in line  # the URL is named, its secrets masked


def test_the_failures_of_different_upstreams_are_told_apart(
    refusing_upstream: str, tmp_path: Path
) -> None:
    missing = run("proxy", "--upstream-cmd", "no-such-server", "--port", "0")
    assert missing.returncode == EXIT_USAGE  # refused before it is started: a usage fault
    lines = {
        *missing.stderr.splitlines(),
        proxy_failure("--upstream-cmd", f"{sys.executable} -c pass", tmp_path=tmp_path),
        proxy_failure("--upstream-url", refusing_upstream, tmp_path=tmp_path),
        proxy_failure("--upstream-url", "http://127.0.0.1:9/mcp", tmp_path=tmp_path),
    }
    reasons = {line.rsplit("): ", 1)[1] for line in lines}
    assert len(reasons) == 4


# --- 3. a database URL's password is never printed ---------------------------------------------


def with_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    user, at, where = rest.partition("@")
    return f"{scheme}://{user}:{SECRET}{at}{where}"


def served_lines(*args: str, env: dict[str, str]) -> list[str]:
    """What `serve --port 0` prints up to its token hint (within the deadline); then stopped."""
    process = subprocess.Popen(
        [*MODULE, "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + START_DEADLINE_S
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            if "tokens create" in line:
                break
    finally:
        process.terminate()
        try:
            process.wait(timeout=START_DEADLINE_S)
        finally:  # the deadline ends the child
            if process.poll() is None:
                process.kill()
                process.wait()
    return seen


@pytest.mark.parametrize("given_by", ["--db", "STRICTCALL_DB"])
def test_serve_never_prints_the_password_of_its_database_url(given_by: str, pg_url: str) -> None:
    url = with_password(pg_url)  # the tests' server trusts 127.0.0.1: the password is unused
    if given_by == "STRICTCALL_DB":
        lines = served_lines(env={"STRICTCALL_DB": url})
    else:
        lines = served_lines("--db", url, env={})
    assert any("tokens create" in line for line in lines), lines
    for line in lines:
        assert SECRET not in line


# --- 4. PostgreSQL failures named as psql names them --------------------------------------------


def admin_parts() -> tuple[str, str, str]:
    parts = urlsplit(pg.ADMIN_URL)
    return parts.hostname or "127.0.0.1", str(parts.port or 5432), parts.username or "postgres"


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def database_failures() -> dict[str, tuple[str, str]]:
    """Each failure: (a URL that meets it, with a password; a name the line must hold)."""
    host, port, user = admin_parts()
    closed = closed_port()
    base = f"postgresql://{user}:{SECRET}@{host}:{port}"
    return {
        "missing database": (f"{base}/strictcall_no_such_db", "strictcall_no_such_db"),
        "missing role": (
            f"postgresql://no_such_role:{SECRET}@{host}:{port}/postgres",
            "no_such_role",
        ),
        "no TLS": (f"{base}/postgres?sslmode=require", "sslmode"),
        "wrong port": (f"postgresql://{user}:{SECRET}@127.0.0.1:{closed}/postgres", closed),
        "unresolvable host": (
            f"postgresql://{user}:{SECRET}@no-such-host.invalid:5432/postgres",
            "no-such-host.invalid",
        ),
    }


def test_each_postgresql_failure_is_named_in_one_line_without_the_password(
    postgres: None,
) -> None:
    lines = {}
    for failure, (url, named) in database_failures().items():
        done = run("notes", "list", "--owner", "u1", "--db", url)
        line = failure_line(done, "strictcall: cannot open the store at ")
        assert named in line, failure
        lines[failure] = line.split(": ", 2)[2]  # what follows the store's (masked) URL
    assert len(set(lines.values())) == len(lines)


def test_a_failed_authentication_is_named_too() -> None:
    # what libpq says when the server refuses the password (this test server trusts every
    # local connection, so the words are given here as libpq writes them)
    refused = psycopg.OperationalError(
        'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  '
        'password authentication failed for user "app"'
    )
    settings = {"host": "127.0.0.1", "port": "5432", "user": "app", "dbname": "notes"}
    why = why_not_connected(refused, settings)
    others = {why_not_connected(psycopg.OperationalError("unknown"), settings)}
    assert "app" in why and why not in others


def test_the_readme_says_to_create_the_database_first() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("#### Many processes, many hosts: PostgreSQL", 1)[1]
    assert "createdb" in section.split("`--db` (and", 1)[0]


# --- 7. the smaller ones ------------------------------------------------------------------------


def test_a_misspelt_flag_shows_the_commands_own_usage(tmp_path: Path) -> None:
    done = run("serve", "--prot", "9000", "--db", str(tmp_path / "s"))
    assert done.returncode == EXIT_USAGE
    lines = done.stderr.splitlines()
    assert lines[0].startswith("usage: strictcall serve ")
    assert lines[-1].startswith("strictcall serve: error: ")
    assert "--prot" in lines[-1]
    nested = run("tokens", "create", "--identity", "u1", "--prot", "1")
    assert nested.stderr.splitlines()[0].startswith("usage: strictcall tokens create ")


def test_a_sqlalchemy_style_sqlite_url_names_that_file(tmp_path: Path) -> None:
    done = subprocess.run(
        [*MODULE, "notes", "add", "--owner", "u1", "--text", "x", "--db", "sqlite:///rel.db"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rel.db").is_file()
    absolute = tmp_path / "abs.db"
    assert run("notes", "add", "--owner", "u1", "--text", "x", "--db", f"sqlite:///{absolute}")
    assert absolute.is_file()


@pytest.mark.parametrize("db", ["mysql://h/db", "sqlite://", "sqlite:///:memory:", "sqlite:x.db"])
def test_a_url_that_names_no_store_strictcall_knows_is_refused(db: str, tmp_path: Path) -> None:
    done = run("notes", "list", "--owner", "u1", "--db", db)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines()[-1].startswith("strictcall notes list: error: argument --db")
    from_env = run("notes", "list", "--owner", "u1", env={"STRICTCALL_DB": db})
    assert from_env.returncode == EXIT_USAGE
    (line,) = from_env.stderr.splitlines()
    assert line.startswith("strictcall: STRICTCALL_DB ")
    assert not any(tmp_path.iterdir())


def subcommands() -> list[list[str]]:
    """Every command path of the parser: ["demo"], ["tokens", "create"], ..."""
    found: list[list[str]] = []

    def walk(parser: object, path: list[str]) -> None:
        for action in getattr(parser, "_actions", []):
            choices = getattr(action, "choices", None)
            if isinstance(choices, dict):
                for name, sub in choices.items():
                    found.append([*path, name])
                    walk(sub, [*path, name])

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("command", subcommands(), ids=" ".join)
def test_every_help_page_says_what_its_command_does(command: list[str]) -> None:
    done = run(*command, "--help")
    assert done.returncode == 0
    paragraphs = done.stdout.split("\n\n")
    assert paragraphs[0].startswith(f"usage: strictcall {' '.join(command)}")
    description = paragraphs[1]
    assert not description.startswith(("options:", "positional arguments:"))


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (["call"], ["--identity"]),
        (["tokens", "create"], ["--identity"]),
        (["notes", "add"], ["--owner", "--text"]),
        (["notes", "list"], ["--owner"]),
    ],
)
def test_identity_owner_and_text_have_help(command: list[str], flags: list[str]) -> None:
    page = run(*command, "--help").stdout
    for flag in flags:
        (line,) = [line for line in page.splitlines() if line.strip().startswith(flag)]
        metavar = flag.removeprefix("--").upper()
        assert line.strip() != f"{flag} {metavar}", f"{flag} has no help"


def test_the_top_level_help_describes_the_demo_without_the_seeds_name() -> None:
    page = run("--help").stdout
    (demo,) = [line for line in page.splitlines() if line.strip().startswith("demo ")]
    assert "seed" not in page
    assert len(demo.split()) > 3
