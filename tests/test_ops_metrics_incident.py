"""/metrics has what an operator expects in an incident (issue 29), on a real server scraped
over HTTP: process and Python collectors, `strictcall_build_info`, a `transport` label that
tells /rpc from /mcp, HTTP statuses, latency by outcome, the audit's backlog and lost records,
refusals before routing apart from invented tool names; `promtool check metrics` passes on the
scrape; and the example alert rules and Grafana dashboard name only metrics that a real scrape
has, `promtool check rules` and `promtool test rules` pass, and the dashboard loads as JSON."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ops_calls import mcp_headers
from promtool import need_promtool
from servers import RunningServer, create_token, start_server

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
ALERT_TESTS = DEPLOY / "prometheus" / "alerts_test.yml"
DASHBOARD = DEPLOY / "grafana" / "strictcall.json"
METRIC_NAME = re.compile(r"\b((?:strictcall|process|python)_[a-z_]+)\b")
INVENTED = "zq-invented-tool-6061"


def call(name: str, request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}},
    }


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, str]]:
    """A server that answered calls on both wires, refusals before routing and an invented
    tool name; its /metrics text after them."""
    db = tmp_path_factory.mktemp("incident-metrics") / "m.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        rpc = server.base_url + "/rpc"
        for i in range(3):
            assert httpx.post(rpc, json=call("count_notes", i), headers=auth).status_code == 200
        httpx.post(rpc, json=call(INVENTED, 9), headers=auth)
        assert httpx.post(rpc, json=call("count_notes", 10)).status_code == 401
        httpx.post(rpc, content=b'{"jsonrpc":', headers=auth)  # parse: before routing
        headers = mcp_headers(server, token)
        for i in range(2):
            answered = httpx.post(
                server.base_url + "/mcp", json=call("count_notes", 100 + i), headers=headers
            )
            assert answered.status_code == 200
        text = httpx.get(server.base_url + "/metrics", timeout=10).text
        yield server, text
    finally:
        server.stop()


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def names(text: str) -> set[str]:
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


def test_process_and_python_collectors_and_build_info_are_there(
    scraped: tuple[RunningServer, str],
) -> None:
    _, text = scraped
    found = names(text)
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= found
    assert {"python_info", "python_gc_collections_total"} <= found
    (labels, value), *_ = samples(text, "strictcall_build_info")
    assert value == 1.0 and labels["version"] and labels["python"]


def test_the_transport_label_tells_rpc_from_mcp(scraped: tuple[RunningServer, str]) -> None:
    _, text = scraped
    ok: dict[str, float] = {}
    for labels, value in samples(text, "strictcall_calls_total"):
        if labels["tool"] == "count_notes" and labels["outcome"] == "ok":
            ok[labels["transport"]] = ok.get(labels["transport"], 0.0) + value
    assert ok == {"rpc": 3.0, "mcp": 2.0}


def test_refusals_before_routing_are_apart_from_invented_names(
    scraped: tuple[RunningServer, str],
) -> None:
    _, text = scraped
    by_label: dict[str, set[str]] = {}
    for labels, value in samples(text, "strictcall_calls_total"):
        if value:
            by_label.setdefault(labels["tool"], set()).add(labels["stage"])
    assert by_label["unknown"] == {"route"}  # the invented name, never its text
    assert {"auth", "parse"} <= by_label["unrouted"]
    assert "route" not in by_label["unrouted"]
    assert INVENTED not in text


def test_http_statuses_are_counted_by_path_group(scraped: tuple[RunningServer, str]) -> None:
    _, text = scraped
    counted = {
        (labels["path"], labels["code"]): value
        for labels, value in samples(text, "strictcall_http_responses_total")
    }
    assert counted[("rpc", "401")] == 1.0
    assert counted[("rpc", "200")] >= 4.0
    assert counted[("mcp", "200")] >= 3.0


def test_latency_is_by_tool_outcome_and_transport(scraped: tuple[RunningServer, str]) -> None:
    _, text = scraped
    counts = {
        (labels["tool"], labels["outcome"], labels["transport"]): value
        for labels, value in samples(text, "strictcall_call_duration_seconds_count")
    }
    assert counts[("count_notes", "ok", "rpc")] == 3.0
    assert counts[("count_notes", "ok", "mcp")] == 2.0


def test_the_audit_backlog_lost_records_and_the_store_are_there(
    scraped: tuple[RunningServer, str],
) -> None:
    _, text = scraped
    assert [value for _, value in samples(text, "strictcall_audit_backlog_records")] != []
    assert [value for _, value in samples(text, "strictcall_audit_records_lost_total")] == [0.0]
    assert [value for _, value in samples(text, "strictcall_store_available")] == [1.0]
    assert [value for _, value in samples(text, "strictcall_store_outages_total")] == [0.0]


def test_promtool_check_metrics_passes_on_a_real_scrape(
    scraped: tuple[RunningServer, str],
) -> None:
    promtool = need_promtool()
    _, text = scraped
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_alert_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = need_promtool()
    checked = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", str(ALERT_TESTS)], capture_output=True, text=True, timeout=60
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def dashboard_queries() -> list[str]:
    document = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert document["title"] and document["panels"]
    queries = [
        target["expr"] for panel in document["panels"] for target in panel.get("targets", [])
    ]
    assert len(queries) >= len(document["panels"])
    return queries


def test_the_dashboard_loads_and_every_panel_queries_something() -> None:
    document = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids))
    for panel in document["panels"]:
        assert panel["targets"], panel["title"]
    assert dashboard_queries()


def test_rules_and_dashboard_name_only_metrics_a_real_scrape_has(
    scraped: tuple[RunningServer, str],
) -> None:
    _, text = scraped
    scraped_names = names(text)
    named = set(METRIC_NAME.findall(ALERTS.read_text(encoding="utf-8")))
    for query in dashboard_queries():
        named |= set(METRIC_NAME.findall(query))
    assert named, "no metric named"
    assert sorted(named - scraped_names) == []
