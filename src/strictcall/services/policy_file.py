"""The policy file on disk: read and checked (`strictcall policy check`, `--policy FILE`), put
in force with its shared quota state, and read again on SIGHUP.

A file whose name ends in .json is JSON; any other is TOML. A reload validates the new file
first: a bad one is refused with its line and reason (one line on stderr) and the policy in
force stays; calls in flight finish under the policy they were routed with.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from strictcall.core.policy import Policy, PolicyHolder, parse_policy
from strictcall.core.quota import QuotaStoreDown, SharedBuckets
from strictcall.errors import PolicyFileError


def read_policy(path: str) -> Policy:
    """The policy in the file at `path` (JSON when it ends in .json, else TOML).

    Raises:
        PolicyFileError: the file cannot be read, or is not a valid policy (line, reason).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PolicyFileError(0, "the file is not UTF-8 text") from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise PolicyFileError(0, f"cannot read the file: {why}") from None
    return parse_policy(text, format="json" if path.endswith(".json") else "toml")


def shared_buckets(url: str) -> SharedBuckets:
    """The shared quota state at `url` (Redis: `strictcall.storage.quotas`).

    Raises:
        MissingExtra: redis-py is not installed (`strictcall[quotas]`).
        QuotaStoreDown: the URL cannot be used.
    """
    from strictcall.storage.quotas import RedisBuckets

    return RedisBuckets(url)


def load_holder(path: str) -> PolicyHolder:
    """The policy in the file at `path`, in force, with its shared state where it names one.

    Raises:
        PolicyFileError: the file is not a valid policy, or its shared state's URL is not.
        MissingExtra: it shares quotas and redis-py is not installed.
    """
    policy = read_policy(path)
    try:
        return PolicyHolder(policy, shared=shared_buckets)
    except QuotaStoreDown as exc:
        raise PolicyFileError(0, f"[quotas] shared: {exc}") from None


def reload_policy(holder: PolicyHolder, path: str, err: TextIO) -> bool:
    """Read the file at `path` again and put it in force, or keep the policy in force and say
    why in one line on `err` (the line and the reason). Returns whether it changed."""
    try:
        policy = read_policy(path)
        holder.replace(policy)
    except (PolicyFileError, QuotaStoreDown, ValueError) as exc:
        err.write(f"strictcall: policy {path} not reloaded, the old one stays: {exc}\n")
        err.flush()
        return False
    err.write(f"strictcall: policy {path} reloaded\n")
    err.flush()
    return True


def reload_on_sighup(holder: PolicyHolder, path: str, err: TextIO) -> Callable[[], None]:
    """Reload the policy on SIGHUP (on a thread of its own, so that the signal handler does no
    I/O). Returns the function that puts the previous handler back. Only from the main thread.
    """
    wanted = threading.Event()
    stopped = threading.Event()

    def reloader() -> None:
        while True:
            wanted.wait()
            wanted.clear()
            if stopped.is_set():
                return
            reload_policy(holder, path, err)

    thread = threading.Thread(target=reloader, name="strictcall-policy-reload", daemon=True)
    thread.start()
    previous = signal.signal(signal.SIGHUP, lambda signum, frame: wanted.set())

    def restore() -> None:
        signal.signal(signal.SIGHUP, previous)
        stopped.set()
        wanted.set()

    return restore
