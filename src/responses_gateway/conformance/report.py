"""The results of a check, for people (text, HTML) and for CI (JSON).

Violations are grouped by rule within each exchange and quote the offending event, so a report answers "which
event broke which promise" without a second tool. The HTML page is self-contained (inline CSS, no script):
each exchange's event timeline with the violating events marked in place.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from typing import Any

from .rules import RULES, Violation
from .scenarios import OBJECT_RULES, Exchange, ScenarioResult

ALL_RULES = {**RULES, **OBJECT_RULES}
QUOTED_PER_RULE = 3


def passed(results: list[ScenarioResult]) -> bool:
    return all(r.status != "fail" for r in results)


def _compact(event: Any, limit: int = 300) -> str:
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _by_rule(violations: list[Violation]) -> dict[str, list[Violation]]:
    groups: dict[str, list[Violation]] = {}
    for v in violations:
        groups.setdefault(v.rule, []).append(v)
    return groups


def _exchange_line(ex: Exchange) -> str:
    events = f"{len(ex.events)} events" if ex.events else ""
    if ex.method == "FILE":
        return f"{ex.label}: {ex.path}, {events or 'no events'}"
    answer = f"{ex.status}" if ex.status is not None else "no answer"
    return f"{ex.label}: {ex.method} {ex.path} -> {answer}{', ' * bool(events)}{events}"


# --------------------------------------------------------------------------- text


def text_report(results: list[ScenarioResult], target: str) -> str:
    lines = [f"responses-gateway check {target}", ""]
    width = max((len(r.name) for r in results), default=0)
    for r in results:
        count = len(r.violations)
        tail = f" - {count} violation{'s' * (count != 1)}" if count else ""
        lines.append(f"{r.status.upper():4}  {r.name:{width}}  {r.title}{tail}")
        for note in r.notes:
            lines.append(f"      note: {note}")
        for ex in r.exchanges:
            if not ex.violations:
                continue
            lines.append(f"      {_exchange_line(ex)}")
            for rule, group in _by_rule(ex.violations).items():
                lines.append(f"        [{rule}] {ALL_RULES.get(rule, '')} ({len(group)}x)")
                for v in group[:QUOTED_PER_RULE]:
                    lines.append(f"          {v}")
                    if v.event is not None:
                        lines.append(f"            {_compact(v.event)}")
                if len(group) > QUOTED_PER_RULE:
                    lines.append(f"          ... and {len(group) - QUOTED_PER_RULE} more")
    totals = Counter(v.rule for r in results for v in r.violations)
    lines.append("")
    if totals:
        lines.append("rules broken: " + ", ".join(f"{rule} ({n})" for rule, n in totals.most_common()))
    statuses = Counter(r.status for r in results)
    summary = ", ".join(f"{statuses[s]} {word}" for s, word in
                        (("pass", "passed"), ("fail", "failed"), ("skip", "skipped")) if statuses[s])
    lines.append(f"result: {'PASS' if passed(results) else 'FAIL'} ({summary})")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- JSON


def _violation_json(v: Violation) -> dict[str, Any]:
    return {"rule": v.rule, "message": v.message, "position": v.position,
            "sequence_number": (v.event or {}).get("sequence_number"), "type": (v.event or {}).get("type"),
            "event": v.event}


def json_report(results: list[ScenarioResult], target: str) -> str:
    doc = {
        "target": target,
        "ok": passed(results),
        "scenarios": [
            {"name": r.name, "title": r.title, "status": r.status, "notes": r.notes,
             "exchanges": [{"label": ex.label, "method": ex.method, "path": ex.path, "status": ex.status,
                            "events": len(ex.events), "violations": [_violation_json(v) for v in ex.violations]}
                           for ex in r.exchanges]}
            for r in results
        ],
        "rules": dict(Counter(v.rule for r in results for v in r.violations)),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2433;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 6px} h3{font-size:14px;margin:14px 0 6px}
.summary td,.summary th{padding:3px 10px;text-align:left;border-bottom:1px solid #e3e6ec}
.badge{display:inline-block;min-width:38px;text-align:center;border-radius:4px;padding:1px 6px;font-weight:600;
color:#fff;font-size:12px}
.pass{background:#1f8a4c}.fail{background:#c62828}.skip{background:#8a8f99}
.note{color:#555;font-style:italic;margin:2px 0}
ol.timeline{list-style:none;padding:0;margin:0;border-left:3px solid #cfd6e4;font:12px/1.5 ui-monospace,monospace}
ol.timeline li{padding:1px 8px;white-space:pre-wrap;word-break:break-all}
ol.timeline li.violation{background:#fdecea;border-left:4px solid #c62828;margin-left:-3px}
.seq{color:#8a8f99;display:inline-block;min-width:34px}.type{color:#24478f;font-weight:600}
.marker{display:inline-block;background:#c62828;color:#fff;border-radius:3px;padding:0 5px;margin:0 4px}
.msg{color:#8e1b1b}
ul.stream-violations li{color:#8e1b1b}
pre.body{background:#f5f6f8;padding:8px;max-height:240px;overflow:auto;font-size:12px}
"""


