"""The policy in process: the file read strictly (its line and reason on a bad one), one
evaluation for the listing and the call, a hidden tool answered exactly like a missing one by
any spelling, per-tool limits, local quotas, a reload that lets calls in flight finish."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strictcall import Gateway, Tool, ToolContext
from strictcall.core.policy import DEFAULT_DENY, Policy, PolicyHolder, Rule, parse_policy
from strictcall.core.quota import Bucket, LocalBuckets
from strictcall.core.record import record_of
from strictcall.errors import (
    ARGUMENTS_TOO_LARGE,
    RATE_LIMITED,
    RESULT_TOO_LARGE,
    TIMEOUT,
    UNKNOWN_TOOL,
    JSONValue,
    PolicyFileError,
)

RAN: list[str] = []


def _tool(name: str, *, size: int = 1, wait: threading.Event | None = None) -> Tool:
    def handler(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
        RAN.append(name)
        if wait is not None:
            wait.wait(10)
        return "x" * size

    return Tool(
        name=name,
        description=f"{name}.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        output_schema={"type": "string"},
        handler=handler,
    )


TOOLS = ["read_note", "create_note", "delete_note", "github__issues", "github__pulls"]

POLICY = """
[[rule]]
name = "readers"
who = ["u1", "group:support", "scope:notes.read"]
tools = ["read_note", "github__*"]

[[rule]]
name = "admins"
who = ["root"]
tools = ["*"]

