"""No command prints a character a terminal acts on from text someone else chose (issue 29:
a forged field cannot move the cursor in any command): `tokens create`, `tokens list` and
`tokens revoke` show an identity escaped, `call` shows a note a model wrote as JSON with every
control, C1 and format character escaped, which reads back the same."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from servers import strictcall
from strictcall.cli.parser import EXIT_OK

HOSTILE_IDENTITY = "u\x1b[2J\nforged\x9b2J\u202e"
HOSTILE_TEXT = "note\x1b[2J\x9b2J\u202eevil\u2028line\x07"
UNSAFE = frozenset({"Cc", "Cf", "Zl", "Zp"})


def assert_terminal_safe(text: str) -> None:
    """Nothing but printable characters and the lines' own newlines."""
    for line in text.splitlines():
        unsafe = [c for c in line if unicodedata.category(c) in UNSAFE]
        assert unsafe == [], repr(line)
    assert text.count("\r") == 0


def test_token_commands_show_an_identity_escaped(tmp_path: Path) -> None:
    db = str(tmp_path / "s.sqlite3")
    created = strictcall("tokens", "create", "--identity", HOSTILE_IDENTITY, "--db", db)
    assert created.returncode == EXIT_OK, created.stderr
    assert_terminal_safe(created.stdout)
    assert len(created.stdout.splitlines()) == 2  # the line about it, the token
    listed = strictcall("tokens", "list", "--db", db)
    assert listed.returncode == EXIT_OK
    assert_terminal_safe(listed.stdout)
    assert len(listed.stdout.splitlines()) == 2  # the header, the token's row
    revoked = strictcall("tokens", "revoke", "--identity", HOSTILE_IDENTITY, "--db", db)
    assert revoked.returncode == EXIT_OK, revoked.stderr
    assert_terminal_safe(revoked.stdout)
    missing = strictcall("tokens", "revoke", "--identity", HOSTILE_IDENTITY, "--db", db)
    assert missing.returncode != EXIT_OK
    assert_terminal_safe(missing.stderr)


def test_call_shows_what_a_model_wrote_as_json_that_moves_no_cursor(tmp_path: Path) -> None:
    db = str(tmp_path / "s.sqlite3")
    raw = json.dumps({"name": "create_note", "arguments": {"text": HOSTILE_TEXT}})
    done = strictcall("call", "--identity", "u1", "--db", db, raw)
    assert done.returncode == EXIT_OK, done.stderr
    assert_terminal_safe(done.stdout)
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["result"]["text"] == HOSTILE_TEXT  # escaped, not changed
