"""`strictcall check` and `strictcall lint`: each takes its streams and returns an exit status
as `diff` does (0 nothing found, 1 found, 2 could not run)."""

from __future__ import annotations

import ast
import inspect
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

EXIT_SAME: Final = 0
EXIT_DIFFERENT: Final = 1
EXIT_TROUBLE: Final = 2
SHOWN: Final = 10
"""Causes printed as text; --json gives every counterexample kept."""
SAME_CAUSE_SHOWN: Final = 9
"""Inputs named on a cause's "same cause" line, its first included."""


def run_check(
    specs: Sequence[str],
    *,
    contract: str | None,
    write_tests: str | None,
    as_json: bool,
    max_examples: int,
    timeout: float,
    out: TextIO,
    err: TextIO,
) -> int:
    """Search for inputs on which OLD and NEW (or NEW and a contract) differ; several OLD NEW
    pairs are checked one after the other, and the worst status is the answer."""
    if contract is not None or len(specs) <= 2 or len(specs) % 2:
        return _check_one(
            specs,
            contract=contract,
            write_tests=write_tests,
            as_json=as_json,
            max_examples=max_examples,
            timeout=timeout,
            out=out,
            err=err,
        )
    if write_tests is not None:
        err.write("strictcall check: --write-tests takes one OLD NEW pair\n")
        return EXIT_TROUBLE
    statuses = []
    documents = []
    for index in range(0, len(specs), 2):
        pair = specs[index : index + 2]
        buffer = io.StringIO()
        if not as_json:
            out.write(f"{'' if index == 0 else chr(10)}== OLD {pair[0]}  NEW {pair[1]}\n")
        status = _check_one(
            pair,
            contract=None,
            write_tests=None,
            as_json=as_json,
            max_examples=max_examples,
            timeout=timeout,
            out=buffer if as_json else out,
            err=err,
        )
        statuses.append(status)
        if as_json and buffer.getvalue():
            documents.append(json.loads(buffer.getvalue()))
    if as_json:
        out.write(json.dumps({"pairs": documents}, ensure_ascii=False, indent=2) + "\n")
    return max(statuses)


def _check_one(
    specs: Sequence[str],
    *,
    contract: str | None,
    write_tests: str | None,
    as_json: bool,
    max_examples: int,
    timeout: float,
    out: TextIO,
    err: TextIO,
) -> int:
    from strictcall.errors import MissingExtra

    try:
        import hypothesis  # noqa: F401
    except ImportError:
        err.write(f"strictcall check: {MissingExtra('review', 'hypothesis')}\n")
        return EXIT_TROUBLE
    from strictcall.review import contract as contracts
    from strictcall.review.check import find_differences, probes_for
    from strictcall.review.hints import mine_hints
    from strictcall.review.load import Loaded, NotLoaded, load_function
    from strictcall.review.pin import write_regression_tests
    from strictcall.review.values import arguments, conforms, draw_arguments

    wanted = 1 if contract else 2
    if len(specs) != wanted:
        usage = "check --contract reply NEW" if contract else "check OLD NEW [OLD NEW ...]"
        err.write(f"strictcall check: usage: strictcall {usage}\n")
        return EXIT_TROUBLE
    if contract is not None and contract not in contracts.CONTRACTS:
        err.write(f"strictcall check: no contract {contract!r} (known: reply)\n")
        return EXIT_TROUBLE
    if max_examples < 0 or not timeout > 0:
        err.write("strictcall check: --max-examples must be >= 0 and --timeout > 0\n")
        return EXIT_TROUBLE
    loaded = [
        load_function(spec, label=label)
        for spec, label in zip(specs, ["NEW"] if contract else ["OLD", "NEW"], strict=True)
    ]
    for one in loaded:
        if isinstance(one, NotLoaded):
            err.write(f"strictcall check: {one.message}\n")
            return EXIT_TROUBLE
    functions = [one for one in loaded if isinstance(one, Loaded)]
    new = functions[-1]
    old = functions[0]
    old_spec = contracts.REFERENCE_SPEC if contract else old.spec

    new_arity = _arity(new.function)
    if contract:
        if new_arity not in (1, 2):
            err.write(
                "strictcall check: the reply contract takes (reply, expected_id) or (reply); "
                f"NEW takes {new_arity} arguments\n"
            )
            return EXIT_TROUBLE
        old_function = contracts.reference(new_arity)
        str_ids = contracts.takes_str_ids(new.function)
        strategy = contracts.reply_arguments(new_arity, str_ids=str_ids)
        arity = new_arity

        def fast(source: Any) -> tuple[Any, ...]:
            return contracts.draw_reply(source, arity, str_ids=str_ids)

        keep: frozenset[int] = frozenset({1})  # the expected id stays a valid one
        keys: tuple[Any, ...] = ("result", "error", "id", "jsonrpc")
        probes: list[tuple[Any, ...]] = contracts.probes(new_arity)
        names = ["reply", "expected_id"][:new_arity]
    else:
        old_function = old.function
        old_arity = _arity(old_function)
        if old_arity != new_arity or old_arity < 1:
            err.write(
                f"strictcall check: OLD takes {old_arity} arguments and NEW {new_arity}: "
                "they must take the same number, at least one\n"
            )
            return EXIT_TROUBLE
        hints = mine_hints([old_function, new.function], old_arity)
        strategy = arguments(old_arity, hints)

        def fast(source: Any) -> tuple[Any, ...]:
            return draw_arguments(source, old_arity, hints)

        keep = hints.mappings
        keys = hints.keys
        probes = probes_for(old_arity, hints)
        names = _names(old_function, old_arity)

    declared = {} if contract else hints.declared
    report = find_differences(
        old_function,
        new.function,
        strategy,
        probes=probes,
        keep=keep,
        keys=keys,
        fast=fast,
        max_examples=max_examples,
        timeout=timeout,
        accept=lambda args: conforms(args, declared),
    )
    left = "contract" if contract else "OLD"
    if as_json:
        _write_json(report, old_spec, new.spec, contract, names, timeout, out)
    else:
        _write_text(report, left, names, timeout, out)
    if write_tests is not None and report.counterexamples:
        target = new if contract else old
        written = write_regression_tests(
            Path(write_tests), target, report.counterexamples, names, old_spec, new.spec
        )
        err.write(f"strictcall check: wrote {written} regression tests to {write_tests}\n")
    if report.stopped:
        err.write(f"strictcall check: {report.stopped}\n")
    return EXIT_DIFFERENT if report.counterexamples else EXIT_SAME


