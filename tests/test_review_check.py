"""`strictcall check`: counterexamples between two functions, smallest first, as the seed's
review finds them; the command's exit statuses, JSON and written regression tests."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import review_readers as readers
from strictcall.cli.parser import main
from strictcall.review.check import find_differences, probes_for
from strictcall.review.commands import EXIT_DIFFERENT, EXIT_SAME, EXIT_TROUBLE
from strictcall.review.contract import reply_arguments
from strictcall.review.hints import mine_hints
from strictcall.review.values import arguments, draw_arguments

READERS = Path(readers.__file__).resolve()
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "review"


def spec(name: str) -> str:
    return f"{READERS}:{name}"


def check(*args: str) -> tuple[int, str, str]:
    """Run `strictcall check` in this process; its exit status, stdout and stderr."""
    out = io.BytesIO()
    err = io.StringIO()
    real_err = sys.stderr
    sys.stderr = err
    try:
        status = main(["check", *args], stdout=out)
    finally:
        sys.stderr = real_err
    return status, out.getvalue().decode("utf-8"), err.getvalue()


def check_json(*args: str) -> tuple[int, dict[str, Any]]:
    status, out, _ = check(*args, "--json")
    return status, json.loads(out)


def search(old: Any, new: Any, max_examples: int) -> Any:
    hints = mine_hints([old, new], 1)
    return find_differences(
        old,
        new,
        arguments(1, hints),
        probes=probes_for(1, hints),
        keep=hints.mappings,
        keys=hints.keys,
        fast=lambda source: draw_arguments(source, 1, hints),
        max_examples=max_examples,
    )


def test_the_seeds_truth_refactor_gives_result_0_first() -> None:
    status, report = check_json(spec("read_by_presence"), spec("read_by_truth"))
    assert status == EXIT_DIFFERENT
    first = report["counterexamples"][0]
    assert first["input"] == {"result": 0}
    assert type(first["input"]["result"]) is int
    assert first["old"] == {"outcome": "returned", "value": {"status": "ok", "value": 0}}
    assert first["new"] == {"outcome": "returned", "value": {"status": "missing"}}
    inputs = [c["input"] for c in report["counterexamples"]]
    # every falsy value is among them, each told apart from the others
    falsies: tuple[object, ...] = (0, 0.0, False, "", [], {}, None)
    for falsy in falsies:
        assert any(type(i["result"]) is type(falsy) and i["result"] == falsy for i in inputs)


def test_the_seeds_is_not_none_refactor_differs_only_on_an_explicit_null() -> None:
    status, report = check_json(spec("read_by_presence"), spec("read_by_not_none"))
    assert status == EXIT_DIFFERENT
    assert [c["input"] for c in report["counterexamples"]] == [{"result": None}]


def test_the_seeds_counterexamples_are_found_within_a_few_hundred_inputs() -> None:
    # The "under 5 s" is a timing; tests bound the number of inputs instead.
    truth = search(readers.read_by_presence, readers.read_by_truth, 0)
    assert truth.counterexamples[0].args == ({"result": 0},)
    assert truth.inputs_run < 300
    null = search(readers.read_by_presence, readers.read_by_not_none, 0)
    assert [c.args for c in null.counterexamples] == [({"result": None},)]


def test_the_seeds_full_reader_and_its_refactors_differ_on_an_envelope_with_a_falsy_result() -> (
    None
):
    for refactor, wanted in (
        ("seed_interpret_by_truth", 0),
        ("seed_interpret_by_not_none", None),
    ):
        status, report = check_json(spec("seed_interpret"), spec(refactor), "--max-examples", "0")
        assert status == EXIT_DIFFERENT
        found = report["counterexamples"]
        assert any(
            c["input"]["reply"].get("jsonrpc") == "2.0"
            and "id" in c["input"]["reply"]
            and c["input"]["reply"]["id"] == c["input"]["expected_id"]
            and "result" in c["input"]["reply"]
            and type(c["input"]["reply"]["result"]) is type(wanted)
            and c["input"]["reply"]["result"] == wanted
            for c in found
        )


def test_two_equivalent_readers_show_no_difference_in_10000_inputs() -> None:
    report = search(readers.read_by_presence, readers.read_by_lookup, 10_000)
    assert report.counterexamples == ()
    assert report.inputs_run >= 10_000


def test_an_exception_is_compared_by_its_type() -> None:
    status, report = check_json(spec("read_by_presence"), spec("read_or_raise"))
    assert status == EXIT_DIFFERENT
    first = report["counterexamples"][0]
    assert first["input"] == {}
    assert first["new"] == {"outcome": "raised", "exception": "KeyError"}


def test_a_function_that_hangs_is_stopped_and_reported_in_one_line() -> None:
    status, out, err = check(spec("read_by_presence"), spec("read_forever"), "--timeout", "0.2")
    assert status == EXIT_DIFFERENT
    assert "did not return within 0.2 s" in out
    assert "Traceback" not in out + err


def test_a_change_to_the_input_is_a_difference() -> None:
    status, report = check_json(spec("read_by_presence"), spec("read_and_pop"))
    assert status == EXIT_DIFFERENT
    first = report["counterexamples"][0]
    assert first["new"]["mutated_input"] == {}
    assert "mutated_input" not in first["old"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("no_such_file.py:f", spec("read_by_presence")),
        (spec("no_such_function"), spec("read_by_presence")),
        ("no_such_module_anywhere:f", spec("read_by_presence")),
        (spec("read_by_presence"), "not-a-spec"),
        (spec("read_by_presence"), spec("read_pair")),
    ],
    ids=["missing-file", "missing-function", "missing-module", "bad-spec", "other-arity"],
)
def test_a_check_that_cannot_run_says_why_in_one_line_and_exits_2(old: str, new: str) -> None:
    status, out, err = check(old, new)
    assert status == EXIT_TROUBLE
    assert out == ""
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_module_that_fails_on_import_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('secret text')\ndef f(x): return x\n")
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def f(x:\n")
    for path in (broken, syntax):
        status, _, err = check(f"{path}:f", spec("read_by_presence"))
        assert status == EXIT_TROUBLE
        assert err.count("\n") == 1
        assert "secret text" not in err


def test_equivalent_functions_exit_0() -> None:
    status, out, _ = check(
        spec("read_by_presence"), spec("read_by_lookup"), "--max-examples", "300"
    )
    assert status == EXIT_SAME
    assert out.startswith("strictcall check: no difference in ")


def test_the_written_tests_pass_on_old_and_fail_on_new(tmp_path: Path) -> None:
    old = tmp_path / "reader.py"
    shutil.copy(EXAMPLES / "old_reader.py", old)
    written = tmp_path / "test_reader_regression.py"
    status, _, err = check(
        f"{old}:read_result",
        f"{EXAMPLES / 'new_reader.py'}:read_result",
        "--write-tests",
        str(written),
        "--max-examples",
        "200",
    )
    assert status == EXIT_DIFFERENT
    assert "wrote" in err

    def pytest_on(path: Path, env: dict[str, str] | None = None) -> int:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
            cwd=tmp_path,
            capture_output=True,
            env={**os.environ, **(env or {})},
            timeout=120,
            check=False,
        )
        return done.returncode

    assert pytest_on(written) == 0
    # the refactor lands in the same file: the kept test catches it
    shutil.copy(EXAMPLES / "new_reader.py", old)
    assert pytest_on(written) == 1
    shutil.copy(EXAMPLES / "old_reader.py", old)
    assert (
        pytest_on(written, {"STRICTCALL_TARGET": f"{EXAMPLES / 'new_reader.py'}:read_result"}) == 1
    )


def test_the_reply_contract_finds_the_truth_refactor_and_passes_its_own_function() -> None:
    status, report = check_json("--contract", "reply", spec("seed_interpret_by_truth"))
    assert status == EXIT_DIFFERENT
    assert report["old"] == "strictcall.client.reply:interpret_tool_reply"
    assert any(
        c["input"]["reply"].get("result") == 0 and c["new"]["value"] == {"status": "invalid"}
        for c in report["counterexamples"]
        if isinstance(c["input"]["reply"], dict) and c["new"]["outcome"] == "returned"
    )
    status, _ = check_json("--contract", "reply", spec("strict_reply"), "--max-examples", "1000")
    assert status == EXIT_SAME


def test_the_reply_contract_strategy_draws_matching_envelopes() -> None:
    from hypothesis import given, settings

    seen: list[bool] = []

    @settings(max_examples=200, database=None)
    @given(reply_arguments(2))
    def draw(args: tuple[Any, ...]) -> None:
        reply, expected = args
        seen.append(isinstance(reply, dict) and reply.get("id") == expected)

    draw()
    assert sum(seen) > len(seen) // 10


def test_check_without_hypothesis_names_the_extra_in_one_line() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "from strictcall.cli.parser import main\n"
        f"sys.exit(main(['check', {spec('read_by_presence')!r}, {spec('read_by_truth')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == EXIT_TROUBLE
    assert done.stderr.count("\n") == 1
    assert "strictcall[review]" in done.stderr


def test_importing_the_search_without_hypothesis_is_a_missing_extra() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "from strictcall.errors import MissingExtra\n"
        "try:\n    import strictcall.review.check\n"
        "except MissingExtra as exc:\n    print(exc.extra)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "review\n")


def test_the_console_command_checks_the_example_readers() -> None:
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("strictcall")),
            "check",
            f"{EXAMPLES / 'old_reader.py'}:read_result",
            f"{EXAMPLES / 'new_reader.py'}:read_result",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_DIFFERENT
    assert '1. input: {"result": 0}' in done.stdout
    assert "Traceback" not in done.stderr


def test_the_reply_contract_finds_the_seeds_null_result_in_the_half_fixed_reader() -> None:
    status, report = check_json(
        "--contract", "reply", f"{EXAMPLES / 'reply_reader.py'}:interpret_tool_reply"
    )
    assert status == EXIT_DIFFERENT
    assert report["counterexamples"][0]["input"] == {
        "reply": {"jsonrpc": "2.0", "id": "call-7", "result": None},
        "expected_id": "call-7",
    }
    assert report["counterexamples"][0]["old"]["value"] == {"status": "ok", "value": None}


def test_a_list_of_dicts_is_drawn_in_its_declared_type_and_the_real_cause_comes_first() -> None:
    status, report = check_json(spec("total_by_presence"), spec("total_by_truth"))
    assert status == EXIT_DIFFERENT
    inputs = [c["input"] for c in report["counterexamples"]]
    assert all(isinstance(i, list) and all(isinstance(r, dict) for r in i) for i in inputs)
    assert inputs[0] == [{"count": 0}]
    assert all(type(v) is int for i in inputs for row in i for v in row.values())
    assert inputs == [[{"count": 0}]]  # rows the difference does not need are dropped


def test_minus_zero_is_a_value_of_its_own() -> None:
    status, report = check_json(spec("half"), spec("half_by_truth"))
    assert status == EXIT_DIFFERENT
    [example] = report["counterexamples"]
    assert repr(example["input"]) == "-0.0"


def test_integers_beyond_2_53_are_tried() -> None:
    status, report = check_json(spec("exact"), spec("through_float"))
    assert status == EXIT_DIFFERENT
    assert all(abs(c["input"]) > 2**53 for c in report["counterexamples"])


def test_json_numbers_each_counterexample_s_cause_in_the_order_shown() -> None:
    _, report = check_json(spec("noisy_presence"), spec("noisy_reader"))
    assert report["causes"] == 1
    assert {c["cause"] for c in report["counterexamples"]} == {1}
    assert report["counterexamples"][0]["input"] == {"result": 0}


def test_counterexamples_are_grouped_by_cause_and_shrunk_to_the_key_that_matters() -> None:
    status, out, _ = check(spec("noisy_presence"), spec("noisy_reader"))
    assert status == EXIT_DIFFERENT
    header, _, first, *_ = out.splitlines()
    assert "1 cause" in header
    assert first == '1. input: {"result": 0}'
    assert "same cause: " in out


def test_several_old_new_pairs_run_in_one_check() -> None:
    status, report = check_json(
        spec("read_by_presence"),
        spec("read_by_truth"),
        spec("read_by_presence"),
        spec("read_by_lookup"),
    )
    assert status == EXIT_DIFFERENT
    first, second = report["pairs"]
    assert first["different"] is True
    assert second["different"] is False
