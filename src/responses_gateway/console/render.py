"""Stored items as the console shows them: a conversation of messages, tool calls with their arguments and
results, reasoning; and a background response's event log as a timeline. All text escaped (html.esc)."""

from __future__ import annotations

from typing import Any

import orjson

from .html import badge, esc, pretty


def text_of(content: Any) -> str:
    """A message's content as text: its parts' text, others named by type."""
    if isinstance(content, str):
        return content
    out = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if "text" in part:
            out.append(str(part["text"]))
        elif "refusal" in part:
            out.append(f"[refusal] {part['refusal']}")
        else:
            out.append(f"[{part.get('type', 'part')}]")
    return "\n".join(out)


def arguments(raw: Any) -> str:
    """A tool call's arguments, indented when they are JSON."""
    if isinstance(raw, str):
        try:
            return pretty(orjson.loads(raw))
        except orjson.JSONDecodeError:
            return f"<pre>{esc(raw)}</pre>"
    return pretty(raw)


def item(one: Any) -> str:
    """One item as a block of the thread."""
    if not isinstance(one, dict):
        return f'<div class="item">{pretty(one)}</div>'
    kind = str(one.get("type") or ("message" if "role" in one else "item"))
    ident = f'<span class="id">{esc(one.get("id") or "")}</span>'
    if kind == "message":
        role = str(one.get("role") or "")
        return (f'<div class="item msg role-{esc(role)}"><div class="who">{esc(role)} {ident}</div>'
                f'<div class="text">{esc(text_of(one.get("content")))}</div></div>')
    if kind == "reasoning":
        summary = "\n".join(str(s.get("text", "")) for s in one.get("summary") or [] if isinstance(s, dict))
        body = summary or text_of(one.get("content")) or ("[encrypted]" if one.get("encrypted_content") else "")
        return (f'<details class="item reasoning"><summary>reasoning {ident}</summary>'
                f'<div class="text">{esc(body)}</div></details>')
    if kind in ("function_call", "custom_tool_call"):
        return (f'<div class="item call"><div class="who">tool call <b>{esc(one.get("name"))}</b> '
                f'<span class="id">{esc(one.get("call_id"))}</span> {badge(one.get("status") or "")}</div>'
                f'{arguments(one.get("arguments", one.get("input")))}</div>')
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = one.get("output")
        shown = text_of(output) if isinstance(output, list) else output
        return (f'<div class="item result"><div class="who">tool result <span class="id">'
                f'{esc(one.get("call_id"))}</span></div><pre>{esc(shown)}</pre></div>')
    rest = {k: v for k, v in one.items() if k not in ("type", "id")}
    return (f'<div class="item tool"><div class="who">{esc(kind)} {ident} {badge(one.get("status") or "")}</div>'
            f"{pretty(rest)}</div>")


def thread(items: list[Any]) -> str:
    if not items:
        return '<p class="empty">no items</p>'
    return '<div class="thread">' + "".join(item(one) for one in items) + "</div>"


def frames(text: str) -> list[dict[str, Any]]:
    """The events of a run of SSE frames (an event log row)."""
    out = []
    for frame in text.split("\n\n"):
        for line in frame.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                try:
                    event = orjson.loads(line[6:])
                except orjson.JSONDecodeError:
                    continue
                if isinstance(event, dict):
                    out.append(event)
    return out


def event_detail(event: dict[str, Any]) -> str:
    """What one event says in a line: its delta, or its item's type, or its response's status."""
    if "delta" in event:
        return str(event["delta"])
    if isinstance(event.get("item"), dict):
        return str(event["item"].get("type", ""))
    if isinstance(event.get("response"), dict):
        return str(event["response"].get("status", ""))
    if "text" in event:
        return str(event["text"])
    return ""


def event_row(event: dict[str, Any]) -> str:
    return (f'<li><span class="seq">{esc(event.get("sequence_number"))}</span> '
            f'<span class="etype">{esc(event.get("type"))}</span> '
            f'<span class="detail">{esc(event_detail(event))}</span></li>')


def timeline(events: list[dict[str, Any]]) -> str:
    if not events:
        return '<p class="empty">no stored event log (only background responses keep one)</p>'
    return '<ol class="events">' + "".join(event_row(e) for e in events) + "</ol>"
