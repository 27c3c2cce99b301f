"""examples/: the runnable examples run and answer as they say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from strictcall import errors

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_tools_demo_prints_one_json_answer_per_case() -> None:
    lines = run_example("tools_demo.py")
    by_case = {line["case"]: line for line in lines}
    assert len(by_case) == len(lines) >= 5
    assert [line["call_id"] for line in lines] == [f"call-{n}" for n in range(1, len(lines) + 1)]

    assert by_case["valid"]["ok"] is True
    assert by_case["valid"]["result"] == {"ticket_id": "T-0001", "priority": "urgent"}
    assert by_case["decorated_valid"]["ok"] is True

    expected = {
        "shape_unknown_member": errors.INVALID_ARGUMENTS,
        "shape_integer": errors.INVALID_ARGUMENTS,
        "decorated_enum": errors.INVALID_ARGUMENTS,
        "forbidden": errors.FORBIDDEN_OR_MISSING,
        "missing": errors.FORBIDDEN_OR_MISSING,
        "busy": errors.BUSY,
        "output_withheld": errors.INVALID_TOOL_RESULT,
        "unknown_tool": errors.UNKNOWN_TOOL,
        "invalid_json": errors.INVALID_JSON,
    }
    for case, kind in expected.items():
        error = by_case[case]["error"]
        assert by_case[case]["ok"] is False
        assert (error["code"], error["stage"], error["retryable"]) == (
            kind.code,
            kind.stage.value,
            kind.retryable,
        )

    assert by_case["shape_unknown_member"]["error"]["pointer"] == "/arguments/order/admin"
    assert by_case["shape_integer"]["error"]["pointer"] == "/arguments/order/items"
    assert by_case["busy"]["error"]["retry_after_ms"] == 2000
    assert by_case["forbidden"]["error"] == by_case["missing"]["error"]