def _arity(function: Callable[..., Any]) -> int:
    """The number of positional parameters without a default (what check passes)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(
        1
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    )


def _names(function: Callable[..., Any], arity: int) -> list[str]:
    try:
        parameters = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = []
    return [*parameters, *(f"arg{i}" for i in range(len(parameters), arity))][:arity]


def render(value: object) -> str:
    """A value as JSON text when it is JSON, else as its Python repr."""
    from strictcall.review.outcome import is_json_like

    if is_json_like(value):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def render_input(args: tuple[Any, ...], names: Sequence[str]) -> str:
    """A counterexample's input: the argument alone, or name=value for each."""
    if len(args) == 1:
        return render(args[0])
    return ", ".join(f"{name}={render(value)}" for name, value in zip(names, args, strict=True))


def input_json(args: tuple[Any, ...], names: Sequence[str]) -> Any:
    """A counterexample's input for --json: the argument alone, or a dict by parameter name."""
    from strictcall.review.outcome import jsonable

    if len(args) == 1:
        return jsonable(args[0])
    return {name: jsonable(value) for name, value in zip(names, args, strict=True)}


def _describe(outcome: Any, timeout: float, names: Sequence[str]) -> str:
    if outcome.kind == "returned":
        text = f"returned {render(outcome.value)}"
    elif outcome.kind == "raised":
        text = f"raised {outcome.exception}"
    else:
        text = f"did not return within {timeout:g} s"
    if outcome.mutated:
        text += f", and changed its input to {render_input(outcome.input_after, names)}"
    return text


def _write_text(report: Any, left: str, names: Sequence[str], timeout: float, out: TextIO) -> None:
    from strictcall.review.check import group_by_cause

    found = report.counterexamples
    if not found:
        out.write(f"strictcall check: no difference in {report.inputs_run} inputs\n")
        return
    groups = group_by_cause(found)
    differ = "input differs" if len(found) == 1 else "inputs differ"
    causes = "1 cause" if len(groups) == 1 else f"{len(groups)} causes"
    more = f" (the first {SHOWN} shown)" if len(groups) > SHOWN else ""
    out.write(
        f"strictcall check: {len(found)} {differ}, in {report.inputs_run} tried; {causes}, "
        f"smallest first{more}\n"
    )
    width = max(len(left), len("NEW"))
    for number, group in enumerate(groups[:SHOWN], start=1):
        example = group[0]
        out.write(f"\n{number}. input: {render_input(example.args, names)}\n")
        out.write(f"   {left:<{width}} {_describe(example.old, timeout, names)}\n")
        out.write(f"   {'NEW':<{width}} {_describe(example.new, timeout, names)}\n")
        if len(group) > 1:
            shown = ", ".join(render_input(e.args, names) for e in group[1:SAME_CAUSE_SHOWN])
            rest = len(group) - SAME_CAUSE_SHOWN
            tail = f" and {rest} more" if rest > 0 else ""
            out.write(f"   same cause: {shown}{tail}\n")


