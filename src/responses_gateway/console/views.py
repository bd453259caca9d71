"""The console's read pages: responses (a filtered, paged list; one response whole), conversations, files and
vector stores, containers, usage, and the live responses (a list, and one followed as it streams).

Every page works without JavaScript. Following a live response is one HTML response written as the events
come (the browser shows each row as it arrives) and finished when the response ends."""

from __future__ import annotations

import datetime
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..store.browse import Cursor, Filters
from . import plot
from .auth import html
from .html import HEADERS, badge, esc, href, link, page, pretty, table, when
from .live import Running
from .render import event_row, frames, thread, timeline
from .service import console_of

STATUSES = ("", "completed", "failed", "incomplete", "cancelled", "in_progress", "queued")
WINDOWS = {"1": 3600, "24": 86400, "168": 7 * 86400, "720": 30 * 86400}


def not_found(what: str, csrf: str) -> Response:
    return html(page("Not found", f'<p class="error">{esc(what)}</p>', csrf), 404)


def moment(text: str | None) -> int | None:
    """A filter's time: `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM` (UTC) or unix seconds; None if empty or not a time."""
    if not text:
        return None
    if text.isdigit():
        return int(text)
    try:
        stamp = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return int(stamp.timestamp())


def tokens(body: dict[str, Any]) -> str:
    usage = body.get("usage")
    return esc(usage.get("total_tokens")) if isinstance(usage, dict) else ""


def usage_line(used: Any) -> str:
    """A response's usage in one line: input (cached), output (reasoning), total."""
    if not isinstance(used, dict):
        return '<p class="empty">none</p>'
    cached = (used.get("input_tokens_details") or {}).get("cached_tokens")
    reasoning = (used.get("output_tokens_details") or {}).get("reasoning_tokens")
    return (f'<p class="usage">input {esc(used.get("input_tokens"))} (cached {esc(cached)}) · output '
            f'{esc(used.get("output_tokens"))} (reasoning {esc(reasoning)}) · total {esc(used.get("total_tokens"))}'
            "</p>")


def conversation_of(body: dict[str, Any]) -> str:
    conv = body.get("conversation")
    return str(conv.get("id") or "") if isinstance(conv, dict) else str(conv or "")


# -- responses ------------------------------------------------------------------------------------------------

async def responses(request: Request, csrf: str) -> Response:
    """Newest first; filters by model, status, key owner, conversation and time; paged by cursor."""
    q = request.query_params
    filters = Filters(model=q.get("model") or None, status=q.get("status") or None, owner=q.get("owner") or None,
                      conversation=q.get("conversation") or None, since=moment(q.get("since")),
                      until=moment(q.get("until")))
    listed = await console_of(request).browse.responses(filters, Cursor.parse(q.get("before")))
    rows = [[when(r["created_at"]), link(r["id"], "responses", r["id"]), esc(r["body"].get("model")),
             badge(r["status"]), link(r["owner"], "responses", owner=r["owner"]), tokens(r["body"]),
             link(conversation_of(r["body"]), "conversations", conversation_of(r["body"]))
             if conversation_of(r["body"]) else "",
             link(r["body"].get("previous_response_id"), "responses", r["body"]["previous_response_id"])
             if r["body"].get("previous_response_id") else ""]
            for r in listed.rows]
    options = "".join(f'<option value="{esc(s)}"{" selected" if s == (filters.status or "") else ""}>'
                      f'{esc(s or "any status")}</option>' for s in STATUSES)
    form = (f'<form method="get" action="{href("responses")}" class="filters">'
            f'<input name="model" placeholder="model" value="{esc(filters.model)}">'
            f'<select name="status">{options}</select>'
            f'<input name="owner" placeholder="key owner (HMAC id)" value="{esc(filters.owner)}">'
            f'<input name="conversation" placeholder="conversation id" value="{esc(filters.conversation)}">'
            f'<input name="since" placeholder="since (UTC)" value="{esc(q.get("since"))}">'
            f'<input name="until" placeholder="until (UTC)" value="{esc(q.get("until"))}">'
            '<button>Filter</button></form>')
    more = ""
    if listed.next is not None:
        more = (f'<p class="more"><a rel="next" href="{href("responses", **{**dict(q), "before": listed.next.text()})}'
                '">Older →</a></p>')
    body = form + table(("created (UTC)", "response", "model", "status", "key owner", "tokens", "conversation",
                         "previous"), rows, "no stored responses match") + more
    return html(page("Responses", body, csrf, "responses"))


