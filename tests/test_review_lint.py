"""`strictcall lint`: truthiness used where presence may be meant, with the question to ask
and the input that tells the readings apart; suppressions, --fix, JSON, SARIF and flake8."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import review_planted as planted
from strictcall.cli.parser import main
from strictcall.review.commands import EXIT_DIFFERENT, EXIT_SAME, EXIT_TROUBLE
from strictcall.review.fix import apply_fixes
from strictcall.review.flake8 import TruthinessChecker
from strictcall.review.legal import FALSE, NULL, ZERO
from strictcall.review.lint import Finding, lint_source
from strictcall.review.rules import (
    GET_IS_NONE,
    GET_OR_DEFAULT,
    GET_TRUTH_TEST,
    READ_OR_DEFAULT,
    RULES,
    SUPPRESSION_WITHOUT_REASON,
)

ROOT = Path(__file__).resolve().parent.parent
DIRTY = 'def read(reply):\n    if reply.get("result"):\n        return reply["result"]\n'
"""The seed's truth test, its value passed on: a finding at the default confidence."""


def lint(code: str, explore: bool = False) -> list[Finding]:
    return lint_source(textwrap.dedent(code), "snippet.py", explore=explore)


def rules_of(code: str, explore: bool = False) -> list[str]:
    return [finding.rule.id for finding in lint(code, explore)]


def run_lint(*args: str) -> tuple[int, str, str]:
    out = io.BytesIO()
    err = io.StringIO()
    real_err = sys.stderr
    sys.stderr = err
    try:
        status = main(["lint", *args], stdout=out)
    finally:
        sys.stderr = real_err
    return status, out.getvalue().decode("utf-8"), err.getvalue()


def test_the_seeds_refactor_is_found_with_its_question_and_input() -> None:
    [finding] = lint("""
        def read(reply):
            if reply.get("result"):
                return reply["result"]
    """)
    assert finding.rule is GET_TRUTH_TEST
    assert (finding.line, finding.col) == (3, 8)
    assert finding.input == '{"result": 0}'
    assert finding.falsy[0] == ZERO
    assert finding.confidence == "shown"
    assert finding.remedy and finding.evidence
    assert "line 4" in finding.evidence
    assert finding.counterexample.startswith('with {"result": 0} ')


@pytest.mark.parametrize(
    "code",
    [
        "while d.get('count'):\n    pass\n",
        "assert d.get('count')\n",
        "x = not d.get('count')\n",
        "x = d.get('count') and 1\n",
        "x = 1 if d.get('count') else 2\n",
        "x = [v for v in vs if v.get('count')]\n",
        "x = bool(d.get('count'))\n",
        "if a or d.get('count'):\n    pass\n",
    ],
    ids=["while", "assert", "not", "and", "ternary", "comprehension", "bool", "or-in-if"],
)
def test_get_in_every_boolean_context_is_a_truth_test(code: str) -> None:
    assert rules_of(code, True) == [GET_TRUTH_TEST.id]


def test_get_or_default_asks_about_the_default() -> None:
    assert lint('timeout = config.get("timeout") or 30\n') == []
    [finding] = lint('timeout = config.get("timeout") or 30\n', True)
    assert finding.rule is GET_OR_DEFAULT
    assert finding.confidence == "guess" and finding.evidence == ""
    assert finding.input == '{"timeout": 0}'


def test_a_value_read_from_a_mapping_then_or_default_is_found() -> None:
    findings = lint(
        """
        def f(config, reply):
            if "limit" not in config:
                return None
            limit = config["limit"]
            a = limit or 10
            b = reply["result"] or "none"
            return a, b
    """,
        True,
    )
    assert [f.rule for f in findings] == [READ_OR_DEFAULT, READ_OR_DEFAULT]
    assert [f.input for f in findings] == ['{"limit": 0}', '{"result": 0}']


def test_is_not_none_before_reading_the_key_asks_about_an_explicit_null() -> None:
    [finding] = lint("""
        from typing import Any

        def read(reply: dict[str, Any]) -> Any:
            if reply.get("result") is not None:
                return reply["result"]
            return None
    """)
    assert finding.rule is GET_IS_NONE
    assert finding.falsy == (NULL,)
    assert finding.input == '{"result": null}'


