"""The agent loop adapters' overhead over a direct `Gateway.call` on the same call (issue 15).

Run:  .venv/bin/python bench/adapters.py [--rounds 7] [--batch 0.05]
(`make bench` runs it too, and puts its table in bench/RESULTS.md.)

One read_note call on the in-memory notes gateway (the same gateway as the in-process bench),
as a provider's turn holds it, valid and wrong-typed. Each round times every figure beside a
batch of its baseline (which runs first alternates from round to round), and a figure is the
median over the rounds of those ratios. Batches are timed in CPU time of this thread: the calls
do no I/O, and on a shared machine wall time would also count the time other processes ran.

- baseline: `gateway.call(text, identity, call_id)`, text in, answer dict out;
- Chat Completions: `run_openai_tool_calls(gateway, [tool_call], identity)` on a plain dict and
  on the SDK's `ChatCompletionMessageFunctionToolCall` (when `openai` is installed);
- Responses: `run_responses_function_calls` on a plain `function_call` item and on the SDK's
  `ResponseFunctionToolCall`;
- Anthropic: `run_anthropic_tool_uses` on a plain `tool_use` block (input already parsed) and on
  the SDK's `ToolUseBlock` (when `anthropic` is installed).

An adapter does more than the baseline: it also writes the result as JSON text for the model.
So a second baseline, `gateway.call_text`, which writes the answer as JSON bytes, is timed too.
The baseline parses the whole call text strictly; the OpenAI adapters parse the arguments text
strictly (`Gateway.call_arguments`), a little less text; Anthropic's `input` comes parsed by the
SDK, so its adapter parses nothing (it only walks the value), which is why it costs less.
Target: each adapter <= 1.2x `Gateway.call`. Every answer is checked before it is timed.
Prints the table, then the rows as one JSON line (which bench/run.py reads).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import CALL_ID, N1_TEXT
from inprocess_strictcall import in_memory_gateway

from strictcall.transports.providers import (
    run_anthropic_tool_uses,
    run_openai_tool_calls,
    run_responses_function_calls,
)

TARGET_RATIO = 1.2
CLOCK = time.thread_time
"""The CPU time of this thread: the calls do no I/O, so the time a batch spends descheduled while
other processes run on a shared machine is not the call's, and wall time would count it."""
ARGUMENTS = {"valid": '{"note_id":"n1"}', "invalid": '{"note_id":123}'}


def targets(gateway: Any, case: str) -> dict[str, Callable[[], Any]]:
    """Every way to make the same call, by name."""
    arguments = ARGUMENTS[case]
    text = '{"name":"read_note","arguments":' + arguments + "}"
    tool_call = {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": "read_note", "arguments": arguments},
    }
    item = {
        "type": "function_call",
        "call_id": CALL_ID,
        "name": "read_note",
        "arguments": arguments,
    }
    block = {"type": "tool_use", "id": CALL_ID, "name": "read_note", "input": json.loads(arguments)}
    found: dict[str, Callable[[], Any]] = {
        "Gateway.call": lambda: gateway.call(text, "u1", CALL_ID),
        "Gateway.call_text": lambda: gateway.call_text(text, "u1", CALL_ID),
        "chat, dict": lambda: run_openai_tool_calls(gateway, [tool_call], "u1"),
        "responses, dict": lambda: run_responses_function_calls(gateway, [item], "u1"),
        "anthropic, dict": lambda: run_anthropic_tool_uses(gateway, [block], "u1"),
    }
    try:
        from openai.types.chat import ChatCompletionMessageFunctionToolCall
        from openai.types.responses import ResponseFunctionToolCall
    except ImportError:
        pass
    else:
        sdk_call = [ChatCompletionMessageFunctionToolCall.model_validate(tool_call)]
        sdk_item = [ResponseFunctionToolCall.model_validate(item)]
        found["chat, SDK object"] = lambda: run_openai_tool_calls(gateway, sdk_call, "u1")
        found["responses, SDK object"] = lambda: run_responses_function_calls(
            gateway, sdk_item, "u1"
        )
    try:
        from anthropic.types import ToolUseBlock
    except ImportError:
        return found
    sdk_block = [ToolUseBlock.model_validate(block)]
    found["anthropic, SDK object"] = lambda: run_anthropic_tool_uses(gateway, sdk_block, "u1")
    return found


