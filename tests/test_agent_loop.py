"""The agent loop end to end: the adapters without the SDKs, and both examples' loops on the
real clients against the local stand-in model server."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapter_tools import adapter_gateway, error_of, is_kind
from doc_pages import page
from strictcall import errors

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_script(script: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_adapters_import_and_run_with_neither_sdk_installed() -> None:
    script = (
        "import sys, json\n"
        "for name in ('openai', 'anthropic', 'agents'):\n"
        "    sys.modules[name] = None\n"  # importing them now raises ImportError
        "from strictcall import Gateway, tool\n"
        "from strictcall.transports.providers import (run_openai_tool_calls, "
        "run_responses_function_calls,\n"
        "    run_anthropic_tool_uses)\n"
        "@tool()\n"
        "def add(a: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a\n"
        "g = Gateway([add])\n"
        "text = '{\"a\":0}'\n"
        "call = {'id': 'c1', 'type': 'function', 'function': {'name': 'add', 'arguments': text}}\n"
        "item = {'type': 'function_call', 'call_id': 'c2', 'name': 'add', 'arguments': text}\n"
        "use = {'type': 'tool_use', 'id': 'c3', 'name': 'add', 'input': {'a': 0}}\n"
        "print(json.dumps(run_openai_tool_calls(g, [call], 'u1')))\n"
        "print(json.dumps(run_responses_function_calls(g, [item], 'u1')))\n"
        "print(json.dumps(run_anthropic_tool_uses(g, [use], 'u1')))\n"
    )
    lines = [json.loads(line) for line in run_script(script)]

    assert lines == [
        [{"role": "tool", "tool_call_id": "c1", "content": "0"}],
        [{"type": "function_call_output", "call_id": "c2", "output": "0"}],
        [{"type": "tool_result", "tool_use_id": "c3", "content": "0", "is_error": False}],
    ]


def test_importing_the_adapters_imports_no_sdk() -> None:
    script = (
        "import sys\n"
        "import strictcall.transports.providers\n"
        "print(sorted(n for n in ('openai', 'anthropic', 'agents') if n in sys.modules))\n"
    )
    assert run_script(script) == ["[]"]


def test_call_parsed_answers_as_call_does_for_the_same_call() -> None:
    gateway = adapter_gateway()
    texts = ['{"name":"add","arguments":{"a":1}}', '{"name":"add","arguments":{"a":1.0}}']
    texts += ['{"name":"nope","arguments":{}}', '{"name":"add","arguments":{},"x":1}']
    for text in texts:
        value = json.loads(text)
        has_float = "." in text
        assert gateway.call_parsed(value, "u1", "c1", has_float=has_float) == gateway.call(
            text, "u1", "c1"
        )


@pytest.mark.parametrize(
    "arguments",
    [
        '{"a":1}',
        '{"a":1.0}',
        '{"a":1,"b":2}',
        '{"a":"1"}',
        "{}",
        "[]",
        '{"a":1,"x":0}',
        '{"a":2e0}',
    ],
)
@pytest.mark.parametrize("name", ["add", "nope", "ping"])
def test_call_arguments_answers_as_call_does_for_the_same_call(name: str, arguments: str) -> None:
    gateway = adapter_gateway()
    text = '{"name":' + json.dumps(name) + ',"arguments":' + arguments + "}"

    assert gateway.call_arguments(name, arguments, "u1", "c1") == gateway.call(text, "u1", "c1")
    assert gateway.call_arguments(name, arguments.encode(), "u1", 7) == gateway.call(text, "u1", 7)


def test_call_arguments_with_an_empty_text_answers_as_a_call_without_arguments() -> None:
    gateway = adapter_gateway()
    for name in ("ping", "add"):
        without = gateway.call('{"name":' + json.dumps(name) + "}", "u1", "c1")
        assert gateway.call_arguments(name, "", "u1", "c1") == without
        assert gateway.call_arguments(name, b"", "u1", "c1") == without


def test_call_arguments_locates_a_parse_error_in_the_arguments_text() -> None:
    gateway = adapter_gateway()
    answer = gateway.call_arguments("add", '{\n "a": NaN}', "u1", "c1")

    error = answer["error"]
    assert is_kind(error, errors.INVALID_JSON)
    assert (error["reason"], error["line"], error["column"]) == ("syntax", 2, 7)


def test_call_arguments_lets_the_arguments_text_nest_to_the_depth_limit() -> None:
    gateway = adapter_gateway()
    limit = gateway.limits.max_depth
    deepest = '{"value":' + "[" * (limit - 1) + "]" * (limit - 1) + "}"

    assert gateway.call_arguments("echo", deepest, "u1", "c1")["ok"] is True
    error = gateway.call_arguments("echo", "[" + deepest + "]", "u1", "c1")["error"]
    assert is_kind(error, errors.INVALID_JSON)
    assert (error["reason"], error["limit"], error["arguments_limit"]) == ("too_deep", limit, limit)


def test_call_arguments_refuses_a_name_that_is_not_a_str_as_an_unknown_tool() -> None:
    gateway = adapter_gateway()
    for name in (None, 1, ["add"], ""):
        error = gateway.call_arguments(name, "{}", "u1", "c1")["error"]  # type: ignore[arg-type]
        assert is_kind(error, errors.UNKNOWN_TOOL)
        assert "add" in error["available"]


def test_call_arguments_refuses_a_callers_programming_error() -> None:
    gateway = adapter_gateway()
    with pytest.raises(TypeError):
        gateway.call_arguments("add", "{}", None, "c1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gateway.call_arguments("add", "{}", "u1", "")


# --- the examples ------------------------------------------------------------------------------


def run_example(name: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_openai_example_loops_fix_a_refused_call_from_its_located_error() -> None:
    lines = run_example("agent_loop_openai.py")
    chat = [line for line in lines if line["api"] == "chat"]
    responses = [line for line in lines if line["api"] == "responses"]

    count, bad, fixed, final = chat
    assert (count["turn"], count["content"]) == (1, "0")
    error = error_of(bad["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert (error["pointer"], error["reason"]) == ("/arguments/due", "unexpected_member")
    assert fixed["turn"] == 2
    assert json.loads(fixed["content"]) == {
        "task_id": "t1",
        "title": "Buy milk",
        "priority": "high",
    }
    assert "final" in final

    bad, fixed, final = responses
    error = error_of(bad["content"])
    assert is_kind(error, errors.INVALID_JSON)
    assert error["reason"] == "duplicate_member"
    assert json.loads(fixed["content"])["task_id"] == "t1"
    assert "final" in final


def test_the_anthropic_example_loop_fixes_a_refused_call_from_its_located_error() -> None:
    count, bad, fixed, final = run_example("agent_loop_anthropic.py")

    assert (count["content"], count["is_error"]) == ("0", False)
    assert bad["is_error"] is True
    error = error_of(bad["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert (error["pointer"], error["reason"], error["expected"]) == (
        "/arguments/priority",
        "enum",
        ["low", "high"],
    )
    assert (fixed["turn"], fixed["is_error"]) == (2, False)
    assert "final" in final


@pytest.fixture
def examples_on_path() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


def test_the_openai_stand_in_refuses_a_loop_that_drops_the_tool_results(
    examples_on_path: None,
) -> None:
    import openai

    example: Any = importlib.import_module("agent_loop_openai")
    with example.stand_in() as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="stand-in", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": example.TASK}]
        first = client.chat.completions.create(model=example.MODEL, messages=messages)
        messages.append(first.choices[0].message)  # the assistant's calls, but no results
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model=example.MODEL, messages=messages)


def test_the_anthropic_stand_in_refuses_results_that_are_not_first_in_one_user_message(
    examples_on_path: None,
) -> None:
    import anthropic

    example: Any = importlib.import_module("agent_loop_anthropic")
    with example.stand_in() as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="stand-in", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": example.TASK}]
        first = client.messages.create(model=example.MODEL, max_tokens=64, messages=messages)
        results = example.run_anthropic_tool_uses(example.task_gateway(), first, "u1")
        messages.append({"role": "assistant", "content": first.content})
        messages.append({"role": "user", "content": [{"type": "text", "text": "done"}, *results]})
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(model=example.MODEL, max_tokens=64, messages=messages)


def test_the_readmes_ten_line_loop_runs_against_the_stand_in(
    examples_on_path: None, capsys: pytest.CaptureFixture[str]
) -> None:
    section = page("agent-loop.md")
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in code.splitlines() if line]) <= 11  # imports and the loop
    example: Any = importlib.import_module("agent_loop_openai")
    with example.stand_in() as server:
        local = code.replace("OpenAI()", f"OpenAI(base_url={server.url + '/v1'!r}, api_key='k')")
        assert local != code
        exec(local, {"gateway": example.task_gateway()})

    assert "Buy milk" in capsys.readouterr().out


def test_a_retried_turn_is_idempotent_because_the_call_id_is_the_gateways(tmp_path: Path) -> None:
    from strictcall.services.notes import notes_gateway
    from strictcall.storage.sqlite import SQLiteStore
    from strictcall.transports.providers import run_anthropic_tool_uses, run_openai_tool_calls

    store = SQLiteStore(tmp_path / "notes.sqlite3")
    try:
        gateway = notes_gateway(store)
        create = {"name": "create_note", "arguments": '{"text":"milk"}'}
        turn = [{"id": "call_1", "type": "function", "function": create}]
        first = run_openai_tool_calls(gateway, turn, "u1")
        again = run_openai_tool_calls(gateway, turn, "u1")  # the same turn, retried
        block = {"type": "tool_use", "id": "toolu_1", "name": "create_note"}
        other = run_anthropic_tool_uses(gateway, [{**block, "input": {"text": "eggs"}}], "u1")
        count = run_openai_tool_calls(
            gateway,
            [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "count_notes", "arguments": "{}"},
                }
            ],
            "u1",
        )
    finally:
        store.close()

    assert again == first
    assert json.loads(first[0]["content"])["text"] == "milk"
    assert json.loads(other[0]["content"])["text"] == "eggs"
    assert count[0]["content"] == "2"
