"""`strictcall lint --run`: each finding's function run beside its presence reading; kept with
the input that tells them apart, dropped when none does, kept with a note when it cannot run."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from strictcall.cli.parser import main
from strictcall.review.commands import EXIT_DIFFERENT, EXIT_SAME
from strictcall.review.rules import GET_IS_NONE, GET_TRUTH_TEST

ROOT = Path(__file__).resolve().parent.parent


def run_lint(*args: str) -> tuple[int, list[dict[str, object]]]:
    out = io.BytesIO()
    real_err, sys.stderr = sys.stderr, io.StringIO()
    try:
        status = main(["lint", "--format", "json", *args], stdout=out)
    finally:
        sys.stderr = real_err
    findings: list[dict[str, object]] = json.loads(out.getvalue())["findings"]
    return status, findings


def test_run_shows_each_example_finding_with_check_s_counterexample() -> None:
    status, findings = run_lint("--run", str(ROOT / "examples" / "review"))
    assert status == EXIT_DIFFERENT
    assert [f["rule"] for f in findings] == [GET_TRUTH_TEST.id, GET_IS_NONE.id, GET_IS_NONE.id]
    for finding in findings:
        assert str(finding["counterexample"]).startswith("check ran it: ")
    assert '{"result": 0}' in str(findings[0]["counterexample"])


def test_run_drops_a_finding_no_input_tells_apart(tmp_path: Path) -> None:
    same = tmp_path / "same.py"
    same.write_text(
        "def count(d):\n"
        '    value = d.get("count")\n'
        "    if not value:\n"
        '        return {"count": value}\n'
        '    return {"count": value}\n'
    )
    status, findings = run_lint(str(same))
    assert status == EXIT_DIFFERENT and len(findings) == 1  # the code shows it...
    assert run_lint("--run", str(same)) == (EXIT_SAME, [])  # ...and running it does not


def test_run_keeps_a_finding_it_cannot_run_and_says_why(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(
        'raise RuntimeError("needs a service")\n\n\n'
        "def read(reply):\n"
        '    if reply.get("result"):\n'
        '        return reply["result"]\n'
        "    return None\n"
    )
    status, [finding] = run_lint("--run", str(broken))
    assert status == EXIT_DIFFERENT
    assert "(not run: cannot be imported: RuntimeError" in str(finding["counterexample"])
