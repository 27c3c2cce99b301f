"""The operator's commands behind the command line, by name: each command group's module holds
its bodies (`strictcall.cli.serve`, `.proxy`, `.call`, `.tokens`, `.notes`, `.audit`, `.policy`,
and `.federation` for federate and tools), and `strictcall.cli.store` what they share (the exit
statuses, the store opened or one line saying why not).

Each takes its streams as arguments and returns an exit status; only the command line parses.
The command line (and `strictcall.cli.federation`) reach them through this module, so that a
command moved between modules changes no caller.
"""

from strictcall.cli.audit import (
    FOLLOW_BATCH,
    FOLLOW_POLL_S,
    run_audit,
    run_audit_asked,
    run_audit_follow,
    run_stats,
)
from strictcall.cli.call import Answer, run_call
from strictcall.cli.notes import run_notes_add, run_notes_list
from strictcall.cli.policy import _policy_of, _reload_on_hangup, run_policy_check
from strictcall.cli.proxy import run_proxy
from strictcall.cli.serve import (
    DEMO_OWNERS,
    _demo_tokens,
    _prepare_demo,
    _print_demo,
    _token_hint,
    run_serve,
    run_serve_mcp_stdio,
)
from strictcall.cli.store import EXIT_FAILED, EXIT_OK, _open_store, _with_store
from strictcall.cli.tokens import (
    _audit_command,
    run_operator_token,
    run_tokens_create,
    run_tokens_list,
    run_tokens_revoke,
)

__all__ = [
    "DEMO_OWNERS",
    "EXIT_FAILED",
    "EXIT_OK",
    "FOLLOW_BATCH",
    "FOLLOW_POLL_S",
    "Answer",
    "_audit_command",
    "_demo_tokens",
    "_open_store",
    "_policy_of",
    "_prepare_demo",
    "_print_demo",
    "_reload_on_hangup",
    "_token_hint",
    "_with_store",
    "run_audit",
    "run_audit_asked",
    "run_audit_follow",
    "run_call",
    "run_notes_add",
    "run_notes_list",
    "run_operator_token",
    "run_policy_check",
    "run_proxy",
    "run_serve",
    "run_serve_mcp_stdio",
    "run_stats",
    "run_tokens_create",
    "run_tokens_list",
    "run_tokens_revoke",
]