async def response(request: Request, csrf: str) -> Response:
    """One response: its input and output as a conversation, usage, timings, its chain, its event log."""
    console = console_of(request)
    rid = request.path_params["response_id"]
    found = await console.browse.response(rid)
    if found is None:
        return not_found(f"No stored response {rid}.", csrf)
    body = found["body"]
    inputs, outputs = await console.browse.items(rid)
    if not outputs and isinstance(body.get("output"), list):
        outputs = body["output"]
    chain = await console.browse.chain(rid)
    followers = await console.browse.followers(rid)
    created, completed = body.get("created_at"), body.get("completed_at")
    took = f"{int(completed) - int(created)} s" if isinstance(created, int) and isinstance(completed, int) else ""
    facts = [("status", badge(found["status"]) + (" (deleted)" if found["deleted"] else "")),
             ("model", esc(body.get("model"))), ("key owner", link(found["owner"], "responses", owner=found["owner"])),
             ("created (UTC)", when(created)), ("completed (UTC)", when(completed)), ("took", esc(took)),
             ("background", esc(bool(body.get("background")))), ("expires (UTC)", when(found["expires_at"])),
             ("conversation", link(conversation_of(body), "conversations", conversation_of(body))
              if conversation_of(body) else "")]
    if body.get("error"):
        facts.append(("error", pretty(body["error"])))
    if body.get("incomplete_details"):
        facts.append(("incomplete", pretty(body["incomplete_details"])))
    dl = "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
    previous = " ← ".join(link(one, "responses", one) for one in chain) or "none"
    after = ", ".join(link(one, "responses", one) for one in followers) or "none"
    parts = [dl, f'<p class="chain">previous responses (nearest first): {previous}</p>',
             f'<p class="chain">continued by: {after}</p>',
             "<h2>Usage</h2>" + usage_line(body.get("usage")),
             "<h2>Input</h2>" + thread(inputs), "<h2>Output</h2>" + thread(outputs)]
    if body.get("background"):
        events = [e for _, text in await console.browse.events(rid) for e in frames(text)]
        parts.append("<h2>Event log</h2>" + timeline(events))
    if body.get("instructions"):
        parts.insert(1, "<h2>Instructions</h2>" + f'<pre>{esc(body.get("instructions"))}</pre>')
    parts.append(f"<details><summary>stored JSON</summary>{pretty(body)}</details>")
    return html(page(f"Response {rid}", "".join(parts), csrf, "responses"))


# -- conversations ----------------------------------------------------------------------------------------

async def conversations(request: Request, csrf: str) -> Response:
    listed = await console_of(request).browse.conversations(Cursor.parse(request.query_params.get("before")))
    rows = [[when(c["created_at"]), link(c["id"], "conversations", c["id"]), esc(c["owner"]),
             esc(", ".join(f"{k}={v}" for k, v in (c["metadata"] or {}).items()))] for c in listed.rows]
    more = (f'<p class="more"><a rel="next" href="{href("conversations", before=listed.next.text())}">Older →</a></p>'
            if listed.next is not None else "")
    return html(page("Conversations", table(("created (UTC)", "conversation", "key owner", "metadata"), rows,
                                            "no conversations") + more, csrf, "conversations"))


