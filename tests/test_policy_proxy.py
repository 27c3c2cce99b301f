"""`strictcall proxy --policy FILE`: the upstream's tools judged by the same policy as serve's:
each caller lists and calls its own, a hidden one is answered like a missing one, a rule's
quota holds before the upstream is asked."""

from __future__ import annotations

from pathlib import Path

from mcp_peers import StdioProxy, error_of, fastmcp_command
from strictcall.errors import RATE_LIMITED, UNKNOWN_TOOL

POLICY = """
[[rule]]
name = "adders"
who = ["u1"]
tools = ["add"]
rate = "2/hour"
burst = 2

[[rule]]
name = "readers"
who = ["u1"]
tools = ["read_*"]
"""


def test_the_proxy_serves_each_caller_the_tools_its_policy_grants(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    proxy = StdioProxy(tmp_path, fastmcp_command(), "--identity", "u1", "--policy", str(policy))
    try:
        assert proxy.peer.tool_names() == {"add", "read_note"}
        for name in ("broken_count", "no_such_tool", "Add", "add "):
            error = error_of(proxy.peer.call(name, {}))
            assert (error["code"], error["available"]) == (UNKNOWN_TOOL.code, ["add", "read_note"])
        for _ in range(2):
            assert proxy.peer.call("add", {"a": 1, "b": 1})["structuredContent"] == {"result": 2}
        over = error_of(proxy.peer.call("add", {"a": 1, "b": 1}))
        assert (over["code"], over["rule"]) == (RATE_LIMITED.code, "adders")
    finally:
        proxy.close()
