"""The counterexample search behind `strictcall check`: inputs on which two functions differ
(return value, exception type, time-out or a change to the input), smallest first."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from strictcall.errors import MissingExtra

try:
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import HypothesisException
except ImportError:  # pragma: no cover - the review extra is part of dev
    raise MissingExtra("review", "hypothesis") from None

from strictcall.review.hints import Hints
from strictcall.review.outcome import Caller, Outcome, same_outcome, same_value
from strictcall.review.values import (
    RandomSource,
    Source,
    base_arguments,
    neighbours,
    order_key,
    size,
)

MAX_TIMEOUTS = 3
"""After this many calls that ran out of time the search stops: each one costs the limit."""
MAX_KEPT = 50
HYPOTHESIS_EXAMPLES = 1000
"""Inputs hypothesis draws (and shrinks from) before the cheaper random source takes over."""
ENOUGH_AFTER_FOUND = 100
"""Inputs drawn after differences are known, before the search moves on to their neighbours."""


@dataclass(frozen=True, slots=True)
class Counterexample:
    """One input and what each side did with it."""

    args: tuple[Any, ...]
    old: Outcome
    new: Outcome

    @property
    def both_raised(self) -> bool:
        """Both sides raised (different types): shown after those where one side answered."""
        return self.old.kind != "returned" and self.new.kind != "returned"

    def sort_key(self) -> tuple[bool, int, str]:
        """Smallest first; among equals 0 before 0.0, False, None and the rest."""
        return (self.both_raised, size(self.args), order_key(self.args))


@dataclass(slots=True)
class Search:
    """The state of one search: what was run and what differed."""

    old: Callable[..., Any]
    new: Callable[..., Any]
    caller: Caller
    accept: Callable[[tuple[Any, ...]], bool] | None = None
    """Inputs outside the declared types are not run."""
    found: dict[str, Counterexample] = field(default_factory=dict)
    inputs_run: int = 0
    stopped: str = ""

    def compare(self, args: tuple[Any, ...]) -> Counterexample | None:
        """Run both sides on `args`; the counterexample when they differ."""
        self.inputs_run += 1
        old = self.caller.call(self.old, args)
        new = self.caller.call(self.new, args)
        if same_outcome(old, new):
            return None
        found = Counterexample(args, old, new)
        self.found.setdefault(order_key(args), found)
        return found

    def sorted(self) -> list[Counterexample]:
        """The counterexamples found, smallest first, without those that only add keys to a
        smaller one with the same two outcomes."""
        return _smallest(self.found.values())


def _smallest(examples: Iterable[Counterexample]) -> list[Counterexample]:
    kept: list[Counterexample] = []
    seen: set[str] = set()
    for example in sorted(examples, key=Counterexample.sort_key):
        key = order_key(example.args)
        if key in seen or any(_adds_to(smaller, example) for smaller in kept):
            continue
        seen.add(key)
        kept.append(example)
    return kept


def _adds_to(smaller: Counterexample, larger: Counterexample) -> bool:
    return (
        same_outcome(smaller.old, larger.old)
        and same_outcome(smaller.new, larger.new)
        and _within(smaller.args, larger.args)
    )


def _within(small: Any, large: Any) -> bool:
    """True when `large` is `small` with keys added somewhere."""
    if isinstance(small, dict) and isinstance(large, dict):
        return small.keys() <= large.keys() and all(_within(small[k], large[k]) for k in small)
    if isinstance(small, tuple) and isinstance(large, tuple) and len(small) == len(large):
        return all(_within(a, b) for a, b in zip(small, large, strict=True))
    return same_value(small, large)


class _Difference(AssertionError):
    """Tells hypothesis that an input is a counterexample, so that it shrinks it."""


class _Enough(BaseException):
    """Ends the hypothesis phase once the probes have found differences and it found none."""


class _StopSearch(BaseException):
    """Ends the search at once (hypothesis lets a BaseException through unshrunk)."""


@dataclass(frozen=True, slots=True)
class Report:
    """The result of a check."""

    counterexamples: tuple[Counterexample, ...]
    inputs_run: int
    stopped: str
    """Why the search ended early, or ""."""


def find_differences(
    old: Callable[..., Any],
    new: Callable[..., Any],
    strategy: st.SearchStrategy[tuple[Any, ...]],
    *,
    probes: Iterable[tuple[Any, ...]] = (),
    keep: frozenset[int] = frozenset(),
    keys: tuple[Any, ...] = (),
    fast: Callable[[Source], tuple[Any, ...]] | None = None,
    max_examples: int = 2000,
    timeout: float = 1.0,
    accept: Callable[[tuple[Any, ...]], bool] | None = None,
) -> Report:
    """Search for inputs on which `old` and `new` differ (only inputs `accept` takes).

    `probes` are tried first; then hypothesis draws up to HYPOTHESIS_EXAMPLES inputs from
    `strategy` and shrinks the first difference it meets; `fast` (the same generator on a
    seeded random source, far cheaper a draw) makes up the rest of `max_examples`; last come
    the neighbours of the smallest differences: every falsy and truthy value in each place,
    each key left out.
    """
    with Caller(timeout) as caller, contextlib.redirect_stdout(io.StringIO()):
        search = Search(old, new, caller, accept)
        try:
            for args in probes:
                _compare_or_stop(search, args)
            started = search.inputs_run
            budget = max_examples if fast is None else min(max_examples, HYPOTHESIS_EXAMPLES)
            _hypothesis_search(search, strategy, budget)
            if fast is not None:
                source = RandomSource(seed=0)
                while search.inputs_run - started < max_examples:
                    if search.found and search.inputs_run - started > ENOUGH_AFTER_FOUND:
                        break  # differences are known: the neighbours show their variety
                    _compare_or_stop(search, fast(source))
            for smallest in search.sorted()[:3]:
                for args in neighbours(smallest.args, keep, keys):
                    _compare_or_stop(search, args)
            shrunk = [_shrink(search, example, keep) for example in search.sorted()[:MAX_KEPT]]
        except _StopSearch:
            shrunk = search.sorted()
    kept = tuple(_smallest(shrunk)[:MAX_KEPT])
    return Report(kept, search.inputs_run, search.stopped)


SHRINK_STEPS = 40
"""Calls spent dropping keys from one counterexample."""


def _shrink(search: Search, example: Counterexample, keep: frozenset[int]) -> Counterexample:
    """Drop every key whose absence keeps the same difference (the same two outcome kinds):
    what is left is what the difference needs."""
    from strictcall.review.values import drop_key_paths

    current = example
    steps = 0
    changed = True
    while changed and steps < SHRINK_STEPS:
        changed = False
        for smaller in drop_key_paths(current.args, keep):
            steps += 1
            found = _compare_or_stop(search, smaller)
            if found is not None and cause_of(found)[:4] == cause_of(current)[:4]:
                current = found
                changed = True
                break
            if steps >= SHRINK_STEPS:
                break
    return current


def cause_of(example: Counterexample) -> tuple[str, str, str, str, str]:
    """What a difference is, apart from the values that show it: each side's kind of outcome
    (and exception), and the shape of the input (its keys, its values' places)."""
    from strictcall.review.values import shape_of

    return (
        example.old.kind + ":" + example.old.exception,
        example.new.kind + ":" + example.new.exception,
        str(example.old.mutated),
        str(example.new.mutated),
        shape_of(example.args),
    )


def group_by_cause(examples: Iterable[Counterexample]) -> list[list[Counterexample]]:
    """Counterexamples grouped by cause, each group smallest first (the plain 0 case leads),
    the groups in the order of their smallest member."""
    groups: dict[tuple[str, ...], list[Counterexample]] = {}
    for example in sorted(examples, key=Counterexample.sort_key):
        groups.setdefault(cause_of(example), []).append(example)
    return list(groups.values())


def _compare_or_stop(search: Search, args: tuple[Any, ...]) -> Counterexample | None:
    if search.accept is not None and not search.accept(args):
        return None
    found = search.compare(args)
    if search.caller.timeouts >= MAX_TIMEOUTS:
        search.stopped = f"stopped after {MAX_TIMEOUTS} calls ran out of time"
        raise _StopSearch
    return found


def _hypothesis_search(
    search: Search, strategy: st.SearchStrategy[tuple[Any, ...]], max_examples: int
) -> None:
    if max_examples <= 0:
        return

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(strategy)
    def differs(args: tuple[Any, ...]) -> None:
        if _compare_or_stop(search, args) is not None:
            raise _Difference
        if search.found and search.inputs_run - started > ENOUGH_AFTER_FOUND:
            raise _Enough

    started = search.inputs_run
    try:
        differs()
    except (_Difference, _Enough):
        pass
    except HypothesisException:  # flaky functions, say: what was found still stands
        search.stopped = "the functions did not answer the same input the same way twice"


def probes_for(arity: int, hints: Hints) -> list[tuple[Any, ...]]:
    """Inputs tried before any are drawn: a base input that passes the checks the source makes
    plain, then its neighbours: each key read with each falsy and truthy value (the seed's
    `{"result": 0}` among them), each key left out."""
    if not hints.dictish:
        return []
    base = base_arguments(arity, hints)
    return [base, *neighbours(base, hints.mappings, hints.keys)]


def compare_functions(
    old: Callable[..., Any],
    new: Callable[..., Any],
    arity: int,
    *,
    max_examples: int = 2000,
    timeout: float = 1.0,
) -> Report:
    """Search for inputs on which two functions of `arity` positional parameters differ, with
    inputs built from what their source reads (as `strictcall check OLD NEW` does)."""
    from strictcall.review.hints import mine_hints
    from strictcall.review.values import arguments, conforms, draw_arguments

    hints = mine_hints([old, new], arity)

    def fast(source: Source) -> tuple[Any, ...]:
        return draw_arguments(source, arity, hints)

    return find_differences(
        old,
        new,
        arguments(arity, hints),
        probes=probes_for(arity, hints),
        keep=hints.mappings,
        keys=hints.keys,
        fast=fast,
        max_examples=max_examples,
        timeout=timeout,
        accept=lambda args: conforms(args, hints.declared),
    )