async def conversation(request: Request, csrf: str) -> Response:
    cid = request.path_params["conversation_id"]
    found = await console_of(request).browse.conversation(cid)
    if found is None:
        return not_found(f"No conversation {cid}.", csrf)
    head, items = found
    body = (f'<dl><dt>key owner</dt><dd>{esc(head["owner"])}</dd><dt>created (UTC)</dt><dd>{when(head["created_at"])}'
            f'</dd></dl><p>{link("its responses", "responses", conversation=cid)}</p>' + thread(items))
    return html(page(f"Conversation {cid}", body, csrf, "conversations"))


# -- files, vector stores, containers --------------------------------------------------------------------

async def files(request: Request, csrf: str) -> Response:
    browse = console_of(request).browse
    rows = [[esc(f.get("id")), esc(f.get("filename")), esc(f.get("purpose")), esc(f.get("bytes")),
             badge(f.get("status") or ""), esc(f.get("owner")), when(f.get("created_at")), when(f.get("expires_at"))]
            for f in await browse.files()]
    stores = [[link(v["id"], "vector_stores", v["id"]), esc(v["name"]), esc(v["embedding_model"]),
               esc(", ".join(f"{k}: {n}" for k, n in sorted(v["counts"].items())) or "empty"), esc(v["owner"]),
               when(v["created_at"]), when(v["expires_at"])] for v in await browse.vector_stores()]
    body = ("<h2>Files</h2>" + table(("file", "name", "purpose", "bytes", "status", "key owner", "created", "expires"),
                                     rows, "no files")
            + "<h2>Vector stores</h2>" + table(("vector store", "name", "embedding", "files", "key owner", "created",
                                                "expires"), stores, "no vector stores"))
    return html(page("Files and vector stores", body, csrf, "files"))


async def vector_store(request: Request, csrf: str) -> Response:
    vid = request.path_params["vector_store_id"]
    rows = [[esc(f["file_id"]), badge(f["status"]), esc(f["usage_bytes"]), esc(f["attempts"]),
             pretty(f["last_error"]) if f["last_error"] else ""]
            for f in await console_of(request).browse.vector_store_files(vid)]
    return html(page(f"Vector store {vid}", table(("file", "status", "bytes", "attempts", "error"), rows,
                                                  "no files in this vector store"), csrf, "files"))


async def containers(request: Request, csrf: str) -> Response:
    now = time.time()
    rows = [[esc(c["id"]), esc(c["name"]), badge(c["status"]), esc(c["owner"]), when(c["created_at"]),
             when(c["expires_at"]) + (" (expired)" if c["expires_at"] < now else ""), esc(c["memory_limit"]),
             "<br>".join(f'{esc(f["path"])} ({esc(f["bytes"])} B, {esc(f["source"])})' for f in c["files"])]
            for c in await console_of(request).browse.containers()]
    return html(page("Containers", table(("container", "name", "status", "key owner", "created", "expires",
                                          "memory", "files"), rows, "no containers"), csrf, "containers"))


# -- usage --------------------------------------------------------------------------------------------------