[[rule]]
name = "nobody"
who = ["*"]
tools = []
"""


def gateway(text: str = POLICY, **tools: Tool) -> Gateway:
    made = [tools.get(name, _tool(name)) for name in TOOLS]
    return Gateway(made, policy=PolicyHolder(parse_policy(text)))


def call(gw: Gateway, name: str, identity: str, args: str = "{}") -> dict[str, Any]:
    raw = f'{{"name": {_json(name)}, "arguments": {args}}}'
    return gw.call(raw, identity, "c1")


def _json(value: str) -> str:
    import json

    return json.dumps(value)


def listed(gw: Gateway, identity: str, claims: frozenset[str] | None = None) -> set[str]:
    return {entry["name"] for entry in gw.listing(identity, "mcp", claims)}


# --- the file ----------------------------------------------------------------------------------


def test_a_policy_file_in_toml_and_the_same_in_json_read_alike() -> None:
    as_json = """{"rule": [
      {"name": "readers", "who": ["u1", "group:support", "scope:notes.read"],
       "tools": ["read_note", "github__*"]},
      {"name": "admins", "who": ["root"], "tools": ["*"]},
      {"name": "nobody", "who": ["*"], "tools": []}
    ]}"""
    assert parse_policy(POLICY) == parse_policy(as_json, format="json")


BAD = [
    ("rate_zero", '[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["*"]\nrate = "0/minute"\n', 5),
    (
        "burst_zero",
        '[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["*"]\nrate = "1/minute"\nburst = 0\n',
        6,
    ),
    ("burst_float", '[[quota]]\nname = "q"\nper = "identity"\nrate = "1/second"\nburst = 1.5\n', 5),
    ("unknown_key", '[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["*"]\ntimout = 3\n', 5),
    ("unknown_section", 'name = "a"\n\n[[rules]]\nname = "b"\n', 1),
    ("no_name", '[[rule]]\nwho = ["*"]\ntools = ["*"]\n', 1),
    (
        "twice",
        '[[rule]]\nname = "a"\nwho = ["*"]\ntools = []\n\n'
        '[[quota]]\nname = "a"\nper = "global"\nrate = "1/hour"\n',
        7,
    ),
    ("no_who", '[[rule]]\nname = "a"\ntools = ["*"]\n', 1),
    ("who_str", '[[rule]]\nname = "a"\nwho = "*"\ntools = ["*"]\n', 3),
    ("tools_star_inside", '[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["a*b"]\n', 4),
    ("timeout_bool", '[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["*"]\ntimeout = true\n', 5),
    ("size_zero", '[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["*"]\nmax_result_bytes = 0\n', 5),
    ("per_bad", '[[quota]]\nname = "q"\nper = "tool"\nrate = "1/second"\n', 3),
    ("rate_text", '[[quota]]\nname = "q"\nper = "global"\nrate = "often"\n', 4),
    ("default_deny", '[[rule]]\nname = "default-deny"\nwho = ["*"]\ntools = []\n', 2),
    ("down_mode", '[[rule]]\nname = "a"\nwho = ["*"]\ntools = []\non_shared_down = "maybe"\n', 5),
    ("shared_url", '[quotas]\nshared = "http://x"\n', 2),
    ("syntax", '[[rule]]\nname = "a"\nwho = ["*"\n', 4),
    ("claim_empty", '[[rule]]\nname = "a"\nwho = ["group:"]\ntools = []\n', 3),
    (
        "server_request_unknown",
        '[[rule]]\nname = "a"\nwho = ["*"]\ntools = []\nserver_requests = ["pings"]\n',
        5,
    ),
    (
        "server_requests_str",
        '[[rule]]\nname = "a"\nwho = ["*"]\ntools = []\nserver_requests = "roots"\n',
        5,
    ),
    (
        "server_request_twice",
        '[[rule]]\nname = "a"\nwho = ["*"]\ntools = []\nserver_requests = ["roots", "roots"]\n',
        5,
    ),
]


@pytest.mark.parametrize(("text", "line"), [(t, n) for _, t, n in BAD], ids=[b[0] for b in BAD])
def test_a_bad_policy_is_refused_with_the_line_it_is_on(text: str, line: int) -> None:
    with pytest.raises(PolicyFileError) as refused:
        parse_policy(text)
    assert refused.value.line == line
    assert refused.value.reason


def test_a_bad_json_policy_is_refused_with_the_line_it_is_on() -> None:
    text = (
        '{"rule": [\n  {"name": "a", "who": ["*"], "tools": ["*"]},\n'
        '  {"name": "b",\n   "who": 3, "tools": []}\n]}'
    )
    with pytest.raises(PolicyFileError) as refused:
        parse_policy(text, format="json")
    assert refused.value.line == 4
    duplicate = '{"rule": [],\n "rule": []}'
    with pytest.raises(PolicyFileError) as twice:
        parse_policy(duplicate, format="json")
    assert twice.value.line == 1


def test_burst_defaults_to_the_count_and_absent_limits_are_none_not_zero() -> None:
    policy = parse_policy('[[rule]]\nname = "a"\nwho = ["*"]\ntools = ["*"]\nrate = "60/minute"\n')
    rule = policy.rules[0]
    assert rule.rate is not None and (rule.rate.count, rule.rate.burst) == (60, 60)
    assert rule.limits.max_result_bytes is None and rule.limits.timeout_s is None


# --- one evaluation: the listing and the call ---------------------------------------------------


def test_each_caller_lists_exactly_what_the_first_matching_rules_grant() -> None:
    gw = gateway()
    assert listed(gw, "u1") == {"read_note", "github__issues", "github__pulls"}
    assert listed(gw, "root") == set(TOOLS)
    assert listed(gw, "u2") == set()  # an empty tools list grants nothing, never everything
    assert listed(gw, "u2", frozenset({"group:support"})) == listed(gw, "u1")
    assert listed(gw, "u2", frozenset({"scope:notes.read"})) == listed(gw, "u1")
    # a name that looks like a claim is a name, not the claim
    assert listed(gw, "group:support") == set()


def test_a_hidden_tool_is_answered_exactly_like_a_missing_one() -> None:
    gw = gateway()
    hidden = call(gw, "delete_note", "u1")
    missing = call(gw, "no_such_tool", "u1")
    assert hidden == missing
    assert hidden["error"]["code"] == UNKNOWN_TOOL.code
    assert hidden["error"]["available"] == ["github__issues", "github__pulls", "read_note"]


SPELLINGS = [
    "Delete_note",
    "DELETE_NOTE",
    "delete_note ",
    " delete_note",
    "delete_note\n",
    "delete_note\u200b",
    "d\u0435lete_note",  # a Cyrillic e
    "\uff44elete_note",  # a fullwidth d
    "delete\u2010note",
    "delete_not\u0065\u0301",
    "delete_not\u0435",
    "delete_note\u00a0",
    "delete\u2024note",
]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=[repr(s) for s in SPELLINGS])
def test_no_spelling_of_a_hidden_name_reaches_it(spelling: str) -> None:
    gw = gateway()
    RAN.clear()
    answer = call(gw, spelling, "u1")
    assert answer == call(gw, "no_such_tool", "u1")
    assert RAN == []


def test_a_refusal_of_the_policy_is_audited_with_its_rule_and_nothing_of_the_call() -> None:
    gw = gateway()
    outcome = gw.settle({"name": "delete_note", "arguments": {}}, "u1", "c1")
    record = record_of(outcome, "u1")
    assert (record.code, record.reason, record.tool) == (
        UNKNOWN_TOOL.code,
        DEFAULT_DENY,
        "delete_note",
    )
    missing = record_of(gw.settle({"name": "nope", "arguments": {}}, "u1", "c2"), "u1")
    assert (missing.code, missing.reason, missing.tool) == (UNKNOWN_TOOL.code, None, None)


tool_names = st.sampled_from(TOOLS)
patterns = st.one_of(tool_names, st.just("*"), st.sampled_from(["github__*", "read_*", "x*"]))
who_entries = st.sampled_from(["*", "u1", "u2", "group:a", "group:b", "scope:s", "group:u1"])


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    count = draw(st.integers(0, 5))
    rules = tuple(
        Rule(
            f"r{i}",
            tuple(draw(st.lists(who_entries, max_size=3))),
            tuple(draw(st.lists(patterns, max_size=3))),
        )
        for i in range(count)
    )
    return Policy(rules)


@given(
    policy=policies(),
    name=st.sampled_from(["u1", "u2", "u3", "group:a"]),
    claims=st.none() | st.frozensets(st.sampled_from(["group:a", "group:b", "scope:s"])),
)
@settings(max_examples=150, deadline=None)
def test_the_listing_and_the_call_agree_for_any_policy_and_caller(
    policy: Policy, name: str, claims: frozenset[str] | None
) -> None:
    gw = Gateway([_tool(n) for n in TOOLS], policy=PolicyHolder(policy))
    shown = {entry["name"] for entry in gw.listing(name, "mcp", claims)}
    for tool_name in [*TOOLS, "Read_note", "read_note "]:
        routed = gw.tools_for(name, claims)
        callable_ = tool_name in routed
        assert callable_ == (tool_name in shown)
        if name not in ("group:a",) and claims is None:
            answer = call(gw, tool_name, name)
            assert (answer["ok"] is True) == (tool_name in shown)
            if not answer["ok"]:
                assert answer["error"]["available"] == sorted(shown)


# --- per-tool limits ----------------------------------------------------------------------------


LIMITS = """
[[rule]]
name = "small"
who = ["u1"]
tools = ["read_note", "create_note"]
max_arguments_bytes = 20
max_result_bytes = 10
timeout = 0.2
"""


def test_arguments_beyond_the_rules_limit_are_refused_before_the_tool_runs() -> None:
    gw = gateway(LIMITS)
    RAN.clear()
    assert call(gw, "read_note", "u1", '{"text": "short"}')["ok"] is True
    answer = call(gw, "read_note", "u1", '{"text": "' + "y" * 30 + '"}')
    assert answer["error"]["code"] == ARGUMENTS_TOO_LARGE.code
    assert answer["error"]["stage"] == ARGUMENTS_TOO_LARGE.stage.value
    assert (answer["error"]["limit"], answer["error"]["rule"]) == (20, "small")
    assert RAN == ["read_note"]


def test_an_integer_beyond_64_bits_is_measured_not_let_through() -> None:
    counted = Tool(
        name="read_note",
        description="Takes a number.",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        output_schema={"type": "integer"},
        handler=lambda ctx, args: 1,
    )
    gw = gateway(LIMITS, read_note=counted)
    assert call(gw, "read_note", "u1", '{"n": ' + "9" * 10 + "}")["ok"] is True
    answer = call(gw, "read_note", "u1", '{"n": ' + "9" * 30 + "}")
    assert answer["error"]["code"] == ARGUMENTS_TOO_LARGE.code  # 30 digits: over 20 bytes


def test_a_result_beyond_the_rules_limit_is_withheld() -> None:
    gw = gateway(LIMITS, read_note=_tool("read_note", size=9))  # "xxxxxxxxx": 11 bytes
    answer = call(gw, "read_note", "u1")
    assert answer["error"]["code"] == RESULT_TOO_LARGE.code
    assert "x" * 9 not in str(answer)
    exact = gateway(LIMITS, read_note=_tool("read_note", size=8))  # 10 bytes: the limit
    assert call(exact, "read_note", "u1")["ok"] is True


def test_the_rules_timeout_holds_a_tool_that_has_none() -> None:
    wait = threading.Event()
    gw = gateway(LIMITS, create_note=_tool("create_note", wait=wait))
    try:
        answer = call(gw, "create_note", "u1")
        assert answer["error"]["code"] == TIMEOUT.code
    finally:
        wait.set()
        gw.close()


# --- quotas in one process ----------------------------------------------------------------------

QUOTAS = """
[[rule]]
name = "readers"
who = ["*"]
tools = ["read_note", "create_note"]
rate = "3/hour"
burst = 3