@pytest.mark.parametrize(
    ("line", "code"),
    [
        pytest.param(line, code, id=name)
        for name, line, code in planted.DEFECTS
        if name not in planted.KNOWN_MISSES
    ],
)
def test_each_planted_defect_is_found_on_its_line_by_explore(line: int, code: str) -> None:
    assert line in [finding.line for finding in lint(code, True)]


def test_the_planted_defects_shown_by_default_are_exactly_the_measured_ones() -> None:
    # docs/LINT.md gives the share; one more shown is a gain to record there, one fewer a loss
    shown = {name for name, line, code in planted.DEFECTS if line in [f.line for f in lint(code)]}
    assert shown == set(planted.SHOWN_BY_DEFAULT)
    for name, _, code in planted.DEFECTS:
        for finding in lint(code):
            assert finding.evidence and finding.counterexample, name


def test_the_planted_defects_missed_are_exactly_the_measured_misses() -> None:
    missed = {
        name
        for name, line, code in planted.DEFECTS
        if line not in [f.line for f in lint(code, True)]
    }
    assert missed == set(planted.KNOWN_MISSES)


@pytest.mark.parametrize(
    "code", [pytest.param(code, id=name) for name, code in planted.LOOK_ALIKES]
)
def test_each_planted_look_alike_is_left_alone(code: str) -> None:
    assert lint(code) == []


def test_the_planted_set_meets_the_issue_s_targets() -> None:
    found = sum(line in [f.line for f in lint(code, True)] for _, line, code in planted.DEFECTS)
    alarms = sum(bool(lint(code)) for _, code in planted.LOOK_ALIKES)
    assert len(planted.DEFECTS) >= 40 and len(planted.LOOK_ALIKES) >= 10
    assert found >= 0.9 * len(planted.DEFECTS)
    assert alarms == 0


def test_a_declared_number_replaced_by_or_is_a_guess_naming_the_declaration() -> None:
    code = """
        from dataclasses import dataclass

        @dataclass
        class Options:
            timeout: float | None = None

        def deadline(options: Options) -> float:
            return options.timeout or 60.0
    """
    assert lint(code) == []  # a declared `float` alone is not evidence that 0 means something
    [finding] = lint(code, True)
    assert finding.rule is READ_OR_DEFAULT
    assert finding.confidence == "guess"
    assert finding.falsy == (ZERO,)
    assert "Options.timeout" in finding.why
    assert finding.input == "timeout=0"


def test_a_flag_declared_bool_defaulted_to_true_mishandles_false() -> None:
    [finding] = lint(
        """
        def streaming(options: dict[str, bool]) -> bool:
            return options.get("stream") or True
    """,
        True,
    )
    assert finding.falsy == (FALSE,)
    assert finding.confidence == "guess"


def test_a_value_nothing_describes_is_a_guess_that_says_it_could_not_tell() -> None:
    code = """
        def f(d):
            if d.get("thing"):
                return 1
            return 2
    """
    assert lint(code) == []
    [finding] = lint(code, True)
    assert finding.confidence == "guess"
    assert "could not tell" in finding.why
    assert "Guessing: could not tell" in finding.as_text()


def test_a_value_that_is_never_absent_is_not_asked_about() -> None:
    assert (
        lint(
            """
        class Usage:
            requests: int

        def f(usage: Usage, default: int) -> int:
            return usage.requests or default
        """,
            True,
        )
        == []
    )


