"""The README's commands run exactly as written and print what it shows.

Every ```console block is run, command by command (`$ ` lines, in one bash session per block,
all blocks in one fresh directory in README order), and its output compared with the lines
shown: `...` in a line stands for any text, a line of `...` alone for any lines. The `make run`
block is checked against a real `strictcall serve --demo`, the curl lines it prints and the
README's curl block are run against it (on the port it got instead of 8765), and the Python
MCP client snippet is run as written and prints what the README says.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from doc_pages import documented
from servers import RunningServer, start_server
from strictcall.cli.commands import _prepare_demo
from strictcall.storage.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
README = documented()
BIN = Path(sys.executable).parent
README_BASE = "http://127.0.0.1:8765"
MARKER = "@@readme-command@@"


@dataclass
class Block:
    """One fenced block of the README, with the `<!-- readme-test: ... -->` note before it."""

    note: str | None
    language: str
    lines: list[str]


def blocks() -> list[Block]:
    found = []
    pattern = r"(?:<!-- readme-test: (.*?) -->\n)?```(\w*)\n(.*?)```"
    for match in re.finditer(pattern, README, re.S):
        found.append(Block(match.group(1), match.group(2), match.group(3).splitlines()))
    return found


def noted(note: str) -> Block:
    return next(block for block in blocks() if block.note == note)


def block_after(block: Block, language: str) -> Block:
    """The first block of `language` after `block`."""
    every = blocks()
    start = every.index(block)
    return next(b for b in every[start + 1 :] if b.language == language)


def commands_of(block: Block) -> list[tuple[str, list[str]]]:
    """Each `$ ` command of a console block with the output lines shown after it."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def line_matches(expected: str, actual: str) -> bool:
    return re.fullmatch(".*?".join(map(re.escape, expected.split("..."))), actual) is not None


def lines_match(expected: list[str], actual: list[str]) -> bool:
    """Whether `actual` is `expected`, a `...` line standing for any lines (zero or more)."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(lines_match(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return (
        bool(actual)
        and line_matches(expected[0], actual[0])
        and lines_match(expected[1:], actual[1:])
    )


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "STRICTCALL_DB"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_console(block: Block, cwd: Path, base_url: str = README_BASE) -> None:
    """Run a console block's commands in one bash session and compare each one's output."""
    steps = commands_of(block)
    script = "".join(
        f"printf '\\n{MARKER}\\n'\n{command.replace(README_BASE, base_url)} 2>&1\n"
        for command, _ in steps
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    outputs = done.stdout.split(f"\n{MARKER}\n")[1:]
    assert len(outputs) == len(steps), done.stdout + done.stderr
    for (command, expected), output in zip(steps, outputs, strict=True):
        actual = output.splitlines()
        assert "Traceback" not in output
        shown = [line.replace(README_BASE, base_url) for line in expected]
        assert lines_match(shown, actual), f"$ {command}\nexpected {shown!r}\nactual {actual!r}"


def is_served(block: Block) -> bool:
    """A console block that needs `make run`'s server (it uses curl)."""
    return any("curl " in command for command, _ in commands_of(block))


def test_every_console_block_runs_as_written_and_prints_what_is_shown(tmp_path: Path) -> None:
    console = [b for b in blocks() if b.language == "console" and b.note != "make run"]
    assert len(console) >= 5
    # the README's commands run from the project's root: its examples are there
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for block in console:
        if not is_served(block):
            run_console(block, tmp_path)


def test_the_line_matcher_can_fail() -> None:
    assert lines_match(["a ... c", "..."], ["a b c", "d", "e"])
    assert not lines_match(["a ... c"], ["a b d"])
    assert not lines_match(["x"], ["x", "y"])


@pytest.fixture
def demo(tmp_path: Path) -> RunningServer:
    return start_server(tmp_path / "strictcall.sqlite3", "--demo")


def test_make_run_prints_what_the_readme_shows_and_its_curl_lines_answer_as_shown(
    demo: RunningServer,
) -> None:
    try:
        block = noted("make run")
        (command, expected), *_ = commands_of(block)
        assert command == "make run"
        # the lines before the one `...` are the first run's install messages
        served = expected[expected.index("...") + 1 :]
        shown = [line.replace(README_BASE, demo.base_url) for line in served]
        # make run's store is ./strictcall.sqlite3; this server's is the same name elsewhere
        db = Path(demo.db)
        printed = [line.rstrip("\n").replace(str(db), db.name) for line in demo.lines]
        assert lines_match(shown, printed), f"{shown!r}\n{printed!r}"
        curls = [line.split("): ", 1)[1] for line in printed if line.startswith("try (")]
        answers = []
        for curl in curls:
            done = subprocess.run(
                ["sh", "-c", curl], capture_output=True, text=True, timeout=60, check=True
            )
            answers.append(done.stdout)
        assert lines_match(noted("the answers to the try lines").lines, answers)
        for served_block in (b for b in blocks() if b.language == "console" and is_served(b)):
            run_console(served_block, db.parent, demo.base_url)
    finally:
        assert demo.stop(signal.SIGINT) == 0


def test_the_python_mcp_client_snippet_runs_and_prints_what_is_shown(tmp_path: Path) -> None:
    (tmp_path / ".venv").symlink_to(BIN.parent, target_is_directory=True)
    store = SQLiteStore(tmp_path / "strictcall.sqlite3")
    try:
        _prepare_demo(store)  # what make run does to a fresh store
    finally:
        store.close()
    snippet = noted("mcp client")
    (tmp_path / "client.py").write_text("\n".join(snippet.lines) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "client.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == block_after(snippet, "text").lines
