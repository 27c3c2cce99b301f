"""GET /metrics on a real server, read with prometheus_client's own parser: the calls made are
counted by tool, outcome, stage and code, their latency per tool, with no identity, argument or
made-up name in any label; and the operator's paths want an operator's token off loopback."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from ops_calls import SECRET_VALUES, burst, rpc
from servers import RunningServer, create_token, metric, start_server, strictcall
from strictcall.core.record import server_request_record
from strictcall.ops.drains import (
    BUSY_DRAIN,
    BUSY_DRAIN_EVERY_S,
    DRAIN_EVERY_S,
    drain_interval_after,
)
from strictcall.ops.metrics import MAX_TOOL_LABELS, OTHER_TOOLS, Metrics
from strictcall.services.notes import notes_gateway
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore

IDENTITY = "zq-agent-identity-5150"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ops-metrics") / "metrics.sqlite3"


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[RunningServer]:
    running = start_server(db)
    yield running
    running.stop()


def samples(server: RunningServer, name: str) -> list[Sample]:
    response = httpx.get(server.base_url + "/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return [
        sample
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == name
    ]


def test_metrics_count_the_calls_made_by_tool_outcome_stage_and_code(
    server: RunningServer, db: Path
) -> None:
    token = create_token(db, IDENTITY)
    done = burst(server, token, good=5, refused=3)
    counted = {
        (s.labels["tool"], s.labels["outcome"], s.labels["stage"], s.labels["code"]): s.value
        for s in samples(server, "strictcall_calls_total")
    }
    assert counted == {key: float(n) for key, n in done.counts.items()}
    durations: dict[str, float] = {}
    for s in samples(server, "strictcall_call_duration_seconds_count"):  # by outcome and wire
        durations[s.labels["tool"]] = durations.get(s.labels["tool"], 0.0) + s.value
    named: dict[str, int] = {}
    for (tool, _, _, _), n in done.counts.items():
        if tool != "unknown":
            named[tool] = named.get(tool, 0) + n
    assert durations == {tool: float(n) for tool, n in named.items()}
    # the scrape itself is the one request in flight
    assert [s.value for s in samples(server, "strictcall_requests_in_flight")] == [1.0]
    faults = {s.labels["where"]: s.value for s in samples(server, "strictcall_store_faults_total")}
    assert faults == {"call": 0.0, "auth": 0.0, "audit": 0.0, "quota": 0.0}


def test_no_label_holds_an_identity_an_argument_or_a_made_up_name(
    server: RunningServer, db: Path
) -> None:
    token = create_token(db, IDENTITY)
    burst(server, token, good=1, refused=1)
    text = httpx.get(server.base_url + "/metrics", timeout=10).text
    for secret in (*SECRET_VALUES, IDENTITY):
        assert secret not in text
    with closing(SQLiteStore(db)) as store:
        tools = {tool.name for tool in notes_gateway(store).tools} | {"unknown", "unrouted"}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "tool" in sample.labels:
                assert sample.labels["tool"] in tools


def test_an_unauthenticated_call_is_counted_at_stage_auth(server: RunningServer) -> None:
    before = {
        s.labels["code"]: s.value
        for s in samples(server, "strictcall_calls_total")
        if s.labels["stage"] == "auth"
    }
    response = httpx.post(server.base_url + "/rpc", content=b"{}", timeout=10)
    assert response.status_code == 401
    after = {
        s.labels["code"]: s.value
        for s in samples(server, "strictcall_calls_total")
        if s.labels["stage"] == "auth"
    }
    assert after["unauthenticated"] == before.get("unauthenticated", 0.0) + 1


# --- off loopback: an operator's token --------------------------------------------------------


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Path]]:
    db = tmp_path_factory.mktemp("ops-exposed") / "exposed.sqlite3"
    running = start_server(db, "--host", "0.0.0.0")
    running.base_url = running.base_url.replace("0.0.0.0", "127.0.0.1")
    yield running, db
    running.stop()


def operator_token(db: Path) -> str:
    done = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", str(db))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("path", ["/metrics", "/", "/ops/stats.json"])
def test_off_loopback_the_operators_paths_want_an_operators_token(
    exposed: tuple[RunningServer, Path], path: str
) -> None:
    server, db = exposed
    url = server.base_url + path
    refused = httpx.get(url, timeout=10)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic ")
    agent = create_token(db, "u1")
    assert httpx.get(url, headers={"Authorization": f"Bearer {agent}"}).status_code == 401
    token = operator_token(db)
    assert httpx.get(url, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()
    assert httpx.get(url, headers={"Authorization": f"Basic {basic}"}).status_code == 200


def test_an_operators_token_calls_no_tool(exposed: tuple[RunningServer, Path]) -> None:
    server, db = exposed
    token = operator_token(db)
    response = httpx.post(
        server.base_url + "/rpc",
        content=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}',
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 401


def test_on_loopback_the_operators_paths_are_open(server: RunningServer, db: Path) -> None:
    assert httpx.get(server.base_url + "/ops/stats.json", timeout=10).status_code == 200
    token = create_token(db, "u1")
    assert rpc(server, token, "count_notes", {}, 1) == 0


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example"])
def test_on_loopback_a_foreign_host_name_still_needs_a_token(
    server: RunningServer, db: Path, host: str
) -> None:
    # a page whose name was rebound to 127.0.0.1 sends its own name as the Host
    url = server.base_url + "/ops/stats.json"
    assert httpx.get(url, headers={"Host": host}, timeout=10).status_code == 401
    token = operator_token(db)
    authorized = {"Host": host, "Authorization": f"Bearer {token}"}
    assert httpx.get(url, headers=authorized, timeout=10).status_code == 200


@pytest.mark.parametrize("host", ["localhost", "localhost:8765", "[::1]:8765", "127.0.0.2"])
def test_on_loopback_a_loopback_host_name_needs_no_token(server: RunningServer, host: str) -> None:
    url = server.base_url + "/ops/stats.json"
    assert httpx.get(url, headers={"Host": host}, timeout=10).status_code == 200


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_the_operators_paths_answer_get_only(server: RunningServer, method: str) -> None:
    response = httpx.request(method, server.base_url + "/metrics", timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


MULTIPROCESS = """
import sys, time
from strictcall.ops.metrics import Metrics
from strictcall.storage import AuditRecord

