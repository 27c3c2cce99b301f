"""Accepted and refused calls on the BFCL corpus: what a refusal costs beside an acceptance.

The corpus is the Berkeley Function Calling Leaderboard's (function schemas and ground-truth
calls), read from the `bfcl-eval` wheel on PyPI (fetched once with pip into bench/.cache, no
dependencies installed; an installed `bfcl_eval` package is used instead when there is one).
Categories: simple_python, multiple, parallel, parallel_multiple and their live_ versions (the
Java and JavaScript ones write every value as a string of source code).

Each function's `parameters` become JSON Schema (BFCL's "dict" is "object", "float" is
"number", "tuple" is "array", "any" says nothing); each ground-truth call takes the first
acceptable value of every parameter ("" means "may be left out"). A ground-truth call that
the converted schema refuses is dropped and counted. Every kept call is then broken twice, at
random, in one place: a member's value of another type, an unexpected member, a required one
removed, a value outside its enum, an array item of another type, a nested member broken; a
mutation the schema still accepts is drawn again.

Timing: `Gateway.call_text(raw, identity, call_id)` with a handler that answers a constant;
the accepted and the refused calls are timed one after the other, in alternating order, for
`--rounds` rounds, in process CPU time (the machine is shared: wall time counts other
processes' turns); the figure is the median over rounds of the mean µs per call. Also counted:
how many refusals the quick describer answers (`QuickDescriber`), the rest going to the
validator's error iterator. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from strictcall import Gateway, Tool
from strictcall.core.schema import CompiledSchema, QuickDescriber

WHEEL = "bfcl-eval==2026.3.23"
CACHE = Path(__file__).resolve().parent / ".cache"
CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
IDENTITY = "u1"
CALL_ID = "c1"
TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "int": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
}


def corpus_files() -> Callable[[str], str]:
    """A reader of the corpus's files by name (e.g. "BFCL_v4_simple_python.json")."""
    try:
        import importlib.resources

        root = importlib.resources.files("bfcl_eval") / "data"
        return lambda name: (root / name).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        pass
    wheels = sorted(CACHE.glob("bfcl_eval-*.whl"))
    if not wheels:
        CACHE.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", WHEEL, "-d", CACHE],
            check=True,
        )
        wheels = sorted(CACHE.glob("bfcl_eval-*.whl"))
    archive = zipfile.ZipFile(wheels[-1])
    return lambda name: archive.read(f"bfcl_eval/data/{name}").decode("utf-8")


