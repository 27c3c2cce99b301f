"""`strictcall policy check`, and the policy file as `serve`, `proxy` and `federate` put it in
force and reload it on SIGHUP."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, TextIO

from strictcall.cli.store import EXIT_FAILED, EXIT_OK
from strictcall.core.terminal import counted
from strictcall.errors import PolicyFileError

if TYPE_CHECKING:
    from strictcall.core.policy import PolicyHolder


def _policy_of(path: str | None, command: str, err: TextIO) -> PolicyHolder | Literal[False] | None:
    """The policy in the file at `path` in force (None without one), or False after one line
    on `err` saying why it cannot be (its line and reason); a policy with no rule is served,
    with a warning line."""
    if path is None:
        return None
    from strictcall.core.policy import policy_warnings
    from strictcall.services.policy_file import load_holder

    try:
        holder = load_holder(path)
    except PolicyFileError as exc:
        err.write(f"{command}: policy {path}: {exc}\n")
        return False
    for warning in policy_warnings(holder.current):
        err.write(f"{command}: policy {path}: warning: {warning}\n")
    return holder


def warn_unserved_rules(
    holder: PolicyHolder, served: Sequence[str], path: str, command: str, err: TextIO
) -> None:
    """One warning line for each rule of the policy in force whose tools match none of those
    `served` (it hides them all from its callers), as `proxy` and `federate` say it."""
    from strictcall.core.policy import policy_warnings

    if holder.current.rules:  # none at all: said once already, as the file was read
        for warning in policy_warnings(holder.current, served):
            err.write(f"{command}: policy {path}: warning: {warning}\n")
    err.flush()


def _reload_on_hangup(holder: PolicyHolder, path: str, err: TextIO) -> Callable[[], None] | None:
    """Reload the policy on SIGHUP, where this process can be told so (POSIX, main thread)."""
    import signal
    import threading

    if not hasattr(signal, "SIGHUP") or threading.current_thread() is not threading.main_thread():
        return None
    from strictcall.services.policy_file import reload_on_sighup

    return reload_on_sighup(holder, path, err)


def run_policy_check(path: str, *, out: TextIO, err: TextIO) -> int:
    """Check the policy file at `path`: one line saying what it holds (and a warning line on
    `err` for what is most likely a mistake: no rule at all), or one line with the line
    number and the reason it is not valid (exit 1)."""
    from strictcall.core.policy import policy_warnings
    from strictcall.services.policy_file import read_policy

    try:
        policy = read_policy(path)
    except PolicyFileError as exc:
        err.write(f"{path}: {exc}\n")
        return EXIT_FAILED
    shared = "" if policy.shared is None else ", quotas shared"
    rules, quotas = counted(len(policy.rules), "rule"), counted(len(policy.quotas), "quota")
    out.write(f"{path}: ok: {rules}, {quotas}{shared}\n")
    for warning in policy_warnings(policy):
        err.write(f"{path}: warning: {warning}\n")
    return EXIT_OK
