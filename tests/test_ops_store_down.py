"""The store goes down under a real server on PostgreSQL (its database refuses connections and
its sessions are killed, as a stopped database does) and comes back (issue 29): /metrics says
so and counts the audit's outage once, however many retries; the page keeps its figures from
the server's own counts with a banner at the top ("store unavailable since HH:MM UTC, N calls
refused"); the log has one timestamped line when it goes down and one when it is back, with
the calls refused meanwhile, and no driver line; the start-up line names the page and
/metrics."""

from __future__ import annotations

import html
import queue
import re
import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

import pg
from ops_calls import rpc
from servers import RunningServer, create_token, start_server, unstamped
from strictcall.errors import STORE_UNAVAILABLE, TOKEN_STORE_UNAVAILABLE

DEADLINE_S = 30.0
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (WARNING|ERROR|INFO) ")


def metric(server: RunningServer, name: str, **labels: str) -> float:
    text = httpx.get(server.base_url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    raise AssertionError(f"{name} {labels} is not in /metrics")


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def stats(server: RunningServer) -> dict[str, object]:
    response = httpx.get(server.base_url + "/ops/stats.json", timeout=10)
    assert response.status_code == 200
    document = response.json()
    assert isinstance(document, dict)
    return document


def next_line(server: RunningServer, containing: str) -> str:
    """The server's next output line holding `containing` (read with a deadline)."""
    assert server.output is not None
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            line = server.output.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise AssertionError(f"no line with {containing!r}") from None
        assert line is not None, f"the server ended before a line with {containing!r}"
        server.lines.append(line)
        if containing in line:
            return line


def refused_call(server: RunningServer, token: str, n: int) -> None:
    answer = rpc(server, token, "count_notes", {}, 5000 + n)
    assert isinstance(answer, dict)
    assert answer["code"] in (STORE_UNAVAILABLE.code, TOKEN_STORE_UNAVAILABLE.code)


def test_an_outage_is_told_by_metrics_page_and_logs(pg_url: str) -> None:
    token = create_token(pg_url, "u1")
    server = start_server(pg_url)
    try:
        started = server.lines[-1]
        assert f"operator page {server.base_url}/" in started
        assert f"metrics {server.base_url}/metrics" in started
        assert rpc(server, token, "count_notes", {}, 1) == 0
        assert metric(server, "strictcall_store_available") == 1.0

        pg.allow_connections(pg_url, False)
        pg.terminate_backends(pg_url)
        for n in range(5):
            refused_call(server, token, n)
        down = next_line(server, "store unavailable since")
        assert STAMP.match(down), down
        until(lambda: metric(server, "strictcall_store_available") == 0.0, "store still up")
        until(
            lambda: metric(server, "strictcall_store_faults_total", where="audit") == 1.0,
            "the audit's outage was not counted",
        )
        for n in range(5, 8):
            refused_call(server, token, n)
        # the audit writer has retried every 50 ms meanwhile: still one fault, one outage
        assert metric(server, "strictcall_store_faults_total", where="audit") == 1.0
        assert metric(server, "strictcall_store_outages_total") == 1.0

        until(lambda: refused_so_far(server) == 8, "the page does not count 8 refused calls")
        page = httpx.get(server.base_url + "/", timeout=10).text
        banner = re.search(r"<p id=store-banner[^>]*>(.*?)</p>", page)
        assert banner is not None
        text = re.sub(r"<[^>]+>", "", banner[1])
        assert re.fullmatch(r"store unavailable since \d\d:\d\d( \(.+\))?, 8 calls refused", text)
        assert page.index("id=store-banner") < page.index("<h1>")  # at the top
        # the summary from the server's own counts: 1 call before, 8 refused
        assert re.search(r"id=total-calls>9<", page)
        assert re.search(r"id=failed-calls class=bad>8<", page)
        assert "calls 0" not in page

        pg.allow_connections(pg_url, True)
        back = next_line(server, "store back")
        assert STAMP.match(back), back
        assert "8 calls refused meanwhile" in back
        until(lambda: metric(server, "strictcall_store_available") == 1.0, "store still down")
        assert rpc(server, token, "count_notes", {}, 99) == 0
    finally:
        pg.allow_connections(pg_url, True)
        server.stop()
    log = server.lines + server.output_after_exit()
    assert sum("store unavailable since" in line for line in log) == 1
    assert sum("store back" in line for line in log) == 1
    assert not any("psycopg" in line or "connection failed" in line for line in log)
    for line in log:
        if " strictcall: " in line or " uvicorn" in line:
            assert STAMP.match(line), line


def refused_so_far(server: RunningServer) -> object:
    outage = stats(server)["outage"]
    assert isinstance(outage, dict)
    return outage["refused"]


def outage_cause(server: RunningServer) -> object:
    outage = stats(server)["outage"]
    return outage.get("cause") if isinstance(outage, dict) else None


PASSWORD = "pw-s3cret-4d1c"


def test_the_outage_names_its_cause_and_a_stop_in_it_counts_the_records_lost(
    pg_url: str,
) -> None:
    # the local server trusts 127.0.0.1, so the URL's password is never checked, only carried
    url = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@")
    assert PASSWORD in url
    token = create_token(url, "u1")
    server = start_server(url)
    try:
        assert rpc(server, token, "count_notes", {}, 1) == 0
        pg.allow_connections(pg_url, False)
        pg.terminate_backends(pg_url)
        for n in range(5):
            refused_call(server, token, n)
        until(lambda: isinstance(outage_cause(server), str), "the outage names no cause")
        cause = outage_cause(server)
        assert isinstance(cause, str) and cause and PASSWORD not in cause
        page = httpx.get(server.base_url + "/", timeout=10).text
        shown = re.search(r"<span id=store-cause>(.*?)</span>", page)
        assert shown is not None and html.unescape(shown[1]) == cause
        assert PASSWORD not in page
        down = next_line(server, "store unavailable")
        assert STAMP.match(down) and cause in down, down
        until(lambda: metric(server, "strictcall_audit_backlog_records") >= 5, "none waiting")
        waiting = metric(server, "strictcall_audit_backlog_records")
        assert server.stop() == 0  # stopped with the store still down
    finally:
        pg.allow_connections(pg_url, True)
        server.stop()
    log = server.lines + server.output_after_exit()
    assert not any(PASSWORD in line for line in log)
    lost = [m for line in log if (m := re.search(r"audit: (\d+) records? lost at stop", line))]
    assert len(lost) == 1 and int(lost[0][1]) >= waiting
    # said at the stop: after "stopping", before "stopped"
    said = [i for i, line in enumerate(log) if "lost at stop" in line]
    stopping = [
        i for i, line in enumerate(log) if unstamped(line).startswith("strictcall: stopping")
    ]
    stopped = [i for i, line in enumerate(log) if unstamped(line).rstrip() == "strictcall: stopped"]
    assert stopping and stopped and stopping[0] < said[0] < stopped[0], log