def to_json_schema(node: Any) -> Any:
    """BFCL's parameter dialect as JSON Schema 2020-12."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out["type"] = TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: to_json_schema(member) for name, member in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out


def load(
    read: Callable[[str], str], every: int = 1
) -> tuple[list[dict[str, Any]], list[tuple[str, Any]], int]:
    """The corpus's distinct functions (name, schema), its ground-truth calls (tool, arguments)
    the schemas accept, and how many were dropped; with `every`, only every `every`-th
    function and its calls (a share of the corpus, for a run under valgrind)."""
    functions: dict[str, dict[str, Any]] = {}  # tool name -> function
    keys: dict[str, str] = {}  # (name, schema) text -> tool name
    calls: list[tuple[str, Any]] = []
    dropped = 0
    for category in CATEGORIES:
        questions = read(f"BFCL_v4_{category}.json").splitlines()
        answers = {
            json.loads(line)["id"]: json.loads(line)
            for line in read(f"possible_answer/BFCL_v4_{category}.json").splitlines()
        }
        for line in questions:
            question = json.loads(line)
            answer = answers.get(question["id"])
            by_name: dict[str, str] = {}
            for function in question["function"]:
                schema = to_json_schema(function.get("parameters", {}))
                key = json.dumps([function["name"], schema], sort_keys=True)
                if key not in keys:
                    name = re.sub(r"[^A-Za-z0-9_.-]", "_", function["name"]) + f"#{len(keys)}"
                    keys[key] = name
                    functions[name] = {"name": name, "schema": schema}
                by_name[function["name"]] = keys[key]
            for expected in [] if answer is None else answer["ground_truth"]:
                for function_name, params in expected.items():
                    tool = by_name.get(function_name)
                    if tool is None:
                        dropped += 1
                        continue
                    arguments = {}
                    for param, options in params.items():
                        chosen = [option for option in options if option != ""]
                        if chosen:
                            arguments[param] = chosen[0]
                    calls.append((tool, arguments))
    if every > 1:
        functions = {name: f for i, (name, f) in enumerate(functions.items()) if i % every == 0}
        calls = [(tool, arguments) for tool, arguments in calls if tool in functions]
    compiled = {name: CompiledSchema(f["schema"]) for name, f in functions.items()}
    kept = []
    for tool, arguments in calls:
        if compiled[tool].is_valid(arguments, has_float=True):
            kept.append((tool, arguments))
        else:
            dropped += 1
    return list(functions.values()), kept, dropped


OTHER_VALUES: tuple[Any, ...] = (123, 1.5, "x", True, None, [], {}, "not one of them")


def places(schema: Any, value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """(path, schema, value) of every value inside the arguments that the schema describes."""
    yield path, schema, value
    if isinstance(schema, dict):
        if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
            for name, item in value.items():
                if name in schema["properties"]:
                    yield from places(schema["properties"][name], item, (*path, name))
        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                yield from places(schema["items"], item, (*path, index))


def put(node: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = copy.copy(node)
    copied[path[0]] = put(node[path[0]], path[1:], new)
    return copied


def mutate(rng: random.Random, schema: Any, arguments: Any) -> Any:
    """The arguments broken in one place (see the module's docstring)."""
    where = list(places(schema, arguments))
    path, node, value = rng.choice(where[1:] if len(where) > 1 else where)
    node = node if isinstance(node, dict) else {}
    choices = ["type"]
    if isinstance(value, dict):
        choices.append("unexpected")
        if any(name in value for name in node.get("required", [])):
            choices.append("missing")
    if isinstance(node.get("enum"), list):
        choices += ["enum", "enum"]
    if isinstance(value, list):
        choices.append("item")
    if not path:
        choices += ["unexpected", "missing"] if node.get("required") else ["unexpected"]
    choice = rng.choice(choices)
    if choice == "unexpected" and isinstance(value, dict):
        return put(arguments, path, {**value, rng.choice(["user_id", "admin", "x"]): 1})
    if choice == "missing" and isinstance(value, dict):
        present = [name for name in node.get("required", []) if name in value]
        if present:
            gone = rng.choice(present)
            return put(arguments, path, {k: v for k, v in value.items() if k != gone})
    if choice == "enum":
        return put(arguments, path, rng.choice(["not one of them", "OTHER", 999]))
    if choice == "item" and isinstance(value, list):
        return put(arguments, path, [*value, rng.choice(OTHER_VALUES)])
    return put(arguments, path, rng.choice(OTHER_VALUES))


def build(seed: int, every: int = 1) -> tuple[Gateway, list[str], list[str], dict[str, Any]]:
    functions, calls, dropped = load(corpus_files(), every)
    gateway = Gateway(
        Tool(
            name=f["name"],
            description="",
            input_schema=f["schema"],
            output_schema={"type": "boolean"},
            handler=lambda ctx, args: True,
        )
        for f in functions
    )
    schemas = {f["name"]: CompiledSchema(f["schema"]) for f in functions}
    rng = random.Random(seed)
    accepted = [json.dumps({"name": tool, "arguments": args}) for tool, args in calls]
    refused: list[str] = []
    quick = 0
    for tool, arguments in calls:
        schema = schemas[tool]
        for _ in range(2):
            for _attempt in range(50):
                broken = mutate(rng, functions_by_name(functions)[tool], arguments)
                if not schema.is_valid(broken, has_float=True):
                    break
            else:
                continue
            describer = QuickDescriber.of(schema.strict)
            if describer is not None and describer.first_violation(broken) is not None:
                quick += 1
            refused.append(json.dumps({"name": tool, "arguments": broken}))
    quick_schemas = sum(QuickDescriber.of(s.strict) is not None for s in schemas.values())
    facts = {
        "functions": len(functions),
        "functions_on_quick_path": quick_schemas,
        "ground_truth_dropped": dropped,
        "accepted_calls": len(accepted),
        "refused_calls": len(refused),
        "refusals_on_quick_path": quick,
    }
    return gateway, accepted, refused, facts


_BY_NAME: dict[int, dict[str, Any]] = {}


def functions_by_name(functions: list[dict[str, Any]]) -> dict[str, Any]:
    found = _BY_NAME.get(id(functions))
    if found is None:
        found = _BY_NAME[id(functions)] = {f["name"]: f["schema"] for f in functions}
    return found


def check_answers(gateway: Gateway, accepted: list[str], refused: list[str]) -> list[str]:
    """Every ground-truth call answered ok, every mutated one refused at shape."""
    problems = []
    for raw in accepted:
        answer = json.loads(gateway.call_text(raw, IDENTITY, CALL_ID))
        if answer.get("ok") is not True:
            problems.append(f"accepted call refused: {answer['error']['code']}")
    for raw in refused:
        answer = json.loads(gateway.call_text(raw, IDENTITY, CALL_ID))
        if answer.get("ok") is not False or answer["error"]["code"] != "invalid_arguments":
            problems.append("mutated call not refused as invalid_arguments")
    return problems[:10]


def time_batch(call_text: Callable[[str, str, str], Any], calls: list[str]) -> float:
    start = time.process_time()  # CPU time: the machine is shared, wall time is not ours
    for raw in calls:
        call_text(raw, IDENTITY, CALL_ID)
    return (time.process_time() - start) / len(calls) * 1e6


def run(rounds: int, seed: int) -> dict[str, Any]:
    gateway, accepted, refused, facts = build(seed)
    problems = check_answers(gateway, accepted, refused)
    call_text = gateway.call_text
    everything = accepted + refused
    per_round: dict[str, list[float]] = {"accepted": [], "refused": [], "all": []}
    for _ in range(rounds):  # interleaved: each round times both, in alternating order
        order = [("accepted", accepted), ("refused", refused)]
        if len(per_round["accepted"]) % 2:
            order.reverse()
        for label, calls in order:
            per_round[label].append(time_batch(call_text, calls))
        per_round["all"].append(time_batch(call_text, everything))
    medians = {label: statistics.median(values) for label, values in per_round.items()}
    ratios = [r / a for r, a in zip(per_round["refused"], per_round["accepted"], strict=True)]
    return {
        **facts,
        "rounds": rounds,
        "mean_us": {label: round(value, 2) for label, value in medians.items()},
        "refused_over_accepted": round(statistics.median(ratios), 3),
        "refused_over_accepted_per_round": [round(r, 3) for r in ratios],
        "targets": {
            "refused_le_1_2x_accepted": statistics.median(ratios) <= 1.2,
            "all_le_10us_mean": medians["all"] <= 10.0,
        },
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--indent", action="store_true", help="indented JSON (else one line)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.rounds, args.seed), indent=2 if args.indent else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