@pytest.mark.parametrize(
    "code",
    [
        'if "result" in reply:\n    pass\n',
        'items = reply.get("results") or []\n',
        'n = d.get("count") or 0\n',
        'if d.get("count") == 0:\n    pass\n',
        "if requests.get(url, timeout=3):\n    pass\n",
        'if profile.get("supports_tools", False):\n    pass\n',
        'if opts.get("is_limit"):\n    pass\n',
        'if reply.get("name"):\n    pass\n',
        'name = reply.get("title") or "untitled"\n',
        'if os.environ.get("PORT"):\n    pass\n',
        'if cls.__dict__.get("count"):\n    pass\n',
        'if d.get("timeout") is None:\n    d["timeout"] = 30\n',
        'x = d.get("result", 0) is None\n',
        "if timeout:\n    pass\n",
    ],
    ids=[
        "presence",
        "empty-default",
        "zero-default",
        "comparison",
        "http-get",
        "flag-default",
        "flag-name",
        "a-name",
        "a-title",
        "environment",
        "namespace",
        "fill-in",
        "get-with-default-is-none",
        "plain-name",
    ],
)
def test_look_alikes_that_ask_nothing_are_left_alone(code: str) -> None:
    assert rules_of(code) == []


def test_a_suppression_with_a_reason_suppresses_its_rule_only() -> None:
    assert (
        rules_of(
            'if d.get("count"):  # strictcall: ignore[SC101] -- a count of 0 is none\n    pass\n',
            True,
        )
        == []
    )
    assert rules_of(
        'if d.get("count"):  # strictcall: ignore[SC102] -- another rule\n    pass\n', True
    ) == [GET_TRUTH_TEST.id]
    assert (
        rules_of('if d.get("count"):  # strictcall: ignore -- every rule\n    pass\n', True) == []
    )


def test_a_suppression_alone_on_its_line_covers_the_next_line() -> None:
    code = (
        "# strictcall: ignore[SC102] -- an empty variable means unset\n"
        'limit = config.get("limit") or 10\n'
    )
    assert rules_of(code) == []


def test_a_suppression_without_a_reason_is_a_finding() -> None:
    [finding] = lint('if d.get("count"):  # strictcall: ignore[SC101]\n    pass\n')
    assert finding.rule is SUPPRESSION_WITHOUT_REASON


def test_fix_turns_a_truth_test_guarding_a_subscript_into_presence() -> None:
    code = textwrap.dedent("""
        def read(reply):
            if reply.get("result"):
                return {"status": "ok", "value": reply["result"]}
            elif self.cache.get("count"):
                return self.cache["count"]
            return None
    """)
    fixed, count = apply_fixes(code, lint_source(code))
    assert count == 2
    assert 'if "result" in reply:' in fixed
    assert 'elif "count" in self.cache:' in fixed
    ast.parse(fixed)
    assert lint_source(fixed) == []


@pytest.mark.parametrize(
    "code",
    [
        'if d.get("result"):\n    use(d["other"])\n',
        'if d.get("result"):\n    use(e["result"])\n',
        'if d.get("result"):\n    use(d.get("result"))\n',
        'if not d.get("result"):\n    use(d["result"])\n',
        'if d.get("result") and ready:\n    use(d["result"])\n',
        'if f().get("result"):\n    use(f()["result"])\n',
        'if d.get(key_of("result")):\n    use(d[key_of("result")])\n',
        'if d.get("result", 1):\n    use(d["result"])\n',
        'if d.get("result"):\n    pass\nelse:\n    use(d["result"])\n',
        'while d.get("result"):\n    use(d["result"])\n',
        'x = 1 if d.get("result") else d["result"]\n',
    ],
    ids=[
        "other-key",
        "other-mapping",
        "get-in-body",
        "negated",
        "and",
        "call-receiver",
        "computed-key",
        "default",
        "subscript-in-else",
        "while",
        "ternary",
    ],
)
def test_fix_leaves_look_alikes_alone(code: str) -> None:
    findings = lint_source(code)
    assert all(finding.fix is None for finding in findings)
    assert apply_fixes(code, findings) == (code, 0)


def test_lint_fix_rewrites_the_file_and_reports_what_is_left(tmp_path: Path) -> None:
    path = tmp_path / "reader.py"
    path.write_text(
        'def read(reply):\n    if reply.get("result"):\n        return reply["result"]\n'
        '    return reply.get("count") or 1\n'
    )
    status, out, err = run_lint("--fix", "--explore", str(path))
    assert status == EXIT_DIFFERENT
    assert path.read_text().splitlines()[1] == '    if "result" in reply:'
    assert " SC102 " in out and " SC101 " not in out
    assert "fixed 1" in err