def _event_summary(ev: dict[str, Any]) -> str:
    if "delta" in ev:
        return repr(ev["delta"]) if isinstance(ev["delta"], str) else _compact(ev["delta"], 80)
    item = ev.get("item")
    if isinstance(item, dict):
        return f"{item.get('type')} {item.get('id')}"
    response = ev.get("response")
    if isinstance(response, dict):
        return f"{response.get('id')} status={response.get('status')} output={len(response.get('output') or [])}"
    for key in ("text", "arguments", "input"):
        if isinstance(ev.get(key), str):
            return f"{key}={ev[key][:120]!r}"
    return ""


def _marker(v: Violation) -> str:
    e = html.escape
    return (f'<span class="marker" data-rule="{e(v.rule)}">{e(v.rule)}</span>'
            f'<span class="msg">{e(v.message)}</span>')


def _exchange_html(ex: Exchange) -> str:
    e = html.escape
    out = [f"<h3>{e(_exchange_line(ex))}</h3>"]
    by_position: dict[int, list[Violation]] = {}
    loose = []
    for v in ex.violations:
        if v.position is not None and v.position < len(ex.events):
            by_position.setdefault(v.position, []).append(v)
        else:
            loose.append(v)
    if loose:
        out.append('<ul class="stream-violations">' +
                   "".join(f'<li class="violation">{_marker(v)}</li>' for v in loose) + "</ul>")
    if ex.events:
        out.append('<ol class="timeline">')
        for position, ev in enumerate(ex.events):
            marks = by_position.get(position, [])
            cls = ' class="violation"' if marks else ""
            out.append(f'<li{cls}><span class="seq">#{e(str(ev.get("sequence_number")))}</span> '
                       f'<span class="type">{e(str(ev.get("type")))}</span> {e(_event_summary(ev))}'
                       + "".join(f"<br>{_marker(v)}" for v in marks) + "</li>")
        out.append("</ol>")
    elif ex.body is not None:
        out.append(f'<pre class="body">{e(json.dumps(ex.body, indent=1, ensure_ascii=False)[:4000])}</pre>')
    return "\n".join(out)


def html_report(results: list[ScenarioResult], target: str) -> str:
    e = html.escape
    verdict = "pass" if passed(results) else "fail"
    rows = "".join(
        f'<tr><td><span class="badge {r.status}">{r.status.upper()}</span></td><td><a href="#{e(r.name)}">'
        f"{e(r.name)}</a></td><td>{e(r.title)}</td><td>{len(r.violations) or ''}</td></tr>"
        for r in results
    )
    sections = []
    for r in results:
        notes = "".join(f'<p class="note">{e(n)}</p>' for n in r.notes)
        body = "\n".join(_exchange_html(ex) for ex in r.exchanges)
        sections.append(f'<section id="{e(r.name)}" data-status="{r.status}"><h2><span class="badge {r.status}">'
                        f"{r.status.upper()}</span> {e(r.name)}: {e(r.title)}</h2>{notes}{body}</section>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>responses-gateway check {e(target)}</title><style>{_CSS}</style></head><body>"
        f'<h1>responses-gateway check <span class="badge {verdict}" id="verdict">{verdict.upper()}</span></h1>'
        f"<p>{e(target)}</p>"
        f'<table class="summary"><tr><th></th><th>scenario</th><th></th><th>violations</th></tr>{rows}</table>'
        + "\n".join(sections)
        + "</body></html>\n"
    )