metrics = Metrics(["read_note"])
now = time.time()
for latency in (40, 400, 4000):
    metrics.observe(AuditRecord(now, "c", "u1", "read_note", "ok", None, None, latency))
metrics.observe(AuditRecord(now, "c", "u1", None, "error", "unknown_tool", "route", 0))
sys.stdout.write(metrics.exposition().decode())
"""


def test_with_a_multiprocess_directory_the_counts_go_through_it(tmp_path: Path) -> None:
    # what a server with several workers does: each writes its counts to the directory
    done = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir())  # the counts were written there
    found = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(done.stdout)
        for sample in family.samples
    }
    ok = (
        ("code", "none"),
        ("outcome", "ok"),
        ("stage", "none"),
        ("tool", "read_note"),
        ("transport", "rpc"),
    )
    route = (
        ("code", "unknown_tool"),
        ("outcome", "error"),
        ("stage", "route"),
        ("tool", "unknown"),
        ("transport", "rpc"),
    )
    assert found[("strictcall_calls_total", ok)] == 3.0
    assert found[("strictcall_calls_total", route)] == 1.0
    latency = (("outcome", "ok"), ("tool", "read_note"), ("transport", "rpc"))
    assert found[("strictcall_call_duration_seconds_count", latency)] == 3.0
    bucket = ("strictcall_call_duration_seconds_bucket", (("le", "0.0005"), *latency))
    assert found[bucket] == 2.0
    assert any(name == "strictcall_build_info" for name, _ in found)


OTHERS = """
import sys, time
from strictcall.ops.metrics import MAX_TOOL_LABELS, Metrics
from strictcall.storage import AuditRecord

names = [f"t{n}" for n in range(MAX_TOOL_LABELS + 1)]
metrics = Metrics(names, source_of=lambda name: "big")
now = time.time()
for name in names:  # the last one past the labels' budget: "(other)"
    metrics.observe(AuditRecord(now, "c", "u1", name, "ok", None, None, 40))
