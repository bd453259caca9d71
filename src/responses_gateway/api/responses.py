"""POST /v1/responses over HTTP: validate the body (read before admission: api/admission.py), start the
response, stream it or return it whole.

A stream whose upstream has not answered within `--sse-keepalive` seconds starts anyway: its headers go out
then, and keep-alive comments every `--sse-keepalive` seconds after, so a client (and every proxy between)
gets a byte while a model server is slow to answer. An upstream that answers within that grace and refuses
the request (a model that does not exist, a bad parameter) still gets its own HTTP status; one that refuses
later is reported in the stream, as OpenAI reports a refusal it finds late: `response.created`,
`response.in_progress`, `error` and `response.failed`, nothing stored (docs/faults.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..composer import Composer
from ..errors import SERVER_ERROR, APIError
from ..logs import RESPONSE_ID
from ..pipeline import Started
from ..protocol.request import CreateResponse
from ..protocol.response import skeleton
from ..protocol.tools import ToolSet, normalize_tools
from ..respond import start
from ..services import Services, of
from .admission import hand_over
from .errors import error_response
from .request import ClientGone, cancelled_if_client_leaves, owner, read_request
from .streaming import EventStreamResponse, end_from_outside

log = logging.getLogger("responses_gateway")


async def create_response(request: Request) -> Response | EventStreamResponse:
    services = of(request.app)
    req = await read_request(request)
    if req.background:
        return await _background(services, request, req)
    try:
        async with cancelled_if_client_leaves(request):
            if req.stream:
                return await open_stream(services, req, owner(request))
            started = await start(services, req, owner(request))
            last: list[dict[str, Any]] = []
            async for batch in started.batches:
                last = batch  # the terminal batch, with the `error` event of a failure
    except ClientGone:
        return Response(status_code=499)  # nobody reads it; the upstream call was closed
    final = started.final
    if final["status"] == "failed":
        kept = req.store is not False and await is_stored(services, final["id"], owner(request))
        return failed_response(final, stored=kept, events=last)
    return Response(orjson.dumps(final), media_type="application/json")


async def is_stored(services: Services, response_id: str, owner: str) -> bool:
    """Whether GET /v1/responses/{id} finds the response now: a failed response whose write failed too is not
    there, and the store is asked rather than assumed. Bounded like /health: the database that just
    refused a write may not answer at all."""
    if services.store is None:
        return False
    try:
        found = await asyncio.wait_for(services.store.get(response_id, owner), services.settings.health_db_timeout)
    except Exception:
        return False
    return found is not None


async def open_stream(services: Services, req: CreateResponse, who: str) -> EventStreamResponse:
    """The SSE response, once the response has started or `--sse-keepalive` seconds have passed."""
    keepalive = services.settings.sse_keepalive or None
    if keepalive is None:  # no keep-alive, no grace: the stream starts when the upstream answers
        return EventStreamResponse((await start(services, req, who)).batches, None)
    opening = asyncio.ensure_future(start(services, req, who))
    try:
        await within(opening, keepalive)
    except asyncio.CancelledError:  # the client left: the upstream request is closed
        opening.cancel()
        raise
    if opening.done():
        started = opening.result()  # or the refusal, as an HTTP error
        RESPONSE_ID.set(started.final["id"])  # set in the task that started it: this request's logs name it too
        return EventStreamResponse(started.batches, keepalive)
    opening.add_done_callback(_retrieve)  # a refusal nobody awaits (the client left) is not logged as lost
    return EventStreamResponse(started_late(opening, req, services), keepalive)


async def started_late(opening: asyncio.Future[Started], req: CreateResponse,
                       services: Services) -> AsyncGenerator[list[dict[str, Any]], None]:
    """The batches of a response whose stream began before it started; a refusal by then is in the stream.
    (Its id is known only in the task that started it, so this request's access line shows none.)"""
    started = None
    try:
        try:
            started = await opening
        except APIError as exc:
            yield refused(req, exc, services)
            return
        except Exception:
            log.exception("starting a streamed response failed inside the gateway")
            yield refused(req, SERVER_ERROR, services)
            return
        async for events in started.batches:
            try:
                yield events
            except asyncio.CancelledError as exc:  # ended from outside while the sink waited on the client:
                last = await end_from_outside(started.batches, exc)  # the pipeline ends it (streaming.py)
                if last is None:
                    raise
                yield last
                return
    finally:
        if started is not None:
            await started.batches.aclose()
        else:
            opening.cancel()


def refused(req: CreateResponse, error: APIError, services: Services) -> list[dict[str, Any]]:
    """A refusal that came after the stream began: `response.created`, `response.in_progress`, `error`,
    `response.failed`, as OpenAI streams one (nothing is stored, as nothing is for a refusal before it)."""
    try:
        tools = normalize_tools(req.tools, req.tool_choice, hosted_policy=services.settings.hosted_tools)
    except APIError:
        tools = ToolSet()
    composer = Composer(skeleton(req, tools))
    return composer.start() + composer.fail(error.code, error.message, type=error.type, param=error.param)


async def within(task: asyncio.Future[Started], seconds: float) -> None:
    """Wait until `task` is done or `seconds` have passed, leaving it running (asyncio.wait without the sets)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = loop.call_later(seconds, wake)
    try:
        await waiter
    finally:
        timer.cancel()
        task.remove_done_callback(wake)


def _retrieve(future: asyncio.Future[Started]) -> None:
    if not future.cancelled():
        future.exception()


def failed_response(final: dict[str, Any], *, stored: bool, events: list[dict[str, Any]]) -> Response:
    """A non-streamed response that failed: a 502 whose message (and `x-response-id` header) names the
    response and says whether it was stored (the caller asked the store), so the client knows whether
    GET /v1/responses/{id} finds it. Its code is the precise one of the `error` event among the last
    `events` (e.g. `upstream_idle_timeout`), as a stream would carry; `response.error.code` keeps to OpenAI's
    closed set (`server_error`)."""
    error = final["error"] or {}
    rid = final["id"]
    code = next((e["code"] for e in events if e["type"] == "error"), error.get("code"))
    note = f"response {rid} was stored with status failed" if stored else f"response {rid} was not stored"
    message = f"{error.get('message') or 'The response failed.'} ({note})"
    return error_response(502, {"error": {"message": message, "type": "server_error", "param": None,
                                          "code": code}}, headers={"x-response-id": rid})


async def _background(services: Services, request: Request, req: CreateResponse) -> Response | EventStreamResponse:
    """Start a background response (background.py) and answer at once: the queued response, or a stream that
    follows its event log (a client that leaves does not stop the response). The job holds the request's
    admission until the response ends."""
    jobs = services.background
    if jobs is None:
        raise APIError(400, "Background responses need a response store; this gateway runs with --db none.",
                       param="background", code="invalid_value")
    jobs.admit()
    key = owner(request)
    started = await start(services, req, key)
    ticket = hand_over(request.scope)
    try:
        queued = await jobs.submit(started, ticket)
    except BaseException:
        if ticket is not None:
            await ticket.release()
        raise
    if req.stream:
        return EventStreamResponse(jobs.follow(queued["id"], key, -1), encoded=True)
    return Response(orjson.dumps(queued), media_type="application/json")
