"""Who may list and call which tools, with which limits, and how often: the policy file's
rules, read (`load`), judged for one caller (`model`) and held for the gateway (`holder`).

One evaluation serves tools/list and tools/call on every wire: the gateway's registry asks
`PolicyHolder.view` for a caller's tools, and a tool that is not in it is answered at route
exactly like one that does not exist.
"""

from strictcall.core.policy.grant import Grant
from strictcall.core.policy.holder import PolicyHolder
from strictcall.core.policy.load import parse_policy
from strictcall.core.policy.model import (
    DEFAULT_DENY,
    SERVER_REQUESTS,
    Policy,
    Quota,
    Rate,
    Rule,
    ToolLimits,
    policy_warnings,
)

__all__ = [
    "DEFAULT_DENY",
    "SERVER_REQUESTS",
    "Grant",
    "Policy",
    "PolicyHolder",
    "Quota",
    "Rate",
    "Rule",
    "ToolLimits",
    "parse_policy",
    "policy_warnings",
]
