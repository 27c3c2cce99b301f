"""What one call of a function did (returned, raised, ran out of time, changed its input),
compared strictly: 0, 0.0 and False are three different values."""

from __future__ import annotations

import copy
import math
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["returned", "raised", "timeout"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One call's outcome; `input_after` is set only when the call changed its arguments."""

    kind: Kind
    value: Any = None
    exception: str = ""
    mutated: bool = False
    input_after: Any = None

    def as_json(self, seconds: float) -> dict[str, Any]:
        """The outcome as a JSON object for `check --json`."""
        answer: dict[str, Any]
        if self.kind == "returned":
            answer = {"outcome": "returned", "value": jsonable(self.value)}
            if not is_json_like(self.value):
                answer["repr"] = repr(self.value)
        elif self.kind == "raised":
            answer = {"outcome": "raised", "exception": self.exception}
        else:
            answer = {"outcome": "timeout", "seconds": seconds}
        if self.mutated:
            answer["mutated_input"] = jsonable(self.input_after)
        return answer


def same_value(a: object, b: object) -> bool:
    """Equality that tells 0, 0.0 and False apart, and 1 from 1.0, at every depth."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        assert isinstance(b, float)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)  # -0.0 is not 0.0
    try:
        return bool(a == b)
    except Exception:  # an object whose == raises is equal only to itself
        return a is b


def same_outcome(a: Outcome, b: Outcome) -> bool:
    """True when two calls did the same thing: the same value, exception type or time-out, and
    the same change (or none) to their input."""
    if a.kind != b.kind or a.mutated != b.mutated:
        return False
    if a.mutated and not same_value(a.input_after, b.input_after):
        return False
    if a.kind == "returned":
        return same_value(a.value, b.value)
    return a.exception == b.exception


def is_json_like(value: object) -> bool:
    """True for the values JSON has: None, bool, int, finite float, str, and lists and dicts
    (with str keys) of them."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_json_like(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json_like(v) for k, v in value.items())
    return False


def jsonable(value: object) -> Any:
    """The value as JSON can carry it: tuples as lists, anything else not JSON as its repr."""
    if is_json_like(value):
        return value
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    return repr(value)


class _Hang(BaseException):
    """Raised into a call that ran past its time limit (a BaseException, so that the
    function's own `except Exception` does not swallow it)."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Hang


class Caller:
    """Calls functions under a per-call time limit and records what they did.

    On the main thread of a POSIX process a timer signal interrupts a call that runs too
    long (a busy loop included). Elsewhere the call runs on a worker thread, which is
    abandoned when it hangs. Use it as a context manager.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.timeouts = 0
        self._signals = False
        self._previous: Any = None

    def __enter__(self) -> Caller:
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGALRM, _on_alarm)
            self._signals = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._signals:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._signals = False

    def call(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
        """Call `function` on a deep copy of `args` and say what it did."""
        mine = copy.deepcopy(args)
        if self._signals:
            outcome = self._call_interrupted(function, mine)
        else:
            outcome = self._call_on_thread(function, mine)
        if outcome.kind == "timeout":
            self.timeouts += 1
            return outcome
        if not same_value(mine, args):
            return Outcome(
                outcome.kind, outcome.value, outcome.exception, True, copy.deepcopy(mine)
            )
        return outcome

    def _call_interrupted(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
        try:
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            try:
                value = function(*args)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _Hang:
            return Outcome("timeout")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: the function's own outcome, not ours
            return Outcome("raised", exception=exception_name(exc))
        return Outcome("returned", value)

    def _call_on_thread(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
        box: list[Outcome] = []

        def run() -> None:
            try:
                box.append(Outcome("returned", function(*args)))
            except BaseException as exc:  # a worker thread has nothing above it to tell
                box.append(Outcome("raised", exception=exception_name(exc)))

        worker = threading.Thread(target=run, daemon=True, name="strictcall-check")
        worker.start()
        worker.join(self.seconds)
        return box[0] if box else Outcome("timeout")


def exception_name(exc: BaseException) -> str:
    """An exception's type, qualified unless it is a builtin."""
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
