"""Output sanitization, a named part of stage output: secrets in what a tool answers replaced by
a marker naming their kind (`[redacted:github-token]`), before anyone sees the result.

What is looked for: the rules of detect-secrets (Yelp's, the `RegexBasedDetector` plugins:
AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, SendGrid, PyPI, npm, Azure, Twilio, Discord,
Telegram, Square, Mailchimp, basic-auth credentials in URLs such as connection strings), the
whole of a PEM private key block, and the gateway's own credentials (`Redaction.known`, found
as they are). The rules are scanned in one pass by Hyperscan where it is installed (the rules'
regexes in its prefilter mode); only text where some rule may match is read again with the
rule's own regex, which decides. Without Hyperscan each rule's regex reads the whole text.

Text is redacted where a person or model reads it: text blocks, an embedded resource's text,
the strings of a structured value, an error's text. Image, audio and blob data are not (they
are base64 of media). A secret split across two blocks is not found. Nothing found is logged;
the counts go to `Redaction.tally`, by kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from strictcall.core.content import Content

from strictcall.errors import JSONValue

Tally = Callable[[str | None, str, int], None]
"""Told (source, kind, count) for each kind of secret a result had replaced."""

CREDENTIAL: Final = "credential"
"""The kind of one of the gateway's own credentials (`Redaction.known`)."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """What stage output redacts of one tool's content: its results' text too (`results`;
    an error's text always), the gateway's own credentials to find as they are (`known`),
    and where the counts go (`tally`)."""

    results: bool = True
    known: tuple[str, ...] = ()
    tally: Tally | None = None


def marker(kind: str) -> str:
    """What a secret of `kind` is replaced with."""
    return f"[redacted:{kind}]"


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int
    """The group that is the secret (0: the whole match)."""


_PRIVATE_KEY: Final = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY"
    r"(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_BEARER: Final = re.compile(r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{20,}=*)")

_SKIPPED: Final = frozenset(
    {
        "Public IP (ipv4)",  # not a secret
        "Private Key",  # its header only: the whole block is found by _PRIVATE_KEY
        # keyword rules: they match common words in prose, and cost 20 to 60 ms on 64 KiB
        "Artifactory Credentials",
        "Cloudant Credentials",
        "IBM Cloud IAM Key",
        "IBM COS HMAC Credentials",
        "SoftLayer Credentials",
    }
)
"""detect-secrets' rules left out, and why."""


def _kind_name(secret_type: str) -> str:
    """A detect-secrets secret type as a marker's kind: "GitHub Token" -> "github-token"."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def _rules() -> list[_Rule]:
    """The rules, detect-secrets' first when it is installed."""
    rules = [_Rule("private-key", _PRIVATE_KEY, 0), _Rule("bearer-token", _BEARER, 1)]
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
    except ImportError:  # pragma: no cover - the proxy extra installs it
        return rules
    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    for secret_type, plugin in sorted(plugins.items()):
        if secret_type in _SKIPPED or not issubclass(plugin, RegexBasedDetector):
            continue
        denylist: Iterable[re.Pattern[str]] = plugin.denylist
        for pattern in denylist:
            # the basic-auth rule's group 1 is the password: the rest of the URL stays
            group = 1 if secret_type == "Basic Auth Credentials" else 0
            rules.append(_Rule(_kind_name(secret_type), pattern, group))
    return rules


def hyperscan_database(rules: list[_Rule]) -> Any:
    """One Hyperscan prefilter database of `rules` (ids their indexes); needs the proxy extra."""
    import hyperscan

    flags = [
        hyperscan.HS_FLAG_PREFILTER
        | hyperscan.HS_FLAG_ALLOWEMPTY
        | hyperscan.HS_FLAG_SINGLEMATCH
        | (hyperscan.HS_FLAG_CASELESS if rule.pattern.flags & re.IGNORECASE else 0)
        | (hyperscan.HS_FLAG_DOTALL if rule.pattern.flags & re.DOTALL else 0)
        for rule in rules
    ]
    database = hyperscan.Database()
    database.compile(
        expressions=[rule.pattern.pattern.encode("utf-8") for rule in rules],
        ids=list(range(len(rules))),
        elements=len(rules),
        flags=flags,
    )
    return database


