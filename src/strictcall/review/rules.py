"""The lint's rules: what each finds and the question a reviewer should ask there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of finding."""

    id: str
    name: str
    summary: str
    question: str


SUPPRESSION_WITHOUT_REASON: Final = Rule(
    "SC100",
    "suppression-without-reason",
    "a strictcall suppression that gives no reason",
    "Why is this line safe? Say it after the suppression: `-- reason`.",
)
GET_TRUTH_TEST: Final = Rule(
    "SC101",
    "get-truth-test",
    "`.get(k)` tested for truth",
    'Does a present but falsy value (0, false, "", [], {}, null) mean the same here as a '
    "missing key?",
)
GET_OR_DEFAULT: Final = Rule(
    "SC102",
    "get-or-default",
    "`.get(k) or default`",
    "Is the default meant for a missing key only, or for every falsy value too (an explicit "
    '0, false, "" or null)?',
)
READ_OR_DEFAULT: Final = Rule(
    "SC103",
    "mapping-value-or-default",
    "`x or default` on a value read from a mapping",
    "Is the default meant for a missing key only, or for every falsy value too (an explicit "
    '0, false, "" or null)?',
)
GET_IS_NONE: Final = Rule(
    "SC104",
    "get-is-none",
    "`.get(k) is None` or `is not None`",
    "Can the key be present with an explicit null, and does that mean the same as a missing "
    "key? (`k in d` tells them apart.)",
)

RULES: Final = {
    rule.id: rule
    for rule in (
        SUPPRESSION_WITHOUT_REASON,
        GET_TRUTH_TEST,
        GET_OR_DEFAULT,
        READ_OR_DEFAULT,
        GET_IS_NONE,
    )
}
"""Every rule by its id."""
