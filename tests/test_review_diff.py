"""`strictcall lint --diff BASE`: every presence-to-truth refactor in a set of refactor diffs
is flagged, with the old line beside the new and check's counterexample; neutral refactors
give nothing. Each case is a real git repository made in a temporary folder."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from strictcall.cli.parser import main
from strictcall.review.commands import EXIT_DIFFERENT, EXIT_SAME, EXIT_TROUBLE
from strictcall.review.diff import review_change
from strictcall.review.rules import GET_IS_NONE, GET_OR_DEFAULT, GET_TRUTH_TEST, READ_OR_DEFAULT

PRESENCE_TO_TRUTH: list[tuple[str, str, str, str]] = [
    (
        "seed-in-to-get",
        """
        def read(reply):
            if "result" in reply:
                return {"status": "ok", "value": reply["result"]}
            return {"status": "missing"}
        """,
        """
        def read(reply):
            if reply.get("result"):
                return {"status": "ok", "value": reply["result"]}
            return {"status": "missing"}
        """,
        GET_TRUTH_TEST.id,
    ),
    (
        "get-default-to-or",
        """
        def timeout_of(config):
            return config.get("timeout", 30)
        """,
        """
        def timeout_of(config):
            return config.get("timeout") or 30
        """,
        GET_OR_DEFAULT.id,
    ),
    (
        "is-none-to-or",
        """
        def timeout_of(config):
            timeout = config.get("timeout")
            return 30 if timeout is None else timeout
        """,
        """
        def timeout_of(config):
            timeout = config.get("timeout")
            return timeout or 30
        """,
        READ_OR_DEFAULT.id,
    ),
    (
        "is-not-none-to-truth",
        """
        def read(reply):
            if reply.get("result") is not None:
                return reply["result"]
            return "missing"
        """,
        """
        def read(reply):
            if reply.get("result"):
                return reply["result"]
            return "missing"
        """,
        GET_TRUTH_TEST.id,
    ),
    (
        "attribute-is-none-to-or",
        """
        def deadline(options):
            return 60.0 if options.timeout is None else options.timeout
        """,
        """
        def deadline(options):
            return options.timeout or 60.0
        """,
        READ_OR_DEFAULT.id,
    ),
    (
        "in-to-walrus",
        """
        def count_of(reply):
            if "count" in reply:
                return {"count": reply["count"]}
            return {"error": "none"}
        """,
        """
        def count_of(reply):
            if count := reply.get("count"):
                return {"count": count}
            return {"error": "none"}
        """,
        GET_TRUTH_TEST.id,
    ),
    (
        "not-in-to-not-get",
        """
        def check(reply):
            if "id" not in reply:
                return "invalid"
            return reply["id"]
        """,
        """
        def check(reply):
            if not reply.get("id"):
                return "invalid"
            return reply["id"]
        """,
        GET_TRUTH_TEST.id,
    ),
]
"""(id, old, new, the rule the new line breaks)."""

NEUTRAL: list[tuple[str, str, str]] = [
    (
        "rename",
        """
        def read(reply):
            if "result" in reply:
                return reply["result"]
            return None
        """,
        """
        def read(message):
            if "result" in message:
                return message["result"]
            return None
        """,
    ),
    (
        "docstring-and-format",
        """
        def timeout_of(config):
            return config.get("timeout", 30)
        """,
        """
        def timeout_of(config):
            \"\"\"The timeout, 30 when none is set.\"\"\"
            return config.get(
                "timeout", 30
            )
        """,
    ),
    (
        "truth-test-already-there",
        """
        def read(reply):
            if reply.get("result"):
                return reply["result"]
            return None
        """,
        """
        def read(reply):
            if reply.get("result"):
                value = reply["result"]
                return value
            return None
        """,
    ),
    (
        "truth-to-presence",
        """
        def read(reply):
            if reply.get("result"):
                return reply["result"]
            return None
        """,
        """
        def read(reply):
            if "result" in reply:
                return reply["result"]
            return None
        """,
    ),
    (
        "is-none-to-not-in",
        """
        def fill(config):
            if config.get("timeout") is None:
                config["timeout"] = 30
            return config
        """,
        """
        def fill(config):
            if "timeout" not in config:
                config["timeout"] = 30
            return config
        """,
    ),
    (
        "extract-helper",
        """
        def read(reply):
            if "result" in reply:
                return {"status": "ok", "value": reply["result"]}
            return {"status": "missing"}
        """,
        """
        def has_result(reply):
            return "result" in reply


        def read(reply):
            if has_result(reply):
                return {"status": "ok", "value": reply["result"]}
            return {"status": "missing"}
        """,
    ),
    (
        "unrelated-truth-test-added",
        """
        def read(reply):
            if "result" in reply:
                return reply["result"]
            return None
        """,
        """
        def read(reply):
            if "result" in reply:
                return reply["result"]
            if reply.get("error"):
                raise RuntimeError("failed")
            return None
        """,
    ),
]


def git(folder: Path, *arguments: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=60,
    )


def repository(tmp_path: Path, old: str, new: str) -> Path:
    """A git repository whose HEAD holds `old` in tool.py and whose work tree holds `new`."""
    git(tmp_path, "init", "-q")
    (tmp_path / "tool.py").write_text(textwrap.dedent(old))
    git(tmp_path, "add", "tool.py")
    git(tmp_path, "commit", "-q", "-m", "old")
    (tmp_path / "tool.py").write_text(textwrap.dedent(new))
    return tmp_path


def lint_diff(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(folder)
    out = io.BytesIO()
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    status = main(["lint", "--diff", "HEAD", *args], stdout=out)
    return status, out.getvalue().decode("utf-8"), err.getvalue()


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [pytest.param(old, new, rule, id=name) for name, old, new, rule in PRESENCE_TO_TRUTH],
)
def test_every_presence_to_truth_refactor_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, rule: str
) -> None:
    folder = repository(tmp_path, old, new)
    status, out, _ = lint_diff(folder, monkeypatch, "--format", "json")
    assert status == EXIT_DIFFERENT
    [finding] = json.loads(out)["findings"]
    assert finding["rule"] == rule
    assert finding["old"]["text"] != finding["new"]["text"]
    assert finding["counterexample"].startswith("counterexample: ")


@pytest.mark.parametrize(
    ("old", "new"), [pytest.param(old, new, id=name) for name, old, new in NEUTRAL]
)
def test_a_neutral_refactor_gives_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str
) -> None:
    folder = repository(tmp_path, old, new)
    assert lint_diff(folder, monkeypatch) == (EXIT_SAME, "", "")


def test_the_seeds_refactor_shows_old_and_new_and_the_counterexample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, old, new, _ = PRESENCE_TO_TRUTH[0]
    folder = repository(tmp_path, old, new)
    status, out, _ = lint_diff(folder, monkeypatch)
    assert status == EXIT_DIFFERENT
    first, old_line, new_line, example = out.splitlines()
    assert first.startswith("tool.py:3:8: SC101 ")
    assert old_line.split("|")[1].strip() == 'if "result" in reply:'
    assert new_line.split("|")[1].strip() == 'if reply.get("result"):'
    assert example.strip().startswith('counterexample: {"result": 0}: OLD returned')


def test_the_half_fix_is_flagged_as_a_null_read_as_missing() -> None:
    body = '        return {"value": reply["result"]}\n    return "missing"\n'
    old = 'def read(reply):\n    if "result" in reply:\n' + body
    new = 'def read(reply):\n    if reply.get("result") is not None:\n' + body
    [changed] = review_change("reader.py", old, new, {2})
    assert changed.finding.rule is GET_IS_NONE
    assert changed.counterexample.startswith('counterexample: {"result": null}')


def test_a_change_outside_a_function_is_flagged_without_a_counterexample() -> None:
    old = 'TIMEOUT = CONFIG.get("timeout", 30)\n'
    new = 'TIMEOUT = CONFIG.get("timeout") or 30\n'
    [changed] = review_change("settings.py", old, new, {1})
    assert changed.finding.rule is GET_OR_DEFAULT
    assert "not in a function" in changed.counterexample


def test_a_revision_git_does_not_know_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = repository(tmp_path, "x = 1\n", "x = 2\n")
    monkeypatch.chdir(folder)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    status = main(["lint", "--diff", "no-such-revision"], stdout=io.BytesIO())
    assert status == EXIT_TROUBLE
    assert err.getvalue().count("\n") == 1
