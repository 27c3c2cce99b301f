"""The operator page, rendered on the server: one HTML document with inline SVG charts and
plain tables (usable without JavaScript), and a small inline script that fetches
/ops/stats.json and swaps in its freshly rendered fragment, so the page refreshes without a
reload. Every text is HTML-escaped; a strict Content-Security-Policy allows that one script.

What an operator in an incident needs comes first: a banner while the store is down ("store
unavailable since 14:03, 131 calls refused", the figures then from the server's own
counts), a banner the script shows when a refresh fails ("stale since ..."), then the hour and
the last 5 minutes side by side. It reads at phone width: no text in the charts (their labels
are HTML), tables that wrap their text or scroll inside their own box.
"""

from __future__ import annotations

import base64
import hashlib
import html
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from strictcall.core.terminal import counted
from strictcall.ops.health import Outage
from strictcall.ops.stats import Breakdown, Minute
from strictcall.ops.window import RECENT_S, Snapshot

REFRESH_MS: Final = 3000

STAGE_COLOURS: Final = {
    "parse": "#c0392b",
    "route": "#e67e22",
    "shape": "#d4ac0d",
    "resource": "#8e44ad",
    "execute": "#2471a3",
    "output": "#17202a",
    "auth": "#7f8c8d",
    "protocol": "#b3b6b7",
}
OK_COLOUR: Final = "#27ae60"
_OTHER_COLOUR: Final = "#5d6d7e"