def _outcome_json(outcome: Any, timeout: float, names: Sequence[str]) -> dict[str, Any]:
    answer: dict[str, Any] = outcome.as_json(timeout)
    if outcome.mutated:
        answer["mutated_input"] = input_json(outcome.input_after, names)
    return answer


def _write_json(
    report: Any,
    old_spec: str,
    new_spec: str,
    contract: str | None,
    names: Sequence[str],
    timeout: float,
    out: TextIO,
) -> None:
    from strictcall.review.check import group_by_cause

    groups = group_by_cause(report.counterexamples)
    document = {
        "old": old_spec,
        "new": new_spec,
        "contract": contract,
        "inputs_run": report.inputs_run,
        "different": bool(report.counterexamples),
        "stopped": report.stopped or None,
        "causes": len(groups),
        "counterexamples": [
            {
                "input": input_json(example.args, names),
                "args": [input_json((arg,), names) for arg in example.args],
                "old": _outcome_json(example.old, timeout, names),
                "new": _outcome_json(example.new, timeout, names),
                "cause": cause,
            }
            for cause, group in enumerate(groups, start=1)
            for example in group
        ],
    }
    out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def run_lint(
    paths: Sequence[str],
    *,
    output: str,
    fix: bool,
    out: TextIO,
    err: TextIO,
    explore: bool = False,
    confidence: str | None = None,
    diff: str | None = None,
    run: bool = False,
) -> int:
    """Lint Python files for truthiness used where presence may be meant: what the code shows,
    or with `explore` the guesses too; with `diff`, only the presence tests that the changes
    since that git revision turned into truth tests; with `run`, each finding checked by
    running its function beside its presence reading. `confidence` is the old spelling:
    `low` is `explore`, `high` and `medium` the default."""
    from strictcall.review.fix import apply_fixes
    from strictcall.review.lint import Finding, lint_source, python_files

    if confidence is not None:
        explore = explore or confidence == "low"
        err.write(
            f"strictcall lint: --confidence {confidence} is now "
            f"{'--explore' if confidence == 'low' else 'the default'} (the default shows only "
            "what the code shows; --explore adds the guesses)\n"
        )
    if diff is not None:
        from strictcall.review.diff import run_diff

        return run_diff(diff, list(paths), output=output, out=out, err=err)
    if not paths:
        err.write("strictcall lint: give a PATH, or --diff BASE\n")
        return EXIT_TROUBLE
    findings: list[Finding] = []
    trouble = False
    fixed = 0
    try:
        files = list(python_files(list(paths)))
    except FileNotFoundError as exc:
        err.write(f"strictcall lint: no such file or directory: {exc.args[0]}\n")
        return EXIT_TROUBLE
    sources: dict[Path, str] = {}
    for path in files:
        try:
            sources[path] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            err.write(f"strictcall lint: {path}: cannot read ({type(exc).__name__})\n")
            trouble = True
    from strictcall.review.imports import ImportedFacts

    imports = ImportedFacts()
    for path, source in sources.items():
        shown = str(path)
        try:
            tree = ast.parse(source, filename=shown)
            imported = imports.for_module(path, tree)
            found = lint_source(source, shown, explore=explore, imported=imported, tree=tree)
            if run and found:
                from strictcall.review.run import run_findings

                found = run_findings(path, source, found)
            if fix and any(f.fix is not None for f in found):
                source, count = apply_fixes(source, found)
                path.write_text(source, encoding="utf-8")
                fixed += count
                found = lint_source(source, shown, explore=explore, imported=imported)
        except OSError as exc:
            err.write(f"strictcall lint: {shown}: cannot write ({type(exc).__name__})\n")
            trouble = True
            continue
        except SyntaxError as exc:
            err.write(f"strictcall lint: {shown}:{exc.lineno}: not Python (SyntaxError)\n")
            trouble = True
            continue
        findings.extend(found)
    write_findings(findings, output, out)
    if fix:
        err.write(f"strictcall lint: fixed {fixed}\n")
    if trouble:
        return EXIT_TROUBLE
    return EXIT_DIFFERENT if findings else EXIT_SAME


def write_findings(findings: Sequence[Any], output: str, out: TextIO) -> None:
    """Findings as text (one line each, the CI form), GitHub annotations, JSON or SARIF."""
    from strictcall.review.sarif import sarif_log

    if output == "json":
        document = {"findings": [f.as_json() for f in findings], "count": len(findings)}
        out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    elif output == "sarif":
        out.write(json.dumps(sarif_log(findings, _version()), ensure_ascii=False, indent=2) + "\n")
    elif output == "github":
        for finding in findings:
            out.write(finding.as_github() + "\n")
    else:
        for finding in findings:
            out.write(finding.as_text() + "\n")


def _version() -> str:
    from strictcall.review.flake8 import TruthinessChecker

    return TruthinessChecker.version
