"""Where one in-process gateway call spends its time, rung by rung (for issue 6, part 3).

    .venv/bin/python bench/profile_gateway.py [--cprofile N]

Times each step of `Gateway.call_text` on its own, on the inputs the real call passes to it
(timeit, best of 7, less the cost of calling an empty lambda), for the valid, the invalid
(note_id 123) and the cross-owner call of the in-memory bench; then the whole call, the stdlib
floor, and the sum of the steps. With --cprofile, also a cProfile of N valid calls (top
functions by own time). Reaches into the pipeline's rungs and the strict intake's counting:
a step whose function has changed shape is shown as "n/a", never guessed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import timeit
from collections.abc import Callable
from typing import Any

import harness
import inprocess_strictcall
from harness import CALL_ID, INVALID, VALID

Step = tuple[str, Callable[[], Any]]


def best_us(fn: Callable[[], Any], budget_s: float = 0.04) -> float:
    timer = timeit.Timer(fn)
    n, took = timer.autorange()
    n = max(1, int(n * budget_s / max(took, 1e-9)))
    return min(timer.repeat(7, n)) / n * 1e6


def steps_for(gateway: Any, raw: str, identity: str) -> list[Step]:
    """Every step of the call, each a zero-argument callable on precomputed inputs."""
    import orjson

    from strictcall.client.reply import check_request_id
    from strictcall.core import gateway as gw
    from strictcall.core import jsontext, pipeline
    from strictcall.core.execute import execute_call
    from strictcall.core.tools import ToolContext

    steps: list[Step] = []
    limits = gateway.limits
    tools = gateway._tools

    steps.append(("entry: identity type, check_request_id", lambda: check_request_id(CALL_ID)))
    steps.append(("parse: orjson.loads", lambda: orjson.loads(raw)))
    value = orjson.loads(raw)
    numbers = gateway.reads_numbers
    scan = jsontext._STR_NEEDLES[4]
    steps.append(
        (
            f"parse: number scan (regex; {'run' if numbers else 'skipped: no tool takes numbers'})",
            lambda: scan.search(raw),
        )
    )
    steps.append(
        (
            "parse: duplicate check (':' counts, orjson re-rendering)",
            lambda: raw.count(":") != orjson.dumps(value).count(b":"),
        )
    )
    steps.append(
        (
            "parse: Document via tuple.__new__",
            lambda: jsontext._new_document(jsontext.Document, (value, False)),
        )
    )
    steps.append(
        (
            "parse: read_call, all of rung 1",
            lambda: pipeline.read_call(raw, limits, numbers=numbers),
        )
    )
    document = pipeline.read_call(raw, limits, numbers=numbers)
    call = document.value
    steps.append(("route: route_call", lambda: pipeline.route_call(call, tools)))
    compiled = pipeline.route_call(call, tools)
    steps.append(("shape: check_envelope", lambda: pipeline.check_envelope(call)))
    arguments_in = call["arguments"]
    steps.append(
        (
            "shape: jsonschema-rs is_valid (input)",
            lambda: compiled.arguments.is_valid(arguments_in, has_float=False),
        )
    )
    steps.append(
        (
            "shape: check_arguments, all of it",
            lambda: pipeline.check_arguments(call, compiled, document.has_float),
        )
    )
    arguments = pipeline.check_arguments(call, compiled, document.has_float)
    if isinstance(arguments, pipeline.Rejection):
        rejection = arguments
        steps.append(("shape: first_violation, error path", lambda: _first_violation(compiled)))
        violation = _first_violation(compiled)
        steps.append(
            (
                "shape: building the rejection (first time only; then kept per tool)",
                lambda: pipeline._refusal(violation),
            )
        )
        return [*steps, *_answer_steps(gw, pipeline, rejection=rejection)]
    context = (identity, CALL_ID, compiled.tool.name)
    steps.append(
        ("resource: ToolContext via tuple.__new__", lambda: gw._new_context(ToolContext, context))
    )
    ctx = ToolContext(*context)
    steps.append(
        ("resource: authorize_call", lambda: pipeline.authorize_call(compiled, ctx, arguments))
    )
    denied = pipeline.authorize_call(compiled, ctx, arguments)
    if denied is not None:
        return [*steps, *_answer_steps(gw, pipeline, rejection=denied)]
    pool = gateway._workers()
    steps.append(("execute: the handler itself", lambda: compiled.tool.handler(ctx, arguments)))
    steps.append(
        (
            "execute: execute_call, all of it",
            lambda: execute_call(compiled, ctx, arguments, pool),
        )
    )
    result, _ = execute_call(compiled, ctx, arguments, pool)
    steps.append(("output: json_kind walk", lambda: pipeline._json_kind(result)))
    steps.append(
        (
            "output: jsonschema-rs is_valid (output)",
            lambda: compiled.result.is_valid(result, has_float=False),
        )
    )
    matches = compiled.tool.result_matches
    if matches is not None:
        steps.append(("output: result_matches", lambda: matches(arguments, result)))
    steps.append(
        (
            "output: check_result, all of it",
            _check_result(pipeline, compiled, arguments, result, ctx),
        )
    )
    return [*steps, *_answer_steps(gw, pipeline, result=result)]


def _first_violation(compiled: Any) -> Any:
    return compiled.arguments.first_violation({"note_id": 123})


def _check_result(pipeline: Any, compiled: Any, arguments: Any, result: Any, ctx: Any) -> Any:
    try:
        pipeline.check_result(compiled, arguments, result, ctx)
        return lambda: pipeline.check_result(compiled, arguments, result, ctx)
    except TypeError:  # the older signature, without ctx
        return lambda: pipeline.check_result(compiled, arguments, result)


def _answer_steps(
    gw: Any, pipeline: Any, *, result: Any = None, rejection: Any = None
) -> list[Step]:
    if rejection is not None:
        answer = pipeline.fail(CALL_ID, rejection)
        build: Step = (
            "answer: fail() (rejection.as_error)",
            lambda: pipeline.fail(CALL_ID, rejection),
        )
    else:
        answer = pipeline.succeed(CALL_ID, result)
        build = ("answer: succeed()", lambda: pipeline.succeed(CALL_ID, result))
    return [build, ("encode: encode_answer (orjson.dumps)", lambda: gw.encode_answer(answer))]


# Steps that are parts of a larger step listed too: not added again in the sum.
_PARTS = (
    "parse: orjson.loads",
    "parse: number scan",
    "parse: duplicate check",
    "parse: Document",
    "shape: first_violation",
    "shape: building the rejection",
    "shape: jsonschema-rs is_valid",
    "execute: the handler itself",
    "output: json_kind",
    "output: jsonschema-rs",
    "output: result_matches",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cprofile", type=int, default=0, help="valid calls to cProfile")
    args = parser.parse_args(argv)
    gateway = inprocess_strictcall.in_memory_gateway()
    baseline = best_us(lambda: None)
    print(f"(an empty lambda call costs {baseline:.3f} µs; subtracted from every step)\n")
    for label, raw, identity in (
        ("valid", VALID, "u1"),
        ("invalid", INVALID, "u1"),
        ("cross_owner", VALID, "u2"),
    ):
        print(f"## {label}\n")
        print("| step | µs |\n|---|---:|")
        total = 0.0
        try:
            steps = steps_for(gateway, raw, identity)
        except Exception as exc:
            print(f"| n/a: {type(exc).__name__}: {exc} | |\n")
            continue
        for name, fn in steps:
            try:
                us = max(best_us(fn) - baseline, 0.0)
            except Exception as exc:
                print(f"| {name} | n/a ({type(exc).__name__}) |")
                continue
            part = name.startswith(_PARTS)
            if not part:
                total += us
            print(f"| {'  of which ' if part else ''}{name} | {us:.3f} |")
        whole = best_us(
            lambda raw=raw, identity=identity: gateway.call_text(raw, identity, CALL_ID)
        )
        floor = best_us(lambda raw=raw, identity=identity: harness.floor(raw, identity, CALL_ID))
        print(f"| **sum of the steps** | **{total:.3f}** |")
        print(f"| **Gateway.call_text, whole** | **{whole - baseline:.3f}** |")
        print(f"| whole less the sum: calls between the rungs | {whole - baseline - total:.3f} |")
        print(f"| stdlib floor, same input | {floor - baseline:.3f} |\n")
    if args.cprofile > 0:
        profiler = cProfile.Profile()
        call_text = gateway.call_text
        profiler.enable()
        for _ in range(args.cprofile):
            call_text(VALID, "u1", CALL_ID)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
        stats.print_stats(25)
        print(f"## cProfile, {args.cprofile} valid calls, by own time\n")
        print("```\n" + out.getvalue().strip() + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