_STYLE: Final = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em 1.2em;max-width:72em;
color:#17202a;background:#fbfcfc}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.3em 0 .4em}
.banner{margin:0 0 .8em;padding:.6em .8em;border-radius:4px;font-weight:600}
.down{background:#fdedec;color:#922b21;border:1px solid #e6b0aa}
.stale{background:#fef5e7;color:#7e5109;border:1px solid #f5cba7}
.wide{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #d5d8dc;
padding:.2em .5em;text-align:left;vertical-align:top}td{overflow-wrap:anywhere}
td.n{text-align:right;font-variant-numeric:tabular-nums;overflow-wrap:normal}
#upstreams td{overflow-wrap:normal;white-space:nowrap}
.summary span{display:inline-block;margin-right:1.5em}.bad{color:#c0392b}.good{color:#1e8449}
.muted{color:#5d6d7e}svg.chart{display:block;width:100%;height:140px;background:#fff;
border:1px solid #eaeded}svg.bar{display:block;width:100%;min-width:4em;height:12px}
td.bar{width:55%}.axis{display:flex;justify-content:space-between;margin:.1em 0;
font-size:13px}.legend span{margin-right:1em;white-space:nowrap}
.legend svg{vertical-align:middle}
@media (max-width:600px){body{font-size:14px;padding:.6em}td,th{padding:.15em .3em}
.summary span{margin-right:1em}}
"""

_SCRIPT: Final = (
    "(function(){var live=document.getElementById('live'),"
    "stale=document.getElementById('stale'),lastOk=new Date();"
    "function hms(d){return d.toISOString().slice(11,19);}"
    "function tick(){fetch('ops/stats.json',{credentials:'same-origin',cache:'no-store'})"
    ".then(function(r){if(!r.ok)throw new Error(r.status);return r.json();})"
    ".then(function(d){live.innerHTML=d.html;lastOk=new Date();stale.hidden=true;"
    "document.body.removeAttribute('data-refresh-failed');"
    "document.body.setAttribute('data-refreshed',String(Date.now()));})"
    ".catch(function(){stale.textContent='stale since '+hms(lastOk)+' UTC: the server did'"
    "+' not answer the last refresh (tried at '+hms(new Date())+' UTC); the figures below'"
    "+' are from then';stale.hidden=false;"
    "var note=document.getElementById('refresh-note');"
    "if(note)note.textContent='not refreshed since '+hms(lastOk)+' UTC';"
    "document.body.setAttribute('data-refresh-failed','1');});}"
    f"setInterval(tick,{REFRESH_MS});}})();"
)


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; "
    f"script-src 'sha256-{_sha256(_SCRIPT)}'; "
    f"style-src 'sha256-{_sha256(_STYLE)}'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""Only the page's own script and style run; it may fetch only from this server."""


def _e(value: object) -> str:
    """Any value as escaped HTML text ("-" for none)."""
    return html.escape("-" if value is None else str(value), quote=True)


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def _hm(at: float) -> str:
    return time.strftime("%H:%M", time.gmtime(at))


def _colour(stage: str) -> str:
    return STAGE_COLOURS.get(stage, _OTHER_COLOUR)


def _ms(us: int | None) -> str:
    """A latency in µs as milliseconds ("-" for none)."""
    if us is None:
        return "-"
    return f"{us / 1000:.3g} ms" if us < 100_000 else f"{us / 1_000_000:.3g} s"


def _rate(failed: int, calls: int) -> str:
    return f"{100 * failed / calls:.1f} %" if calls else "-"


def render_page(
    stats: Breakdown,
    health: Mapping[str, object],
    snapshot: Snapshot | None = None,
    outage: Outage | None = None,
    upstreams: Sequence[Mapping[str, object]] | None = None,
) -> str:
    """The whole page."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        "<title>strictcall: operator</title><link rel=icon href='data:,'>"
        f"<style>{_STYLE}</style></head><body>"
        "<p id=stale class='banner stale' role=alert hidden></p>"
        f"<div id=live>{render_fragment(stats, health, snapshot, outage, upstreams)}</div>"
        f"<script>{_SCRIPT}</script></body></html>"
    )


def render_fragment(
    stats: Breakdown,
    health: Mapping[str, object],
    snapshot: Snapshot | None = None,
    outage: Outage | None = None,
    upstreams: Sequence[Mapping[str, object]] | None = None,
) -> str:
    """The page's live part: swapped in whole on each refresh. While the store cannot answer,
    the summary and the failures come from `snapshot` (this process's own counts). A proxy's
    or a federation's `upstreams` come right after the summary: one down is what an operator
    looks for first."""
    window_min = round((stats.until - stats.since) / 60)
    from_memory = not stats.store_ok and snapshot is not None
    if from_memory:
        assert snapshot is not None
        calls, failed = snapshot.hour.calls, snapshot.hour.failed
        recent_calls, recent_failed = snapshot.recent.calls, snapshot.recent.failed
        by_stage_code = snapshot.by_stage_code
        source = (
            "from this server's own counts since "
            f"{_e(_hm(max(snapshot.started, stats.since)))} UTC: the store cannot be read"
        )
    else:
        calls, failed = stats.calls, stats.failed
        recent_calls, recent_failed = _recent(stats.minutes, stats.until)
        by_stage_code = stats.by_stage_code
        source = "from the audit"
    parts = [
        _banner(stats.store_ok, outage),
        "<h1>strictcall: what the agents are doing</h1>",
        f"<p class=muted>the last {window_min} minutes to {_e(_utc(stats.until))} UTC, {source}"
        f" <span id=refresh-note>(refreshes every {REFRESH_MS // 1000} s)</span></p>",
        "<p class=summary>"
        f"<span>last hour: calls <b id=total-calls>{calls}</b></span>"
        f"<span>failed <b id=failed-calls class=bad>{failed}</b></span>"
        f"<span>failure rate <b>{_e(_rate(failed, calls))}</b></span></p>"
        "<p class=summary>"
        f"<span>last {RECENT_S // 60} min: calls <b id=recent-calls>{recent_calls}</b></span>"
        f"<span>failed <b id=recent-failed class=bad>{recent_failed}</b></span>"
        f"<span>failure rate <b>{_e(_rate(recent_failed, recent_calls))}</b></span></p>",
    ]
    if upstreams is not None:
        parts += ["<h2>Upstreams</h2>", _upstreams(upstreams)]
    if stats.store_ok:
        parts += ["<h2>Calls per minute</h2>", _timeline(stats.minutes), _legend(stats.minutes)]
    parts += [
        "<h2>Failures by stage and code</h2>",
        _bars(by_stage_code),
        _table(
            "failures-by-code",
            ("stage", "code", "calls"),
            ([s, c, n] for s, c, n in by_stage_code),
            numeric=(2,),
        ),
    ]
    if snapshot is not None:
        parts += _live_tables(snapshot)
    if stats.store_ok:
        parts += _audit_tables(stats)
    parts += ["<h2>Store</h2>", _health(stats.store_ok, health)]
    return "".join(parts)


def _recent(minutes: Sequence[Minute], until: float) -> tuple[int, int]:
    """Calls and failures in the minutes that overlap the last `RECENT_S`."""
    near = [m for m in minutes if m.start + 60 >= until - RECENT_S]
    return sum(m.total for m in near), sum(sum(m.failed.values()) for m in near)


def _banner(store_ok: bool, outage: Outage | None) -> str:
    """The banner while the store is down: "store unavailable since 14:03, 131 calls refused"
    (UTC, as every time on the page)."""
    if outage is None and store_ok:
        return ""
    if outage is None:
        text = "store unavailable: the audit cannot be read"
    else:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(outage.since))
        why = "" if outage.cause is None else f" (<span id=store-cause>{_e(outage.cause)}</span>)"
        text = (
            f"store unavailable since <time datetime={since}>{_hm(outage.since)}</time>{why},"
            f" {counted(outage.refused, 'call')} refused"
        )
    return f"<p id=store-banner class='banner down' role=alert title='times are UTC'>{text}</p>"


def _live_tables(snapshot: Snapshot) -> list[str]:
    """Latency, wires and callers: this process's own counts (the audit keeps no wire, and
    latency is read from its records here, not from the store)."""
    since = f"this server since {_hm(snapshot.started)} UTC" if snapshot.started else ""
    return [
        f"<h2>Latency per tool <span class=muted>({_e(since)})</span></h2>",
        _table(
            "latency",
            ("tool", "calls 1 h", "p50 1 h", "p99 1 h", "calls 5 min", "p50 5 min", "p99 5 min"),
            (
                [
                    r.tool,
                    r.calls,
                    _ms(r.p50_us),
                    _ms(r.p99_us),
                    r.recent_calls,
                    _ms(r.recent_p50_us),
                    _ms(r.recent_p99_us),
                ]
                for r in snapshot.latency
            ),
            numeric=(1, 2, 3, 4, 5, 6),
        ),
        "<h2>Calls by wire</h2>",
        _table(
            "wires",
            ("wire", "calls 1 h", "failed 1 h", "calls 5 min", "failed 5 min"),
            (
                [w.wire, w.hour.calls, w.hour.failed, w.recent.calls, w.recent.failed]
                for w in snapshot.wires
            ),
            numeric=(1, 2, 3, 4),
        ),
        "<h2>Calls by identity</h2>",
        _table(
            "identities",
            ("identity", "calls 1 h", "failed 1 h", "top code", "calls 5 min", "nearest quota"),
            (
                [
                    r.identity,
                    r.calls,
                    r.failed,
                    r.top_code,
                    r.recent_calls,
                    "none set" if r.nearest_quota is None else r.nearest_quota,
                ]
                for r in snapshot.identities[:50]
            ),
            numeric=(1, 2, 4),
        ),
    ]


def _upstreams(upstreams: Sequence[Mapping[str, object]]) -> str:
    """Each upstream: up, starting, restarting or not started; its tools; its starts; when
    its calls are told to try again while it is down; its changes waiting for an approval; its
    per-identity instances running, of the most it may run (or "shared": one for every caller).
    Its cells keep their words whole ("restarting", "1.5 s"): at phone width the table scrolls
    inside its own box, the name and the state first."""

    def next_try(row: Mapping[str, object]) -> str:
        wait = row.get("retry_after_ms")
        return "-" if not isinstance(wait, int) else _ms(wait * 1000)

    def waiting(row: Mapping[str, object]) -> object:
        count = row.get("changes_waiting")
        return "no pinning" if count is None else count

    def instances(row: Mapping[str, object]) -> object:
        running, cap = row.get("instances"), row.get("max_instances")
        return "shared" if running is None else f"{running} / {cap}"

    return _table(
        "upstreams",
        ("upstream", "state", "tools", "starts", "retry in", "changes waiting", "instances"),
        (
            [r.get("upstream"), r.get("state"), r.get("tools"), r.get("starts"), next_try(r),
             waiting(r), instances(r)]
            for r in upstreams
        ),
        numeric=(2, 3, 4, 5, 6),
    )  # fmt: skip


def _audit_tables(stats: Breakdown) -> list[str]:
    return [
        "<h2>Calls by tool</h2>",
        _table(
            "calls-by-tool",
            ("tool", "calls", "failed"),
            ([t, n, f] for t, n, f in stats.by_tool),
            numeric=(1, 2),
        ),
        "<h2>Top failing (tool, code, reason, pointer)</h2>",
        _table(
            "top-failures",
            ("tool", "code", "reason", "pointer", "calls"),
            ([r.tool, r.code, r.reason, r.pointer, r.calls] for r in stats.top_failures),
            numeric=(4,),
        ),
        "<h2>Operator commands <span class=muted>(not agents' calls)</span></h2>",
        _table(
            "operator-commands",
            ("command", "runs", "refused"),
            ([c, n, f] for c, n, f in stats.commands),
            numeric=(1, 2),
        ),
        "<h2>Most recent refusals</h2>",
        _table(
            "recent-refusals",
            ("time (UTC)", "identity", "tool", "stage", "code", "pointer"),
            (
                [_utc(r.at), r.identity, r.tool, r.stage, r.code, r.pointer]
                for r in stats.recent_refusals
            ),
        ),
    ]


def _table(
    table_id: str,
    headings: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    numeric: Sequence[int] = (),
) -> str:
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class=n>{_e(cell)}</td>" if i in numeric else f"<td>{_e(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    if not body:
        body = f"<tr><td colspan={len(headings)} class=muted>none</td></tr>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headings)
    return (
        f"<div class=wide><table id={table_id}><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


def _timeline(minutes: Sequence[Minute]) -> str:
    """Stacked bars, one per minute: successes, then failures by stage. No text inside (it
    would shrink with the chart); the axis is HTML below it."""
    width, plot = 720, 140
    peak = max((m.total for m in minutes), default=0) or 1
    step = width / max(len(minutes), 1)
    bar = max(step - 1, 1)
    shapes = []
    for i, minute in enumerate(minutes):
        x = i * step
        y: float = plot
        segments = [("ok", OK_COLOUR, minute.ok)] + [
            (stage, _colour(stage), n) for stage, n in sorted(minute.failed.items())
        ]
        for name, colour, n in segments:
            if not n:
                continue
            h = (plot - 4) * n / peak
            y -= h
            label = f"{_utc(minute.start)[11:16]} UTC: {n} {name}"
            shapes.append(
                f"<rect x='{x:.1f}' y='{y:.1f}' width='{bar:.1f}' height='{h:.1f}'"
                f" fill='{colour}'><title>{_e(label)}</title></rect>"
            )
    first = _utc(minutes[0].start)[11:16] if minutes else ""
    last = _utc(minutes[-1].start)[11:16] if minutes else ""
    return (
        f"<svg id=timeline class=chart role=img aria-label='calls per minute'"
        f" viewBox='0 0 {width} {plot}' preserveAspectRatio='none'"
        f" xmlns='http://www.w3.org/2000/svg'>{''.join(shapes)}</svg>"
        f"<p class='axis muted'><span>{_e(first)}</span><span>peak {peak} per minute</span>"
        f"<span>{_e(last)}</span></p>"
    )


def _legend(minutes: Sequence[Minute]) -> str:
    stages = sorted({stage for m in minutes for stage in m.failed})
    items = [_swatch(OK_COLOUR, "ok")] + [_swatch(_colour(s), s) for s in stages]
    return f"<p class=legend>{''.join(items)}</p>"


def _swatch(colour: str, label: str) -> str:
    # an SVG square, not a style attribute: the page's policy allows no inline style
    return (
        f"<span><svg width='10' height='10'><rect width='10' height='10' fill='{colour}'/>"
        f"</svg> {_e(label)}</span>"
    )


def _bars(by_stage_code: Sequence[tuple[str, str, int]]) -> str:
    """One bar per (stage, code), in a table: its label and count are HTML text, readable at
    any width."""
    if not by_stage_code:
        return "<p class=muted>no failures</p>"
    rows = by_stage_code[:12]
    peak = max(n for _, _, n in rows) or 1
    body = "".join(
        f"<tr><td>{_e(stage)} / {_e(code)}</td><td class=bar>"
        "<svg class=bar viewBox='0 0 100 12' preserveAspectRatio='none'>"
        f"<rect width='{100 * n / peak:.1f}' height='12' fill='{_colour(stage)}'>"
        f"<title>{_e(f'{stage} / {code}: {n}')}</title></rect></svg></td>"
        f"<td class=n>{n}</td></tr>"
        for stage, code, n in rows
    )
    return (
        "<div class=wide><table id=failures-chart aria-label='failures by stage and code'>"
        f"<tbody>{body}</tbody></table></div>"
    )


def _health(store_ok: bool, health: Mapping[str, object]) -> str:
    state = "<b class=good>answering</b>" if store_ok else "<b class=bad>unavailable</b>"
    rows = "".join(f"<tr><td>{_e(k)}</td><td class=n>{_e(v)}</td></tr>" for k, v in health.items())
    return f"<p id=store-state>the store is {state}</p><table id=store-health>{rows}</table>"
