"""The real console commands, run as processes: `python -m strictcall` and `strictcall`."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from strictcall import errors, handle
from strictcall.cli.parser import main
from strictcall.core.jsontext import MAX_SIZE
from strictcall.errors import ErrorKind

MODULE = [sys.executable, "-m", "strictcall"]
SCRIPT = [str(Path(sys.executable).with_name("strictcall"))]
ENTRY_POINTS = pytest.mark.parametrize("command", [MODULE, SCRIPT], ids=["module", "script"])

DEMO_OUTPUT = (
    '{"case": "valid", "ok": true, "call_id": "call-1", "result": {"note_id": "n1", "text": "退款窗口为 7 天。"}}\n'  # noqa: E501
    '{"case": "invalid_json", "ok": false, "call_id": "call-1", "error": {"code": "invalid_json", "stage": "parse", "retryable": false}}\n'  # noqa: E501
    '{"case": "extra_field", "ok": false, "call_id": "call-1", "error": {"code": "invalid_arguments", "stage": "shape", "retryable": false}}\n'  # noqa: E501
    '{"case": "wrong_owner", "ok": false, "call_id": "call-1", "error": {"code": "forbidden_or_missing", "stage": "resource", "retryable": false}}\n'  # noqa: E501
).encode()
"""Seed 002's printed demo, as the bytes a terminal receives."""

