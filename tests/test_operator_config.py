"""A federation's config file as an operator gets it wrong: every fault one line naming the
file's line (a syntax error) or key, what to write instead, and exit 2 (as a misused flag); a
program that is not there refused before anything is served, by `federate` and `proxy` alike."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from servers import strictcall

EXIT_USAGE = 2


def federate(config: Path, tmp_path: Path, *, stdio: bool = True) -> tuple[int, str]:
    where = ["--stdio", "--identity", "u1"] if stdio else ["--port", "0"]
    done = strictcall(
        "federate", "--config", str(config), "--db", str(tmp_path / "db.sqlite3"), *where
    )
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    return done.returncode, done.stderr


PYTHON = json.dumps(sys.executable)


@pytest.mark.parametrize("stdio", [True, False], ids=["stdio", "http"])
def test_a_syntax_error_names_its_line_and_exits_2(tmp_path: Path, stdio: bool) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[upstreams.a]\ncommand = {PYTHON}\ntimeout = \n", encoding="utf-8")
    status, stderr = federate(config, tmp_path, stdio=stdio)
    assert status == EXIT_USAGE
    assert len(stderr.splitlines()) == 1
    assert "line 3" in stderr and str(config) in stderr


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (f"[upstream.a]\ncommand = {PYTHON}\n", "upstream"),
        (f"[upstreams.a]\ncommand = {PYTHON}\ncomand = 1\n", "comand"),
        ("[upstreams.a]\ntimeout = 5\n", "url ="),
        (f'[upstreams.a]\ncommand = {PYTHON}\nurl = "http://127.0.0.1:1/mcp"\n', "url ="),
    ],
    ids=["unknown-table", "unknown-key", "neither-command-nor-url", "both"],
)
def test_every_config_fault_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, text: str, named: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    for stdio in (True, False):
        status, stderr = federate(config, tmp_path, stdio=stdio)
        assert status == EXIT_USAGE
        assert len(stderr.splitlines()) == 1 and named in stderr


def test_neither_command_nor_url_says_what_to_write(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[upstreams.a]\ntimeout = 5\n", encoding="utf-8")
    _, stderr = federate(config, tmp_path)
    assert "command =" in stderr and "url =" in stderr


def test_a_program_that_is_not_there_is_a_config_error_before_serving(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server"
    config = tmp_path / "c.toml"
    config.write_text(
        f"[upstreams.ok]\ncommand = {PYTHON}\n"
        f"[upstreams.gone]\ncommand = {json.dumps(str(missing) + ' --stdio')}\n",
        encoding="utf-8",
    )
    for stdio in (True, False):
        status, stderr = federate(config, tmp_path, stdio=stdio)
        assert status == EXIT_USAGE
        assert len(stderr.splitlines()) == 1
        assert "upstreams.gone.command" in stderr and "no-such-server" in stderr
    assert not (tmp_path / "db.sqlite3").exists()  # refused before the store was opened


def test_proxy_refuses_a_program_that_is_not_there_with_the_same_exit(tmp_path: Path) -> None:
    done = strictcall(
        "proxy",
        "--upstream-cmd",
        str(tmp_path / "no-such-server"),
        "--stdio",
        "--identity",
        "u1",
        "--db",
        str(tmp_path / "db.sqlite3"),
    )
    assert done.returncode == EXIT_USAGE
    assert len(done.stderr.splitlines()) == 1 and "no-such-server" in done.stderr
    assert "Traceback" not in done.stderr