sys.stdout.write(metrics.exposition().decode())
"""


def test_the_calls_past_the_tool_labels_of_each_worker_sum_under_other(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):  # two workers, one after the other, each writing its counts there
        done = subprocess.run(
            [sys.executable, "-c", OTHERS],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
        assert done.returncode == 0, done.stderr
    other = {"tool": OTHER_TOOLS, "outcome": "ok", "transport": "rpc"}
    assert metric(done.stdout, "strictcall_calls_total", **other) == 2
    assert metric(done.stdout, "strictcall_call_duration_seconds_count", **other) == 2
    assert metric(done.stdout, "strictcall_calls_total", tool="t0", outcome="ok") == 2
    tools = {
        sample.labels["tool"]
        for family in text_string_to_metric_families(done.stdout)
        for sample in family.samples
        if sample.name == "strictcall_calls_total"
    }
    assert len(tools) == MAX_TOOL_LABELS + 1  # never a label past the budget, summed or not


def test_a_busy_server_drains_its_records_often_and_counts_each_once() -> None:
    assert BUSY_DRAIN_EVERY_S < DRAIN_EVERY_S
    assert drain_interval_after(0) == DRAIN_EVERY_S
    assert drain_interval_after(BUSY_DRAIN - 1) == DRAIN_EVERY_S
    assert drain_interval_after(BUSY_DRAIN) == BUSY_DRAIN_EVERY_S
    counted = Metrics(["read_note"])
    now = time.time()
    for n in range(BUSY_DRAIN):
        counted.observe(AuditRecord(now, f"c{n}", "u1", "read_note", "ok", None, None, 40))
    assert counted.drain() == BUSY_DRAIN
    assert counted.drain() == 0
    samples = [
        sample
        for family in text_string_to_metric_families(counted.exposition().decode())
        for sample in family.samples
        if sample.name == "strictcall_calls_total"
    ]
    assert [sample.value for sample in samples] == [BUSY_DRAIN]


def tool_labels(metrics: Metrics, family: str) -> dict[str, float]:
    """The samples of `family` summed by their tool label."""
    summed: dict[str, float] = {}
    for parsed in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in parsed.samples:
            if sample.name == family:
                tool = sample.labels["tool"]
                summed[tool] = summed.get(tool, 0.0) + sample.value
    return summed


def test_each_upstream_has_at_most_max_tool_labels_tools_labelled_by_name() -> None:
    # an upstream that lists new names again and again: 1,001 of one, 2 of another
    names = [f"big_{n}" for n in range(MAX_TOOL_LABELS + 1)] + ["calm_a", "calm_b"]
    metrics = Metrics(names, source_of=lambda name: name.split("_")[0])
    now = time.time()
    for name in names[:MAX_TOOL_LABELS]:  # at the budget: every one by its name
        metrics.observe(AuditRecord(now, "c", "u1", name, "ok", None, None, 40))
    for family in ("strictcall_calls_total", "strictcall_call_duration_seconds_count"):
        labelled = tool_labels(metrics, family)
        assert len(labelled) == MAX_TOOL_LABELS and OTHER_TOOLS not in labelled
    for name in [names[MAX_TOOL_LABELS], names[MAX_TOOL_LABELS], "calm_a", "calm_b"]:
        metrics.observe(AuditRecord(now, "c", "u1", name, "ok", None, None, 40))
    metrics.observe(AuditRecord(now, "c", "u1", names[0], "ok", None, None, 40))
    for family in ("strictcall_calls_total", "strictcall_call_duration_seconds_count"):
        labelled = tool_labels(metrics, family)
        # one past it: counted under the overflow label; the other upstream's by name
        assert names[MAX_TOOL_LABELS] not in labelled and labelled[OTHER_TOOLS] == 2.0
        assert labelled["calm_a"] == labelled["calm_b"] == 1.0
        assert labelled[names[0]] == 2.0  # one labelled already keeps its label
        assert len(labelled) == MAX_TOOL_LABELS + 3


def test_a_request_of_an_upstreams_is_counted_by_its_method_never_its_upstream_or_caller() -> None:
    counted = Metrics(["read_note"])
    counted.observe(server_request_record("elicitation", "tickets", "u1", "c1", "answered", 900))
    counted.observe(server_request_record("sampling", "tickets", "u1", "c2", "timed_out", 9))
    assert counted.drain() == 2
    labels = [
        sample.labels
        for family in text_string_to_metric_families(counted.exposition().decode())
        for sample in family.samples
        if sample.name == "strictcall_calls_total"
    ]
    assert sorted((label["tool"], label["outcome"]) for label in labels) == [
        ("elicitation/create", "ok"),
        ("sampling/createMessage", "error"),
    ]
    assert "tickets" not in str(labels) and "u1" not in str(labels)