class _Detector:
    """The rules, compiled once: `find` gives the spans of the secrets in a text."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules: Final = rules
        self._scanner: Any = None
        try:
            self._scanner = hyperscan_database(rules)
        except ImportError:  # pragma: no cover - the proxy extra installs it
            return

    def candidates(self, text: str) -> Iterable[_Rule]:
        """The rules that may match `text` (all of them without Hyperscan)."""
        if self._scanner is None:  # pragma: no cover - the proxy extra installs it
            return self.rules
        hits: set[int] = set()

        def on_match(rule: int, start: int, end: int, flags: int, context: object) -> None:
            hits.add(rule)

        self._scanner.scan(text.encode("utf-8", "surrogatepass"), match_event_handler=on_match)
        return [self.rules[i] for i in sorted(hits)]


_DETECTOR: _Detector | None = None


def _detector() -> _Detector:
    global _DETECTOR
    if _DETECTOR is None:
        _DETECTOR = _Detector(_rules())
    return _DETECTOR


def redact_text(text: str, redaction: Redaction, counts: dict[str, int]) -> str:
    """`text` with every secret found replaced by its marker, each one counted in `counts`."""
    for known in redaction.known:
        if known and known in text:
            counts[CREDENTIAL] = counts.get(CREDENTIAL, 0) + text.count(known)
            text = text.replace(known, marker(CREDENTIAL))
    for rule in _detector().candidates(text):
        text = _replaced(text, rule, counts)
    return text


def _replaced(text: str, rule: _Rule, counts: dict[str, int]) -> str:
    parts: list[str] = []
    at = 0
    for found in rule.pattern.finditer(text):
        start, end = found.span(rule.group)
        if start < at or start == end:
            continue
        parts.append(text[at:start])
        parts.append(marker(rule.kind))
        at = end
        counts[rule.kind] = counts.get(rule.kind, 0) + 1
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def redact_content(content: Content, redaction: Redaction, source: str | None) -> Content:
    """`content` with its text redacted (its results' only where `redaction.results`), the
    counts told to `redaction.tally`."""
    if not (content.is_error or redaction.results):
        return content
    from strictcall.core.content import Content

    counts: dict[str, int] = {}
    blocks = tuple(_redacted_block(block, redaction, counts) for block in content.blocks)
    structured = content.structured
    if structured is not None:
        structured = _redacted_value(structured, redaction, counts)
    if not counts:
        return content
    if redaction.tally is not None:
        for kind, count in sorted(counts.items()):
            redaction.tally(source, kind, count)
    return Content(blocks, structured, content.meta, content.is_error)


def _redacted_block(
    block: dict[str, JSONValue], redaction: Redaction, counts: dict[str, int]
) -> dict[str, JSONValue]:
    kind = block["type"]
    if kind == "text":
        text = redact_text(block["text"], redaction, counts)
        return block if text is block["text"] else {**block, "text": text}
    if kind == "resource" and "text" in block["resource"]:
        resource = block["resource"]
        text = redact_text(resource["text"], redaction, counts)
        if text is resource["text"]:
            return block
        return {**block, "resource": {**resource, "text": text}}
    return block


def _redacted_value(value: Any, redaction: Redaction, counts: dict[str, int]) -> Any:
    """A structured value with each of its strings redacted (keys kept)."""
    if type(value) is str:
        return redact_text(value, redaction, counts)
    if type(value) is dict:
        return {key: _redacted_value(item, redaction, counts) for key, item in value.items()}
    if type(value) is list:
        return [_redacted_value(item, redaction, counts) for item in value]
    return value