[[quota]]
name = "everyone"
per = "global"
rate = "5/hour"
burst = 5
tools = ["read_note"]
"""


def test_a_rule_rate_limits_each_identity_and_tool_before_the_tool_runs() -> None:
    gw = gateway(QUOTAS)
    RAN.clear()
    answers = [call(gw, "create_note", "u1") for _ in range(5)]
    assert [a["ok"] for a in answers] == [True, True, True, False, False]
    error = answers[3]["error"]
    assert (error["code"], error["stage"], error["retryable"]) == (
        RATE_LIMITED.code,
        RATE_LIMITED.stage.value,
        True,
    )
    assert error["rule"] == "readers"
    # one token an hour / 3 ... the wait is the bucket's: about 20 minutes, never 0
    assert 19 * 60_000 <= error["retry_after_ms"] <= 20 * 60_000
    assert RAN == ["create_note"] * 3
    assert call(gw, "create_note", "u2")["ok"] is True  # another identity's own bucket


def test_the_identities_nearest_their_quotas_come_first_for_the_operator() -> None:
    holder = PolicyHolder(parse_policy(QUOTAS))
    gw = Gateway([_tool(n) for n in TOOLS], policy=holder)
    for _ in range(3):
        call(gw, "create_note", "u1")
    call(gw, "create_note", "u2")
    nearest = holder.nearest(2)
    assert nearest[0] == {"identity": "u1", "rule": "readers", "left": 0.0}
    left = nearest[1]["left"]
    assert nearest[1]["identity"] == "u2" and isinstance(left, float) and 0.6 < left < 0.7


def test_a_global_quota_is_one_bucket_for_every_identity() -> None:
    gw = gateway(QUOTAS)
    oks = [call(gw, "read_note", f"u{i}")["ok"] for i in range(8)]
    assert oks == [True] * 5 + [False] * 3
    refused = call(gw, "read_note", "u99")["error"]
    assert (refused["code"], refused["rule"]) == (RATE_LIMITED.code, "everyone")


def test_a_call_refused_by_one_bucket_takes_no_token_from_the_others() -> None:
    clock = [0.0]
    local = LocalBuckets(lambda: clock[0])
    wide = Bucket("wide", 1000.0, 10, "wide", False)
    narrow = Bucket("narrow", 1000.0, 1, "narrow", False)
    assert local.take([wide, narrow]) is None
    assert local.take([wide, narrow]) is not None
    assert [local.take([wide]) for _ in range(9)] == [None] * 9  # 10 - 1: nothing more taken
    assert local.take([wide]) is not None
    clock[0] = 1.0  # a second: one token each
    assert local.take([wide, narrow]) is None


# --- reload -------------------------------------------------------------------------------------


def test_a_reload_applies_to_new_calls_and_a_call_in_flight_finishes_under_its_own() -> None:
    wait = threading.Event()
    holder = PolicyHolder(parse_policy(POLICY))
    gw = Gateway([_tool(n, wait=wait if n == "read_note" else None) for n in TOOLS], policy=holder)
    answers: list[dict[str, Any]] = []
    started = threading.Thread(target=lambda: answers.append(call(gw, "read_note", "u1")))
    RAN.clear()
    started.start()
    for _ in range(1000):  # the call has entered the tool
        if RAN:
            break
        threading.Event().wait(0.01)
    assert RAN == ["read_note"]
    holder.replace(parse_policy('[[rule]]\nname = "none"\nwho = ["*"]\ntools = []\n'))
    assert listed(gw, "u1") == set()
    assert call(gw, "read_note", "u1")["error"]["code"] == UNKNOWN_TOOL.code
    wait.set()
    started.join(10)
    assert answers and answers[0]["ok"] is True


def test_a_proxys_tools_replaced_later_are_judged_by_the_policy_too() -> None:
    # the proxy and federation serve an upstream's tools by `replace_tools`, prefixed or not
    gw = Gateway(policy=PolicyHolder(parse_policy(POLICY)))
    assert listed(gw, "u1") == set()
    gw.replace_tools([_tool("github__issues"), _tool("github__admin"), _tool("read_note")])
    assert listed(gw, "u1") == {"github__issues", "github__admin", "read_note"}
    gw.replace_tools([_tool("github__issues"), _tool("delete_note")])
    assert listed(gw, "u1") == {"github__issues"}
    assert call(gw, "delete_note", "u1")["error"]["available"] == ["github__issues"]


def test_a_callers_claims_reach_the_policy_through_settle() -> None:
    gw = gateway()
    call_ = {"name": "read_note", "arguments": {}}
    assert gw.settle(call_, "u9", "c1").answer["ok"] is False
    claims = frozenset({"group:support"})
    assert gw.settle(call_, "u9", "c1", claims=claims).answer["ok"] is True
    assert gw.must_await(call_, "u9", claims) is False


def test_the_readmes_policy_file_is_valid_and_says_what_the_readme_says() -> None:

    from doc_pages import page

    section = page("policy.md")
    text = section.split("```toml\n", 1)[1].split("```", 1)[0]
    policy = parse_policy(text)
    assert [rule.name for rule in policy.rules] == ["support", "everyone-reads"]
    assert policy.shared == "redis://127.0.0.1:6379/0"
    support = policy.rules[0]
    assert support.rate is not None and (support.rate.count, support.rate.burst) == (60, 10)
    assert support.server_requests == frozenset({"elicitation"})
    assert policy.quotas[0].per == "identity"


def test_a_rules_server_requests_reach_the_calls_it_grants_and_no_others() -> None:
    text = """