def check(name: str, case: str, out: Any) -> None:
    """Refuse to time a wrong answer."""
    if name.startswith("Gateway"):
        answer = json.loads(out) if isinstance(out, bytes) else out
        ok = answer["ok"] is True if case == "valid" else answer["error"]["code"]
    else:
        (message,) = out
        content = message.get("content", message.get("output"))
        ok = json.loads(content) if case == "valid" else json.loads(content)["code"]
    want: Any = True if name.startswith("Gateway") and case == "valid" else None
    if case == "valid" and not name.startswith("Gateway"):
        want = {"note_id": "n1", "text": N1_TEXT}
    if case == "invalid":
        want = "invalid_arguments"
    if ok != want:
        raise SystemExit(f"WRONG answer from {name} ({case}): {out!r}"[:300])


def batch(fn: Callable[[], Any], n: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = CLOCK()
        for _ in range(n):
            fn()
        return CLOCK() - start
    finally:
        gc.enable()


def calibrate(fn: Callable[[], Any], seconds: float) -> int:
    n = 100
    while batch(fn, n) < seconds / 4:
        n *= 2
    return max(100, int(n * seconds / max(batch(fn, n), 1e-9)))


def measure(rounds: int, seconds: float) -> list[dict[str, Any]]:
    gateway = in_memory_gateway()
    rows = []
    for case in ARGUMENTS:
        found = targets(gateway, case)
        for name, fn in found.items():
            check(name, case, fn())
        sizes = {name: calibrate(fn, seconds) for name, fn in found.items()}
        us: dict[str, list[float]] = {name: [] for name in found}
        ratios: dict[str, list[float]] = {name: [] for name in found}
        baseline, base_n = found["Gateway.call"], sizes["Gateway.call"]
        for round_ in range(rounds):
            for name, fn in found.items():
                # each figure beside its own baseline batch: on a shared machine, the load
                # changes between batches, and a ratio of neighbours is what holds; which of
                # the two goes first alternates, so neither is always the one run warm
                if fn is baseline:
                    per_call = base = batch(baseline, base_n) / base_n
                elif round_ % 2:
                    per_call = batch(fn, sizes[name]) / sizes[name]
                    base = batch(baseline, base_n) / base_n
                else:
                    base = batch(baseline, base_n) / base_n
                    per_call = batch(fn, sizes[name]) / sizes[name]
                us[name].append(per_call * 1e6)
                ratios[name].append(per_call / base)
        for name in found:
            rows.append(
                {
                    "case": case,
                    "target": name,
                    "us_per_call": round(statistics.median(us[name]), 2),
                    "x_gateway_call": round(statistics.median(ratios[name]), 3),
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"Adapter overhead, read_note on the in-memory gateway (target <= {TARGET_RATIO}x):",
        "",
        "| case | target | µs per call | x Gateway.call | goal |",
        "|---|---|---:|---:|---|",
    ]
    for row in rows:
        adapter = not row["target"].startswith("Gateway")
        goal = ""
        if adapter:
            goal = "met" if row["x_gateway_call"] <= TARGET_RATIO else "NOT met"
        lines.append(
            f"| {row['case']} | {row['target']} | {row['us_per_call']:.2f} | "
            f"{row['x_gateway_call']:.2f} | {goal} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=float, default=0.05, help="seconds per timed batch")
    args = parser.parse_args(argv)
    rows = measure(args.rounds, args.batch)
    print("\n".join(table(rows)))
    print(json.dumps({"process": "adapters", "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
