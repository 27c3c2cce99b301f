"""How a proxied tool's answers reach the caller, as the federation's config file and the proxy
say (withhold_errors, pass_errors, redact, per upstream and per tool), the gateway's own
credentials redacted as they are, and the counts /metrics shows."""

from __future__ import annotations

from typing import Any

import pytest

from strictcall.core.content import Content, text_block
from strictcall.core.redact import CREDENTIAL, Redaction, marker, redact_content, redact_text
from strictcall.errors import TOOL_ERROR
from strictcall.ops.metrics import Metrics
from strictcall.services.proxy.config import ConfigError, federation_config, known_credentials
from strictcall.services.proxy.tools import Redactions

TOKEN = "ghp_" + "a1B2" * 9


def upstreams(**table: Any) -> Any:
    return federation_config({"upstreams": {"files": {"command": "srv", **table}}}).upstreams[0]


def test_errors_pass_and_results_are_redacted_by_default() -> None:
    output = upstreams().output("read", Redaction())
    assert (output.source, output.withhold_errors, output.pass_errors) == ("files", False, False)
    assert output.redaction is not None and output.redaction.results is True


def test_withhold_errors_and_redact_per_upstream_and_per_tool() -> None:
    config = upstreams(
        withhold_errors=True,
        pass_errors=["search"],
        redact="off",
        tools={"read": {"redact": "secrets"}, "list": {"withhold_errors": False}},
    )
    base = Redaction()
    read, search, listed, other = (
        config.output(name, base) for name in ("read", "search", "list", "other")
    )
    assert (read.withhold_errors, read.redaction.results) == (True, True)
    assert (search.withhold_errors, search.pass_errors) == (False, True)
    assert listed.withhold_errors is False
    assert (other.withhold_errors, other.redaction.results) == (True, False)


@pytest.mark.parametrize(
    "table",
    [
        {"redact": "on"},
        {"redact": True},
        {"withhold_errors": "yes"},
        {"tools": {"read": {"redact": "off", "colour": "red"}}},
        {"tools": {"read": "off"}},
        {"tools": []},
    ],
)
def test_a_wrong_setting_is_a_config_error(table: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        upstreams(**table)


def test_the_upstreams_own_credentials_are_redacted_wherever_they_appear() -> None:
    config = federation_config(
        {
            "upstreams": {
                "a": {"command": "srv", "credentials": {"env": {"A_KEY": "sk-own-secret-1"}}},
                "b": {
                    "url": "https://b.example/mcp",
                    "credentials": {"headers": {"Authorization": "Bearer b-own-token-22"}},
                },
                "c": {"command": "srv", "credentials": {"env": {"SHORT": "1234567"}}},
            }
        }
    )
    known = known_credentials(config.upstreams)
    assert set(known) == {"sk-own-secret-1", "Bearer b-own-token-22", "b-own-token-22"}
    counts: dict[str, int] = {}
    said = redact_text(
        "a said sk-own-secret-1; b-own-token-22 twice: b-own-token-22",
        Redaction(known=known),
        counts,
    )
    assert said == f"a said {marker(CREDENTIAL)}; {marker(CREDENTIAL)} twice: {marker(CREDENTIAL)}"
    assert counts == {CREDENTIAL: 3}


def test_redactions_are_counted_by_upstream_and_kind_and_shown_in_metrics() -> None:
    counted = Redactions()
    redaction = Redaction(tally=counted.tally)
    content = Content((text_block(f"{TOKEN} and {TOKEN}"),), is_error=True)
    redacted = redact_content(content, redaction, "files")
    assert redacted.blocks[0]["text"] == "[redacted:github-token] and [redacted:github-token]"
    assert counted.counts == {("files", "github-token"): 2}
    metrics = Metrics(())
    metrics.redactions = lambda: counted.counts
    shown = metrics.exposition().decode()
    assert 'strictcall_redactions_total{kind="github-token",upstream="files"} 2.0' in shown
    assert TOKEN not in shown


def test_results_are_left_alone_where_redaction_is_off_but_errors_never() -> None:
    off = Redaction(results=False)
    result = Content((text_block(TOKEN),))
    assert redact_content(result, off, "files") is result
    failed = Content((text_block(TOKEN),), is_error=True)
    assert TOKEN not in redact_content(failed, off, "files").blocks[0]["text"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private-key"),
        ("AKIAIOSFODNN7EXAMPLE", "aws-access-key"),
        ("xoxb-123456789012-abcdefghij", "slack-token"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", "bearer-token"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "json-web-token"),
        ("mysql://root:hunter2@db.internal:3306/app", "basic-auth-credentials"),
    ],
)
def test_each_kind_of_secret_is_replaced_by_its_marker(text: str, kind: str) -> None:
    counts: dict[str, int] = {}
    redacted = redact_text(f"before {text} after", Redaction(), counts)
    assert marker(kind) in redacted and redacted.startswith("before ")
    assert kind in counts


def test_plain_prose_is_left_as_it_is() -> None:
    prose = "The refund window is 7 days; ask support@example.com. Path /srv/a:b@c is fine.\n"
    assert redact_text(prose * 50, Redaction(), {}) == prose * 50


def test_an_upstreams_error_is_audited_as_tool_error_with_its_name_never_its_text() -> None:
    from strictcall import Gateway, Tool
    from strictcall.core.record import record_of

    failed = Content((text_block(f"no such file; token {TOKEN}"),), is_error=True)
    tool = Tool("files_read", "", {"type": "object"}, None, lambda c, a: failed, source="files")
    outcome = Gateway([tool]).settle({"name": "files_read", "arguments": {}}, "u1", "c1")
    record = record_of(outcome, "u1")
    assert (record.code, record.stage, record.reason) == (TOOL_ERROR.code, "execute", "files")
    assert "no such file" not in repr(record) and TOKEN not in repr(record)