[[rule]]
name = "askers"
who = ["u1"]
tools = ["read_note"]
server_requests = ["elicitation"]

[[rule]]
name = "silent"
who = ["u2"]
tools = ["read_note"]
server_requests = []

[[rule]]
name = "open"
who = ["u3"]
tools = ["read_note"]
"""
    policy = parse_policy(text)
    assert [rule.server_requests for rule in policy.rules] == [
        frozenset({"elicitation"}),
        frozenset(),
        None,  # not said: whatever the caller's client offers
    ]
    seen: dict[str, frozenset[str] | None] = {}

    def handler(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
        seen[ctx.identity] = ctx.server_requests
        return "x"

    tool = Tool(
        name="read_note",
        description="Read.",
        input_schema={"type": "object"},
        output_schema={"type": "string"},
        handler=handler,
    )
    gw = Gateway([tool], policy=PolicyHolder(policy))
    for identity in ("u1", "u2", "u3"):
        assert gw.call('{"name": "read_note", "arguments": {}}', identity, "c1")["ok"] is True
    assert seen == {"u1": frozenset({"elicitation"}), "u2": frozenset(), "u3": None}
    # without a policy, nothing narrows what the caller's client offers
    plain = Gateway([tool])
    assert plain.call('{"name": "read_note", "arguments": {}}', "u9", "c1")["ok"] is True
    assert seen["u9"] is None


def test_policy_check_says_ok_or_the_line_and_exits_non_zero(tmp_path: Any) -> None:
    from servers import strictcall

    good = tmp_path / "good.toml"
    good.write_text(POLICY, encoding="utf-8")
    done = strictcall("policy", "check", str(good))
    assert done.returncode == 0 and done.stderr == ""
    bad = tmp_path / "bad.json"
    bad.write_text('{"rule": [\n  {"name": "a", "who": ["*"],\n   "tools": "x"}\n]}\n')
    refused = strictcall("policy", "check", str(bad))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and f"{bad}: line 3: " in refused.stderr
    kind = tmp_path / "kind.toml"
    kind.write_text('[[rule]]\nname = "a"\nwho = ["*"]\ntools = []\nserver_requests = ["x"]\n')
    unknown = strictcall("policy", "check", str(kind))
    assert unknown.returncode == 1 and f"{kind}: line 5: " in unknown.stderr
    missing = strictcall("policy", "check", str(tmp_path / "none.toml"))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1


def test_the_providers_path_and_listings_follow_the_policy_too() -> None:
    # the agent loops call `call_arguments` with the model's name and arguments text
    gw = gateway()
    for spelling in ["delete_note", *SPELLINGS]:
        answer = gw.call_arguments(spelling, "{}", "u1", "c1")
        assert answer == gw.call_arguments("no_such_tool", "{}", "u1", "c1")
    assert gw.call_arguments("read_note", "{}", "u1", "c1")["ok"] is True
    for host in ("openai", "openai-responses", "anthropic"):
        names = {
            entry["function"]["name"] if "function" in entry else entry["name"]
            for entry in gw.listing("u1", host)
        }
        assert names == {"read_note", "github__issues", "github__pulls"}


@pytest.mark.parametrize("uptime_s", [0.001, 5_400.0, 1.7e9, 4.1e9])
def test_a_full_bucket_admits_its_burst_whatever_the_clock_reads(uptime_s: float) -> None:
    # (start + interval) - now rounds above interval at large clock readings: a bucket of
    # burst 1 refused its first call with retry_after_ms 1
    from strictcall.core.quota import Bucket, LocalBuckets, Refused, gcra

    bucket = Bucket("b", 3_600_000.0, 1, "r", False)
    buckets = LocalBuckets(clock=lambda: uptime_s)
    assert buckets.take([bucket]) is None
    assert isinstance(buckets.take([bucket]), Refused)
    assert not isinstance(gcra([None], [bucket], uptime_s * 1000.0), Refused)
