"""The operator page, rendered on the server: one HTML document with inline SVG charts and
plain tables (usable without JavaScript), and a small inline script that fetches
/ops/stats.json and swaps in its freshly rendered fragment, so the page refreshes without a
reload. Every text is HTML-escaped; a strict Content-Security-Policy allows that one script."""

from __future__ import annotations

import base64
import hashlib
import html
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from strictcall.ops.stats import Breakdown, Minute

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
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#17202a;background:#fbfcfc}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #d5d8dc;padding:.2em .6em;
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.summary span{display:inline-block;margin-right:2em}.bad{color:#c0392b}.good{color:#1e8449}
.muted{color:#7f8c8d}svg{max-width:100%;height:auto;background:#fff;border:1px solid #eaeded}
.legend span{margin-right:1em;white-space:nowrap}.legend svg{border:0;vertical-align:middle}
"""

_SCRIPT: Final = (
    "(function(){var live=document.getElementById('live');"
    "function tick(){fetch('ops/stats.json',{credentials:'same-origin',cache:'no-store'})"
    ".then(function(r){if(!r.ok)throw new Error(r.status);return r.json();})"
    ".then(function(d){live.innerHTML=d.html;"
    "document.body.setAttribute('data-refreshed',String(Date.now()));})"
    ".catch(function(){document.body.setAttribute('data-refresh-failed','1');});}"
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


def _colour(stage: str) -> str:
    return STAGE_COLOURS.get(stage, _OTHER_COLOUR)


def render_page(stats: Breakdown, health: Mapping[str, object]) -> str:
    """The whole page."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        "<title>strictcall: operator</title><link rel=icon href='data:,'>"
        f"<style>{_STYLE}</style></head><body>"
        f"<div id=live>{render_fragment(stats, health)}</div>"
        f"<script>{_SCRIPT}</script></body></html>"
    )


def render_fragment(stats: Breakdown, health: Mapping[str, object]) -> str:
    """The page's live part: swapped in whole on each refresh."""
    window_min = round((stats.until - stats.since) / 60)
    rate = f"{100 * stats.failed / stats.calls:.1f} %" if stats.calls else "-"
    parts = [
        "<h1>strictcall: what the agents are doing</h1>",
        f"<p class=muted>the last {window_min} minutes, to {_e(_utc(stats.until))} UTC"
        f" (refreshes every {REFRESH_MS // 1000} s)</p>",
        "<p class=summary>"
        f"<span>calls <b id=total-calls>{stats.calls}</b></span>"
        f"<span>failed <b id=failed-calls class=bad>{stats.failed}</b></span>"
        f"<span>failure rate <b>{_e(rate)}</b></span></p>",
        "<h2>Calls per minute</h2>",
        _timeline(stats.minutes),
        _legend(stats.minutes),
        "<h2>Failures by stage and code</h2>",
        _bars(stats.by_stage_code),
        _table(
            "failures-by-code",
            ("stage", "code", "calls"),
            ([s, c, n] for s, c, n in stats.by_stage_code),
            numeric=(2,),
        ),
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
        "<h2>Most recent refusals</h2>",
        _table(
            "recent-refusals",
            ("time (UTC)", "identity", "tool", "stage", "code", "pointer"),
            (
                [_utc(r.at), r.identity, r.tool, r.stage, r.code, r.pointer]
                for r in stats.recent_refusals
            ),
        ),
        "<h2>Store</h2>",
        _health(stats.store_ok, health),
    ]
    return "".join(parts)


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
    return f"<table id={table_id}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _timeline(minutes: Sequence[Minute]) -> str:
    """Stacked bars, one per minute: successes, then failures by stage."""
    width, height, top = 720, 170, 10
    plot = height - 30
    peak = max((m.total for m in minutes), default=0) or 1
    step = width / max(len(minutes), 1)
    bar = max(step - 1, 1)
    shapes = []
    for i, minute in enumerate(minutes):
        x = i * step
        y: float = top + plot
        segments = [("ok", OK_COLOUR, minute.ok)] + [
            (stage, _colour(stage), n) for stage, n in sorted(minute.failed.items())
        ]
        for name, colour, n in segments:
            if not n:
                continue
            h = plot * n / peak
            y -= h
            label = f"{_utc(minute.start)[11:16]} UTC: {n} {name}"
            shapes.append(
                f"<rect x='{x:.1f}' y='{y:.1f}' width='{bar:.1f}' height='{h:.1f}'"
                f" fill='{colour}'><title>{_e(label)}</title></rect>"
            )
    first = _utc(minutes[0].start)[11:16] if minutes else ""
    last = _utc(minutes[-1].start)[11:16] if minutes else ""
    axis = (
        f"<line x1='0' y1='{top + plot}' x2='{width}' y2='{top + plot}' stroke='#aab7b8'/>"
        f"<text x='0' y='{height - 4}' font-size='11'>{_e(first)}</text>"
        f"<text x='{width}' y='{height - 4}' font-size='11' text-anchor='end'>{_e(last)}</text>"
        f"<text x='4' y='{top + 10}' font-size='11'>{peak} per minute</text>"
    )
    return (
        f"<svg id=timeline role=img aria-label='calls per minute' viewBox='0 0 {width} {height}'"
        f" width='{width}' height='{height}' xmlns='http://www.w3.org/2000/svg'>"
        f"{''.join(shapes)}{axis}</svg>"
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
    """One horizontal bar per (stage, code), its count written at its end."""
    if not by_stage_code:
        return "<p class=muted>no failures</p>"
    rows = by_stage_code[:12]
    width, row_h, label_w = 720, 22, 260
    peak = max(n for _, _, n in rows) or 1
    shapes = []
    for i, (stage, code, n) in enumerate(rows):
        y = i * row_h
        w = (width - label_w - 60) * n / peak
        shapes.append(
            f"<text x='0' y='{y + 15}' font-size='12'>{_e(stage)} / {_e(code)}</text>"
            f"<rect x='{label_w}' y='{y + 3}' width='{w:.1f}' height='{row_h - 6}'"
            f" fill='{_colour(stage)}'><title>{_e(f'{stage} / {code}: {n}')}</title></rect>"
            f"<text x='{label_w + w + 4:.1f}' y='{y + 15}' font-size='12'>{n}</text>"
        )
    height = row_h * len(rows)
    return (
        f"<svg id=failures-chart role=img aria-label='failures by stage and code'"
        f" viewBox='0 0 {width} {height}' width='{width}' height='{height}'"
        f" xmlns='http://www.w3.org/2000/svg'>{''.join(shapes)}</svg>"
    )


def _health(store_ok: bool, health: Mapping[str, object]) -> str:
    state = "<b class=good>answering</b>" if store_ok else "<b class=bad>unavailable</b>"
    rows = "".join(f"<tr><td>{_e(k)}</td><td class=n>{_e(v)}</td></tr>" for k, v in health.items())
    return f"<p id=store-state>the store is {state}</p><table id=store-health>{rows}</table>"
