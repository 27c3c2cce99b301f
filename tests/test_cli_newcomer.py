"""What a newcomer meets at the command line: refusals that name what they did, one-line
failures in strictcall's own words with a non-zero exit, and commands that say what they do.

Every command runs as a real process; a store that cannot be opened is a real file made so.
"""

from __future__ import annotations

import importlib.metadata
import os
import queue
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import strictcall
from strictcall.cli.parser import build_parser

MODULE = [sys.executable, "-m", "strictcall"]
ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 20.0


def run(
    *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run the command line to completion; it never prints a traceback."""
    done = subprocess.run(
        [*prefix, *MODULE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr
    return done


def one_line(text: str) -> str:
    """The only line of `text`."""
    lines = text.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --- 1. ports ----------------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "1e3", "eighty"])
def test_a_port_outside_0_to_65535_is_refused_by_the_argument_parser(
    port: str, tmp_path: Path
) -> None:
    db = tmp_path / "never.sqlite3"
    done = run("serve", "--port", port, "--db", str(db))
    assert done.returncode == 2
    assert "--port" in done.stderr and "usage:" in done.stderr
    assert done.stdout == ""
    assert not db.exists()  # refused before anything was opened


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "1e3", "eighty"])
def test_the_proxy_refuses_a_port_outside_0_to_65535_too(port: str) -> None:
    done = run("proxy", "--upstream-cmd", "true", "--port", port)
    assert done.returncode == 2
    assert "--port" in done.stderr and "usage:" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", ["serve", "proxy"])
@pytest.mark.parametrize("port", [0, 1, 8765, 65535])
def test_every_port_from_0_to_65535_is_accepted(command: str, port: int) -> None:
    upstream = ["--upstream-cmd", "true"] if command == "proxy" else []
    args = build_parser().parse_args([command, *upstream, "--port", str(port)])
    assert args.port == port


# --- 7. refuse or accept consistently ------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["tokens", "create", "--identity", ""],
        ["notes", "add", "--owner", "", "--text", "x"],
        ["notes", "list", "--owner", ""],
        ["call", "--identity", "", '{"name":"read_note","arguments":{"note_id":"n1"}}'],
        ["serve", "--mcp-stdio", "--identity", ""],
    ],
    ids=["tokens", "notes-add", "notes-list", "call", "mcp-stdio"],
)
def test_an_empty_identity_or_owner_is_refused(args: list[str], tmp_path: Path) -> None:
    db = tmp_path / "never.sqlite3"
    extra = [] if args[0] == "call" else ["--db", str(db)]
    done = run(*args, *extra)
    assert done.returncode == 2
    assert "must not be empty" in done.stderr
    assert not db.exists()


def test_audit_refuses_a_negative_limit_and_takes_0_as_no_recent_calls(tmp_path: Path) -> None:
    db = str(tmp_path / "audit.sqlite3")
    refused = run("audit", "--limit", "-1", "--db", db)
    assert refused.returncode == 2
    assert "--limit" in refused.stderr
    assert run("notes", "add", "--owner", "u1", "--text", "a", "--db", db).returncode == 0
    none = run("audit", "--limit", "0", "--db", db)
    assert none.returncode == 0
    assert "at most 0" in none.stdout


def test_identity_without_mcp_stdio_says_that_is_what_was_done(tmp_path: Path) -> None:
    done = run("serve", "--identity", "u1", "--port", "0", "--db", str(tmp_path / "x.sqlite3"))
    assert done.returncode == 2
    message = one_line(done.stderr)
    assert "--identity was given without --mcp-stdio" in message


def test_mcp_stdio_without_identity_says_it_needs_one(tmp_path: Path) -> None:
    done = run("serve", "--mcp-stdio", "--db", str(tmp_path / "x.sqlite3"))
    assert done.returncode == 2
    assert "--mcp-stdio needs --identity" in one_line(done.stderr)


def test_mcp_stdio_with_workers_says_workers_are_for_the_http_server(tmp_path: Path) -> None:
    db = str(tmp_path / "x.sqlite3")
    done = run("serve", "--mcp-stdio", "--identity", "u1", "--workers", "2", "--db", db)
    assert done.returncode == 2
    assert "--workers is for the HTTP server" in one_line(done.stderr)
    assert not (tmp_path / "x.sqlite3").exists()  # refused before the store is opened


@pytest.mark.parametrize(
    "flag",
    [
        ("--max-connections", "5"),
        ("--header-timeout", "3"),
        ("--max-in-flight", "2"),
        ("--allow-origin", "https://app.example"),
        ("--max-streams-per-identity", "1"),
        ("--max-rounds-per-identity", "3"),
        ("--round-wait", "9"),
    ],
)
def test_mcp_stdio_with_an_http_edge_flag_says_it_is_for_the_http_server(
    tmp_path: Path, flag: tuple[str, str]
) -> None:
    db = str(tmp_path / "x.sqlite3")
    done = run("serve", "--mcp-stdio", "--identity", "u1", *flag, "--db", db)
    assert done.returncode == 2
    assert f"{flag[0]} is for the HTTP server" in one_line(done.stderr)
    assert flag[1] not in done.stderr  # the value is never echoed
    assert not (tmp_path / "x.sqlite3").exists()  # refused before the store is opened


def test_an_empty_db_flag_and_an_empty_strictcall_db_are_both_refused(tmp_path: Path) -> None:
    flag = run("audit", "--db", "", env={"STRICTCALL_DB": str(tmp_path / "x.sqlite3")})
    assert flag.returncode == 2
    assert "--db" in flag.stderr
    variable = subprocess.run(
        [*MODULE, "audit"],
        capture_output=True,
        text=True,
        env={**os.environ, "STRICTCALL_DB": ""},
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert variable.returncode == 2
    assert "STRICTCALL_DB" in one_line(variable.stderr)
    assert not (tmp_path / "strictcall.sqlite3").exists()  # not read as "the default"


def test_strictcall_db_names_the_store_when_db_is_left_out(tmp_path: Path) -> None:
    db = tmp_path / "from-env.sqlite3"
    done = run("notes", "add", "--owner", "u1", "--text", "x", env={"STRICTCALL_DB": str(db)})
    assert done.returncode == 0
    assert db.exists()


# --- 8. failures in strictcall's own words ----------------------------------------------


def test_a_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--port", str(port), "--db", str(tmp_path / "s.sqlite3"))
    assert done.returncode == 1
    assert "already in use" in one_line(done.stderr)
    assert done.stdout == ""


def test_an_unknown_host_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = run(
        "serve", "--host", "no-such-host.invalid", "--port", "0", "--db", str(tmp_path / "s")
    )
    assert done.returncode == 1
    assert "unknown host" in one_line(done.stderr)


def test_an_address_not_of_this_machine_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = run("serve", "--host", "192.0.2.1", "--port", "0", "--db", str(tmp_path / "s"))
    assert done.returncode == 1
    assert "not an address of this machine" in one_line(done.stderr)


def without_root_powers() -> tuple[str, ...]:
    """A prefix that runs a command without the powers that let root ignore file modes (a
    non-root user needs none): root, tests run as here, would read and write anything."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to bind")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search")