async def usage(request: Request, csrf: str) -> Response:
    """Tokens, responses and failures over time, per model and per key owner, as inline SVG plots."""
    hours = request.query_params.get("hours", "24")
    window = WINDOWS.get(hours, WINDOWS["24"])
    bucket = max(60, window // 48)
    since = int(time.time()) - window
    data = await console_of(request).browse.usage(since - since % bucket, bucket)
    buckets = list(range(since - since % bucket, int(time.time()) + 1, bucket))
    by: dict[str, dict[str, dict[int, int]]] = {"tokens per model": {}, "responses per model": {},
                                                "failures per model": {}, "tokens per key owner": {}}
    for start, model, owner, count, failed, used in data.rows:
        for title, name, value in (("tokens per model", model, used), ("responses per model", model, count),
                                   ("failures per model", model, failed), ("tokens per key owner", owner, used)):
            series = by[title].setdefault(name or "(none)", {})
            series[start] = series.get(start, 0) + value
    choose = " ".join(link(f"{h} h", "usage", hours=h) if h != hours else f"<b>{esc(h)} h</b>" for h in WINDOWS)
    plots = "".join(plot.lines(title, buckets if data.rows else [], series) for title, series in by.items())
    return html(page("Usage", f'<p class="window">window: {choose}</p>{plots}', csrf, "usage"))


# -- live ---------------------------------------------------------------------------------------------------

def live_row(one: Running) -> list[str]:
    return [link(one.id, "live", one.id), esc(one.model), esc(one.owner), when(one.started), badge(one.status),
            esc(len(one.events)), esc("yes" if one.background else "")]


async def live(request: Request, csrf: str) -> Response:
    """The responses in flight on this process (and, with --redis, on the other replicas), and those that just
    ended here; the page reloads itself (no script: a meta refresh)."""
    console = console_of(request)
    watcher = console.live
    head = ("response", "model", "key owner", "started (UTC)", "status", "events", "background")
    body = ('<section id="in-flight"><h2>In flight</h2>'
            + table(head, [live_row(o) for o in list(watcher.running.values())], "nothing in flight on this process")
            + "</section>")
    if console.shared is not None:
        others = [[link(s.get("id"), "live", str(s.get("id"))), esc(s.get("model")), esc(s.get("owner")),
                   when(s.get("started")), esc(s.get("replica"))] for s in await console.shared.others()]
        body += ('<section id="other-replicas"><h2>In flight on other replicas</h2>'
                 + table(("response", "model", "key owner", "started (UTC)", "replica"), others,
                         "nothing in flight on the other replicas") + "</section>")
    body += ('<section id="just-ended"><h2>Just ended</h2>'
             + table(head, [live_row(o) for o in reversed(list(watcher.ended.values()))], "nothing ended recently")
             + "</section>")
    text = page("Live", body, csrf, "live").replace("<head>", '<head><meta http-equiv="refresh" content="5">', 1)
    return html(text)


async def follow(request: Request, csrf: str) -> Response:
    """One response's events as they stream, written into the page as they come, until it ends: from this
    process, or from another replica's through Redis."""
    console = console_of(request)
    rid = request.path_params["response_id"]
    one = console.live.find(rid)
    summary: dict[str, Any] | None = None
    if one is None and console.shared is not None:
        summary = await console.shared.summary(rid)
    if one is None and summary is None:
        if await console.browse.response(rid) is not None:
            return Response(status_code=303, headers={**HEADERS, "location": f"/console/responses/{quote(rid)}"})
        return not_found(f"No response {rid} in flight.", csrf)
    about = summary or {"model": one.model if one else "", "owner": one.owner if one else "",
                        "started": one.started if one else None}
    shell = page(f"Live {rid}", f'<p>model {esc(about.get("model"))}, key owner {esc(about.get("owner"))}, started '
                                f'{when(about.get("started"))} UTC</p><ol class="events">@@', csrf, "live")
    top, _, bottom = shell.partition("@@")
    if one is not None:
        events = console.live.follow(one)
    elif console.shared is not None:
        events = console.shared.follow(rid)
    else:
        return not_found(f"No response {rid} in flight.", csrf)

    async def body() -> AsyncIterator[bytes]:
        yield top.encode()
        status = "in_progress"
        async for batch in events:
            for event in batch:
                if isinstance(event.get("response"), dict):
                    status = str(event["response"].get("status", status))
            yield ("".join(event_row(e) for e in batch) or "\n").encode()
        if one is not None:
            status = one.status
        dropped = f" ({one.dropped} deltas not kept)" if one is not None and one.dropped else ""
        yield (f'</ol><p class="ended" id="ended">ended: {badge(status)}{esc(dropped)} — '
               f'{link("the stored response", "responses", rid)}</p>' + bottom).encode()

    return StreamingResponse(body(), media_type="text/html; charset=utf-8", headers=HEADERS)