def test_text_json_and_exit_statuses(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text('if "result" in reply:\n    pass\n')
    dirty = tmp_path / "dirty.py"
    dirty.write_text(DIRTY)
    assert run_lint(str(clean)) == (EXIT_SAME, "", "")
    status, out, _ = run_lint(str(dirty))
    assert status == EXIT_DIFFERENT
    assert out.count("\n") == 1
    assert out.startswith(f"{dirty}:2:8: SC101 [shown] ")
    assert "Evidence: line 3 passes the value on unchanged" in out
    assert 'Counterexample: with {"result": 0} ' in out
    status, out, _ = run_lint("--format", "json", str(tmp_path))
    document = json.loads(out)
    assert document["count"] == 1
    [finding] = document["findings"]
    assert {k: finding[k] for k in ("path", "line", "col", "end_line", "end_col")} == {
        "path": str(dirty),
        "line": 2,
        "col": 8,
        "end_line": 2,
        "end_col": 27,
    }
    assert finding["rule"] == GET_TRUTH_TEST.id
    assert finding["name"] == GET_TRUTH_TEST.name
    assert finding["question"] == GET_TRUTH_TEST.question
    assert finding["input"] == '{"result": 0}'
    assert finding["falsy"] == ["0", "false", '""', "[]", "{}"]
    assert finding["confidence"] == "shown"
    assert finding["why"] and finding["remedy"]
    assert finding["evidence"] == finding["why"]
    assert finding["counterexample"].startswith('with {"result": 0} ')
    assert finding["fixable"] is True


def test_explore_shows_the_guesses_and_says_it_is_guessing(tmp_path: Path) -> None:
    vague = tmp_path / "vague.py"
    vague.write_text('if d.get("thing"):\n    pass\n')
    assert run_lint(str(vague))[0] == EXIT_SAME
    status, out, err = run_lint("--explore", str(vague))
    assert (status, err) == (EXIT_DIFFERENT, "")
    assert " SC101 [guess] " in out and "Guessing: " in out


def test_the_old_confidence_option_still_works_and_names_explore(tmp_path: Path) -> None:
    vague = tmp_path / "vague.py"
    vague.write_text('if d.get("thing"):\n    pass\n')
    status, out, err = run_lint("--confidence", "low", str(vague))
    assert status == EXIT_DIFFERENT and " SC101 [guess] " in out
    assert "--explore" in err
    status, out, err = run_lint("--confidence", "high", str(vague))
    assert (status, out) == (EXIT_SAME, "") and "--explore" in err


def test_a_file_that_cannot_be_read_or_parsed_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    status, _, err = run_lint(str(broken))
    assert status == EXIT_TROUBLE
    assert err.count("\n") == 1
    status, _, err = run_lint(str(tmp_path / "missing.py"))
    assert status == EXIT_TROUBLE
    assert "missing.py" in err


def test_sarif_has_the_fields_the_2_1_0_schema_requires(tmp_path: Path) -> None:
    dirty = tmp_path / "dirty.py"
    dirty.write_text('x = 1\nlimit = config.get("limit") or 10\n')
    status, out, _ = run_lint("--format", "sarif", "--explore", str(dirty))
    assert status == EXIT_DIFFERENT
    log: dict[str, Any] = json.loads(out)
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "strictcall"
    assert [rule["id"] for rule in driver["rules"]] == list(RULES)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
    [result] = run["results"]
    assert result["ruleId"] == "SC102"
    assert driver["rules"][result["ruleIndex"]]["id"] == "SC102"
    assert result["level"] == "note"  # a guess
    assert result["message"]["text"]
    [location] = result["locations"]
    physical = location["physicalLocation"]
    assert physical["artifactLocation"]["uri"]
    region = physical["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 9)
    assert region["endLine"] >= region["startLine"] >= 1
    assert region["endColumn"] > region["startColumn"] >= 1


def test_columns_count_characters_not_bytes() -> None:
    [finding] = lint('x = "é€"; y = d.get("count") or 1\n', True)
    assert finding.col == 15


def test_the_flake8_plugin_yields_flake8_tuples() -> None:
    code = DIRTY
    checker = TruthinessChecker(ast.parse(code), code.splitlines(keepends=True))
    [(line, col, message, kind)] = list(checker.run())
    assert (line, col) == (2, 7)
    assert message.startswith("SC101 ")
    assert kind is TruthinessChecker
    assert TruthinessChecker.name == "strictcall"


def test_flake8_runs_the_plugin(tmp_path: Path) -> None:
    dirty = tmp_path / "dirty.py"
    dirty.write_text(DIRTY)
    done = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "SC", str(dirty)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert f"{dirty}:2:8: SC101 " in done.stdout


def test_strictcall_s_own_source_has_no_unsuppressed_finding() -> None:
    status, out, err = run_lint(str(ROOT / "src"))
    assert (status, out, err) == (EXIT_SAME, "", "")


def test_the_review_examples_show_the_seeds_findings_each_with_its_evidence() -> None:
    status, out, _ = run_lint(str(ROOT / "examples" / "review"))
    assert status == EXIT_DIFFERENT
    rules = sorted(line.split(" ")[1] for line in out.splitlines())
    # the seed's refactor, its half fix, and the half fix in the seed's whole reader (JSON-RPC)
    assert rules == ["SC101", "SC104", "SC104"]
    assert all("Evidence: " in line for line in out.splitlines())
    status, out, _ = run_lint("--explore", str(ROOT / "examples" / "review"))
    assert sorted(line.split(" ")[1] for line in out.splitlines()) == ["SC101", "SC104", "SC104"]


def test_github_format_is_one_annotation_per_finding(tmp_path: Path) -> None:
    dirty = tmp_path / "dirty.py"
    dirty.write_text(DIRTY)
    status, out, _ = run_lint("--format", "github", str(dirty))
    assert status == EXIT_DIFFERENT
    [line] = out.splitlines()
    assert line.startswith(f"::warning file={dirty},line=2,col=8,")
    assert f"title={GET_TRUTH_TEST.id} " in line


def test_sarif_results_carry_the_values_the_reason_and_the_fix(tmp_path: Path) -> None:
    dirty = tmp_path / "dirty.py"
    dirty.write_text(DIRTY)
    _, out, _ = run_lint("--format", "sarif", str(dirty))
    [result] = json.loads(out)["runs"][0]["results"]
    properties = result["properties"]
    assert properties["falsy"][0] == ZERO
    assert properties["confidence"] == "shown"
    assert properties["why"] and properties["remedy"]
    assert properties["evidence"] and properties["counterexample"]


def test_an_isinstance_check_narrows_the_value_to_its_type() -> None:
    code = """
        def name_of(data):
            name = data.get("name")
            if not isinstance(name, str) or not name:
                return None
            return name
    """
    assert lint(code) == []
    [finding] = lint(code, True)
    assert finding.falsy == ('""',)
    assert "isinstance" in finding.why


def test_a_computed_key_reads_a_table_not_a_field() -> None:
    code = """
        def tool(registry, name):
            found = registry.get(name)
            if not found:
                return None
            return found
    """
    assert lint(code) == []
    assert [f.confidence for f in lint(code, True)] == ["guess"]


def test_a_json_schema_in_the_file_declares_the_key() -> None:
    [finding] = lint("""
        SCHEMA = {"type": "object", "properties": {"retries": {"type": "integer"}}}

        def retries(arguments):
            return arguments.get("retries") or 3
    """)
    assert finding.confidence == "shown"
    assert "JSON Schema" in finding.evidence
    refused = """
        SCHEMA = {"type": "object", "properties": {"retries": {"type": "integer", "minimum": 1}}}

        def retries(arguments):
            return arguments.get("retries") or 3
    """
    assert lint(refused, True) == []


@pytest.mark.parametrize(
    "field",
    [
        "limit: int | None = Field(default=None, gt=0)",
        "limit: Annotated[int | None, Field(ge=1)] = None",
        "limit: PositiveInt | None = None",
    ],
    ids=["field-gt", "annotated-ge", "positive-int"],
)
def test_a_declared_constraint_that_refuses_0_leaves_the_default_alone(field: str) -> None:
    code = f"""
        class Params(BaseModel):
            {field}

        def page(params: Params) -> int:
            return params.limit or 50
    """
    assert lint(code, True) == []
    unconstrained = code.replace(field, "limit: int | None = Field(default=None, ge=0)")
    [finding] = lint(unconstrained)
    assert finding.confidence == "shown" and "ge=0" in finding.evidence


RAG = '''
class Retriever:
    def __init__(self, similarity: float | None = None, top_k: int | None = None) -> None:
        """A retriever over a vector store.

        Args:
            similarity: the cosine threshold, 0.0 to 1.0; 0.0 keeps every match.
            top_k: how many records to fetch.
        """
        self.similarity = similarity
        self.top_k = top_k

    def query(self, store, text):
        return store.query(text, top_k=self.top_k or 5, threshold=self.similarity or 0.6)
'''
"""The camel-ai-like case: a documented threshold of 0.0 replaced by 0.6."""

RECORDS = """
from pydantic import BaseModel, PositiveFloat


class Record(BaseModel):
    similarity: PositiveFloat
    top_k: int = 0  # 0 = every record
"""
"""An unrelated class with same-named fields: one refusing 0, one documenting it."""


def test_a_file_gives_the_same_findings_alone_and_in_its_package(tmp_path: Path) -> None:
    package = tmp_path / "agents"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rag.py").write_text(RAG)
    (package / "records.py").write_text(RECORDS)
    results = []
    for target in (package / "rag.py", package):
        status, out, _ = run_lint("--format", "json", str(target))
        results.append((status, json.loads(out)["findings"]))
    assert results[0] == results[1]
    status, [finding] = results[0]
    assert status == EXIT_DIFFERENT
    assert (finding["rule"], finding["line"]) == (READ_OR_DEFAULT.id, 14)
    assert "0.6" in finding["message"] and "Retriever.similarity" in finding["evidence"]
    assert (
        finding["counterexample"]
        == "with similarity=0 this line gives 0.6, where the value given is 0"
    )


def test_an_attribute_s_type_is_read_from_its_own_class_only() -> None:
    code = (
        RECORDS
        + """

class Page:
    limit: int | None = None

def size(page: Page) -> int:
    return page.limit or 50

def similarity_of(thing) -> float:
    return thing.top_k or 3
"""
    )
    # `Record.top_k` documents 0, but `thing` is not known to be a Record: a guess only
    assert lint(code) == []
    assert [f.line for f in lint(code, True)] == [14, 17]


def test_a_text_returned_from_a_function_declared_to_return_str_is_no_evidence() -> None:
    code = """
        def version_of(kwargs: dict) -> str:
            version = kwargs.get("client_version")
            if version:
                return version
            return "v2"
    """
    assert lint(code) == []
    assert [f.confidence for f in lint(code, True)] == ["guess"]
    assert len(lint(code.replace(" -> str", ""))) == 1


def test_a_class_imported_by_name_is_read_from_its_own_file_alone_or_not(tmp_path: Path) -> None:
    package = tmp_path / "agents"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Budget:\n"
        "    max_calls: int | None = None  # 0 = no limit\n"
        "    page: int | None = None\n"
    )
    (package / "use.py").write_text(
        "from .models import Budget as Limits\n\n\ndef left(budget: Limits, used: int) -> int:\n"
        "    return (budget.max_calls or 100) - used + (budget.page or 1)\n"
    )
    results = []
    for target in (package / "use.py", package):
        status, out, _ = run_lint("--format", "json", str(target))
        results.append((status, json.loads(out)["findings"]))
    assert results[0] == results[1]
    status, [finding] = results[0]
    assert finding["line"] == 5 and "budget.max_calls or 100" in finding["message"]
    assert 'documented "0 = no limit"' in finding["evidence"]