STORE_COMMANDS = pytest.mark.parametrize(
    "command",
    [
        ["audit"],
        ["tokens", "create", "--identity", "u1"],
        ["notes", "list", "--owner", "u1"],
        ["serve", "--port", "0"],
    ],
    ids=["audit", "tokens", "notes", "serve"],
)


def store_failure(command: list[str], db: Path, prefix: tuple[str, ...] = ()) -> str:
    """The one line a command that cannot open `db` prints; it exits 1."""
    done = run(*command, "--db", str(db), prefix=prefix)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith(f"strictcall: cannot open the store at {db}: ")
    return line.split(f"{db}: ", 1)[1]


@STORE_COMMANDS
def test_a_store_in_a_missing_directory_says_the_directory_does_not_exist(
    command: list[str], tmp_path: Path
) -> None:
    why = store_failure(command, tmp_path / "nowhere" / "s.sqlite3")
    assert "does not exist" in why and str(tmp_path / "nowhere") in why


@STORE_COMMANDS
def test_a_file_that_is_not_a_database_says_so(command: list[str], tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_bytes(b"these are my notes, not a database\n" * 200)
    assert "not a database" in store_failure(command, db)


@STORE_COMMANDS
def test_a_store_this_user_cannot_read_says_permission_denied(
    command: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "closed.sqlite3"
    assert run("audit", "--db", str(db)).returncode == 0
    db.chmod(0)
    assert "permission denied" in store_failure(command, db, without_root_powers())


def test_a_directory_this_user_cannot_write_says_permission_denied(tmp_path: Path) -> None:
    directory = tmp_path / "closed"
    directory.mkdir(mode=0o555)
    why = store_failure(["audit"], directory / "s.sqlite3", without_root_powers())
    assert "permission denied" in why


@pytest.mark.parametrize(
    "command",
    [["tokens", "create", "--identity", "u1"], ["serve", "--port", "0"]],
    ids=["tokens", "serve"],
)
def test_a_read_only_store_says_read_only(command: list[str], tmp_path: Path) -> None:
    db = tmp_path / "ro.sqlite3"
    assert run("audit", "--db", str(db)).returncode == 0
    for sidecar in (tmp_path / "ro.sqlite3-wal", tmp_path / "ro.sqlite3-shm"):
        sidecar.unlink(missing_ok=True)
    db.chmod(0o444)
    assert "read-only" in store_failure(command, db, without_root_powers())


@pytest.fixture
def locked_db(tmp_path: Path) -> Iterator[Path]:
    """A store another process holds an exclusive lock on, for the test's duration."""
    db = tmp_path / "locked.sqlite3"
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE held (x)")
        yield db
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@STORE_COMMANDS
def test_a_locked_store_says_locked(command: list[str], locked_db: Path) -> None:
    assert "locked" in store_failure(command, locked_db)


# --- 9. the version ------------------------------------------------------------------------------


def test_version_flag_and_dunder_version_come_from_the_package_metadata() -> None:
    installed = importlib.metadata.version("strictcall")
    assert strictcall.__version__ == installed
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout == f"strictcall {installed}\n"


# --- 10. commands say what they do ---------------------------------------------------------------


def test_first_make_run_says_it_is_installing_before_it_does(tmp_path: Path) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    plan = subprocess.run(
        [make, "-n", "-C", str(ROOT), "run", f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    creating = next(i for i, line in enumerate(plan) if "-m venv" in line)
    assert any("echo" in line and "install" in line for line in plan[:creating])


def serve_lines(db: Path, *extra: str) -> tuple[subprocess.Popen[str], queue.Queue[str | None]]:
    """`serve --port 0` started, with its output lines as they come (None at the end)."""
    process = subprocess.Popen(
        [*MODULE, "serve", "--port", "0", "--db", str(db), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return process, lines


def lines_until(lines: queue.Queue[str | None], wanted: str) -> list[str]:
    """The lines read until one holding `wanted` (included), within the deadline."""
    seen: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if wanted in line:
            return seen
    raise AssertionError(f"never printed {wanted!r}: {seen!r}")


def test_serve_without_demo_says_how_to_make_a_token_and_ctrl_c_says_stopping_and_stopped(
    tmp_path: Path,
) -> None:
    process, lines = serve_lines(tmp_path / "s.sqlite3")
    try:
        started = lines_until(lines, "tokens create")
        assert any("listening on" in line for line in started)
        process.send_signal(signal.SIGINT)
        after = lines_until(lines, "stopped")
        assert any("stopping" in line for line in after)
        assert process.wait(timeout=DEADLINE_S) == 0
    finally:
        process.kill()
        process.wait(timeout=DEADLINE_S)


def test_notes_list_for_an_owner_with_none_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "n.sqlite3")
    assert run("notes", "add", "--owner", "u1", "--text", "x", "--db", db).returncode == 0
    done = run("notes", "list", "--owner", "u2", "--db", db)
    assert done.returncode == 0
    assert done.stdout == ""  # the listing stays empty for scripts; the words go to stderr
    assert "u2 has no notes" in one_line(done.stderr)