VALID = '{"name":"read_note","arguments":{"note_id":"n1"}}'
HOSTILE_LOCALE = {"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}


def run(
    args: list[str | bytes],
    *,
    command: list[str] = MODULE,
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run the command to completion; it must never print a traceback."""
    done = subprocess.run(
        [*command, *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    assert b"Traceback" not in done.stderr
    return done


def answer_of(done: subprocess.CompletedProcess[bytes]) -> Any:
    """The one JSON line the command printed."""
    assert done.stdout.endswith(b"\n")
    assert done.stdout.count(b"\n") == 1
    return json.loads(done.stdout.decode("utf-8"))


def refused(kind: ErrorKind, call_id: str = "call-1") -> dict[str, Any]:
    return {
        "ok": False,
        "call_id": call_id,
        "error": {"code": kind.code, "stage": kind.stage.value, "retryable": kind.retryable},
    }


# --- demo --------------------------------------------------------------------------------------


@ENTRY_POINTS
@pytest.mark.parametrize("env", [{}, HOSTILE_LOCALE], ids=["default-locale", "c-locale-ascii"])
def test_demo_prints_the_seeds_four_lines_byte_for_byte(
    command: list[str], env: dict[str, str]
) -> None:
    done = run(["demo"], command=command, env=env)
    assert done.returncode == 0
    assert done.stdout == DEMO_OUTPUT
    assert done.stderr == b""


# --- call --------------------------------------------------------------------------------------


@ENTRY_POINTS
def test_call_that_succeeds_prints_the_answer_and_exits_0(command: list[str]) -> None:
    done = run(["call", "--identity", "u1", VALID], command=command)
    assert done.returncode == 0
    assert answer_of(done) == handle(VALID, "u1")
    assert "退款窗口为 7 天。".encode() in done.stdout


def test_call_output_is_utf8_whatever_the_locale() -> None:
    done = run(["call", "--identity", "u1", VALID], env=HOSTILE_LOCALE)
    assert done.returncode == 0
    assert answer_of(done) == handle(VALID, "u1")
    assert "退款窗口为 7 天。".encode() in done.stdout


@pytest.mark.parametrize(
    ("raw", "identity", "kind"),
    [
        ('{"name":', "u1", errors.INVALID_JSON),
        ("[]", "u1", errors.UNKNOWN_TOOL),
        ('{"name":"read_note","arguments":{"note_id":" "}}', "u1", errors.INVALID_ARGUMENTS),
        (VALID, "u2", errors.FORBIDDEN_OR_MISSING),
    ],
    ids=["parse", "route", "shape", "resource"],
)
def test_call_that_is_refused_prints_the_answer_and_exits_nonzero(
    raw: str, identity: str, kind: ErrorKind
) -> None:
    done = run(["call", "--identity", identity, raw])
    assert done.returncode != 0
    assert answer_of(done) == refused(kind)


def test_call_id_is_echoed() -> None:
    done = run(["call", "--identity", "u1", "--call-id", "req-42", VALID])
    assert answer_of(done)["call_id"] == "req-42"
    done = run(["call", "--call-id", "编号 7", "--identity", "u1", "[]"])
    assert answer_of(done) == refused(errors.UNKNOWN_TOOL, "编号 7")


@ENTRY_POINTS
def test_raw_dash_reads_the_call_from_stdin(command: list[str]) -> None:
    done = run(["call", "--identity", "u1", "-"], command=command, stdin=VALID.encode())
    assert done.returncode == 0
    assert answer_of(done) == handle(VALID, "u1")


def test_stdin_of_exactly_one_mebibyte_is_read_whole() -> None:
    raw = VALID.encode() + b" " * (MAX_SIZE - len(VALID))
    done = run(["call", "--identity", "u1", "-"], stdin=raw)
    assert done.returncode == 0
    assert answer_of(done) == handle(VALID, "u1")


HOSTILE_STDIN = {
    "empty": b"",
    "invalid-utf8": b'{"name":"read_note","arguments":{"note_id":"n\xff"}}',
    "utf16": VALID.encode("utf-16"),
    "nul-bytes": b"\x00" * 100,
    "deep-arrays": b"[" * 200_000,
    "deep-objects": b'{"a":' * 100_000,
    "int-5000-digits": b"9" * 5000,
    "nan": VALID.encode()[:-1] + b',"x":NaN}',
    "duplicate": b'{"name":"read_note","arguments":{"note_id":"n2","note_id":"n1"}}',
    "lone-surrogate": b'"\\ud800"',
    "text-after-call": VALID.encode() + b"\n" + VALID.encode(),
}


@pytest.mark.parametrize("stdin", HOSTILE_STDIN.values(), ids=HOSTILE_STDIN.keys())
def test_hostile_stdin_gets_invalid_json_and_no_traceback(stdin: bytes) -> None:
    done = run(["call", "--identity", "u1", "--call-id", "h", "-"], stdin=stdin)
    assert done.returncode == 1
    assert answer_of(done) == refused(errors.INVALID_JSON, "h")


def test_stdin_over_one_mebibyte_is_request_too_large() -> None:
    for stdin in (VALID.encode() + b" " * MAX_SIZE, b"\xff" * (3 * MAX_SIZE)):
        done = run(["call", "--identity", "u1", "-"], stdin=stdin)
        assert done.returncode == 1
        assert answer_of(done) == refused(errors.REQUEST_TOO_LARGE)


@pytest.mark.parametrize(
    "raw",
    [b"\xff", b'{"name":"read_note","arguments":{"note_id":"n\xe91"}}', b"[" * 100_000, b""],
    ids=["ff", "latin1-in-note-id", "deep", "empty"],
)
def test_hostile_raw_argument_gets_invalid_json_and_no_traceback(raw: bytes) -> None:
    done = run([b"call", b"--identity", b"u1", raw])
    assert done.returncode == 1
    assert answer_of(done) == refused(errors.INVALID_JSON)


USAGE_ERRORS: dict[str, list[str | bytes]] = {
    "no-command": [],
    "unknown-command": ["bogus"],
    "call-without-anything": ["call"],
    "call-without-identity": ["call", VALID],
    "call-without-raw": ["call", "--identity", "u1"],
    "identity-without-value": ["call", "--identity"],
    "demo-with-argument": ["demo", "extra"],
    "identity-not-utf8": ["call", "--identity", b"u\xff", VALID],
    "call-id-not-utf8": ["call", "--identity", "u1", "--call-id", b"\xff", VALID],
}


@pytest.mark.parametrize("args", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_usage_error_exits_2_with_a_message_and_no_traceback(args: list[str | bytes]) -> None:
    done = run(args)
    assert done.returncode == 2
    assert done.stdout == b""
    assert b"usage:" in done.stderr


def test_closed_stdin_reads_as_empty_text() -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *MODULE, "call", "--identity", "u1", "-"],
        capture_output=True,
        timeout=60,
    )
    assert b"Traceback" not in done.stderr
    assert done.returncode == 1
    assert answer_of(done) == refused(errors.INVALID_JSON)


@pytest.mark.parametrize(
    "args", [["demo"], ["call", "--identity", "u1", VALID]], ids=["demo", "call"]
)
def test_closed_stdout_exits_nonzero_without_a_traceback(args: list[str]) -> None:
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *MODULE, *args],
        stderr=subprocess.PIPE,
        timeout=60,
    )
    assert b"Traceback" not in done.stderr
    assert done.returncode != 0


# --- in process: the same entry point, with its streams passed in --------------------------------


class Unreadable(io.BytesIO):
    def read(self, size: int | None = -1, /) -> bytes:
        raise OSError(errno.EBADF, "Bad file descriptor")


class ClosedPipe(io.BytesIO):
    def write(self, data: Any, /) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def main_in_process(args: list[str], stdin: bytes = b"") -> tuple[int, bytes]:
    out = io.BytesIO()
    status = main(args, stdin=io.BytesIO(stdin), stdout=out)
    return status, out.getvalue()


def test_main_demo_writes_the_seeds_lines() -> None:
    assert main_in_process(["demo"]) == (0, DEMO_OUTPUT)


def test_main_call_answers_and_sets_the_exit_status() -> None:
    status, out = main_in_process(["call", "--identity", "u1", VALID])
    assert (status, json.loads(out)) == (0, handle(VALID, "u1"))
    status, out = main_in_process(["call", "--identity", "u1", "--call-id", "c", "-"], b"\xff")
    assert (status, json.loads(out)) == (1, refused(errors.INVALID_JSON, "c"))


def test_main_usage_error_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_in_process(["call"]) == (2, b"")
    assert "usage:" in capsys.readouterr().err
    # an argument that was not valid UTF-8 reaches Python as lone surrogates
    assert main_in_process(["call", "--identity", "u\udcff", VALID]) == (2, b"")
    assert "usage:" in capsys.readouterr().err


def test_main_unreadable_stdin_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.BytesIO()
    assert main(["call", "--identity", "u1", "-"], stdin=Unreadable(), stdout=out) == 2
    assert out.getvalue() == b""
    assert "standard input" in capsys.readouterr().err


def test_main_broken_pipe_exits_1_quietly() -> None:
    assert main(["demo"], stdout=ClosedPipe()) == 1
    assert main(["call", "--identity", "u1", VALID], stdout=ClosedPipe()) == 1


def test_main_with_closed_standard_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["call", "--identity", "u1", "-"], stdout=out) == 1
    assert json.loads(out.getvalue()) == refused(errors.INVALID_JSON)
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["demo"]) == 1
