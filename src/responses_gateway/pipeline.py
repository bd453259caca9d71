"""One response from start to terminal event: upstream stream → composer → batches of Responses events.

Every way out — success, length cut, content filter, upstream error, dropped connection, a bug of ours —
ends in exactly one terminal event. The finished response is handed to `on_final` (the store) before the
terminal event goes out, so a client that chains the moment it sees `response.completed` finds it; a
store write that fails twice turns the response into `response.failed` (code `storage_error`), so
`completed` always means stored. Client disconnect
arrives as cancellation and closes the upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from . import metrics
from .composer import Composer
from .errors import APIError, UpstreamError
from .logs import RESPONSE_ID
from .observe import Observation
from .upstreams.base import EventStream

log = logging.getLogger("responses_gateway.pipeline")

OnFinal = Callable[[dict[str, Any]], Awaitable[None]]

# Graceful drain: the tasks running a response now. When the drain timeout ends (SIGTERM), `end_all` cancels
# each with DRAIN, and its pipeline ends the response with `response.failed` (stored) instead of vanishing.
RUNNING: set[asyncio.Task[Any]] = set()
DRAIN = "the gateway is draining"
SHUTTING_DOWN = APIError(503, "The gateway is shutting down; the response was cut short. Please retry.",
                         type="server_error", code="server_shutting_down")


def ending(exc: BaseException) -> APIError | None:
    """The error a cancellation ends its response with: a task cancelled with DRAIN, or with an `APIError` as
    its message (a client that stopped reading, an upstream deadline that ran out while nobody read), ends
    its response as failed with it. None: a plain cancellation (the client left: nobody to tell)."""
    cause = exc.args[0] if exc.args else None
    if cause == DRAIN:
        return SHUTTING_DOWN
    return cause if isinstance(cause, APIError) else None


def end_all() -> int:
    """End every running response (drain timeout reached); returns how many."""
    tasks = list(RUNNING)
    for task in tasks:
        task.cancel(DRAIN)
    if tasks:
        log.warning("drain timeout: ending %d running responses", len(tasks))
    return len(tasks)


class Steps(Protocol):
    """A response of several upstream steps (the MCP loop, compaction): what the pipeline asks of it."""

    again: bool  # after a step: open another one
    incomplete: str | None  # why the response stopped short, if it did
    seen: Observation | None  # the response's observation, set by `run` (the MCP loop's spans are its children)

    def prelude(self, composer: Composer) -> AsyncIterator[list[dict[str, Any]]]: ...

    def open_next(self, composer: Composer) -> Awaitable[EventStream]: ...

    def after_step(self, composer: Composer) -> AsyncIterator[list[dict[str, Any]]]: ...

    async def aclose(self) -> None: ...


async def store_final(composer: Composer, events: list[dict[str, Any]], on_final: OnFinal) -> list[dict[str, Any]]:
    """Store the finished response before its terminal event goes out; tried twice. A response that cannot be
    stored fails (`storage_error`) rather than reach the client as `completed` and then be missing."""
    final = composer.final
    for attempt in (1, 2):
        try:
            await on_final(final)
            return events
        except Exception:
            metrics.store_failures.inc()
            log.exception("response %s could not be stored (attempt %d of 2)", final["id"], attempt)
    if final["status"] == "failed":
        return events  # already failed: its terminal event says so, stored or not
    return composer.unstored(events, "The response was generated but could not be stored, so it cannot be "
                                     "retrieved or continued; please retry.")


async def run(composer: Composer, stream: EventStream | None, on_final: OnFinal | None = None,
              loop: Steps | None = None, seen: Observation | None = None
              ) -> AsyncGenerator[list[dict[str, Any]], None]:
    """`stream`: the first upstream step, already opened (so HTTP errors could still be HTTP errors);
    None when a tool `loop` must run first (listing MCP tools) and opens every step itself. `seen`: the
    response's timings, marked here once each (metrics)."""
    task = asyncio.current_task()
    if task is not None:
        RUNNING.add(task)
    seen = seen or Observation("", "")
    RESPONSE_ID.set(composer.response["id"])
    metrics.in_flight.inc()
    try:
        yield composer.start()
        try:
            if loop is not None:
                loop.seen = seen
                async for events in loop.prelude(composer):
                    yield events
            while True:
                if stream is None:
                    if loop is None:
                        raise ValueError("run() needs an opened stream or a tool loop")
                    seen.opening()
                    stream = await loop.open_next(composer)
                async for batch in stream:
                    if not seen.upstream_seen:
                        seen.upstream_events()
                    events = composer.feed(batch)
                    if events:
                        if not seen.first_output:
                            seen.output()
                        yield events
                closing, stream = stream, None  # closed once, even if closing fails
                await closing.aclose()
                seen.step_done()
                if loop is None:
                    break
                async for events in loop.after_step(composer):
                    yield events
                if not loop.again:
                    break
        except asyncio.CancelledError as exc:
            cause = ending(exc)
            if cause is None or task is None:
                raise  # the client left: nobody to tell
            task.uncancel()
            if cause is not SHUTTING_DOWN:
                log.warning("response %s ended: %s", composer.response["id"], cause.message)
            events = composer.fail(cause.code, cause.message, type=cause.type, param=cause.param)
        except UpstreamError as exc:
            log.warning("response %s failed: %s", composer.response["id"], exc.message)
            events = composer.fail(exc.code, exc.message, type=exc.type, param=exc.param)
        except Exception:
            log.exception("response %s failed inside the gateway", composer.response["id"])
            events = composer.fail("server_error", "The gateway failed while processing the response.")
        else:
            events = composer.finish(loop.incomplete if loop is not None else None)
        if on_final is not None:
            events = await store_final(composer, events, on_final)
        metrics.responses.labels(status=composer.final["status"]).inc()
        seen.finished(composer.final)
        yield events
    finally:
        if task is not None:
            RUNNING.discard(task)
        metrics.in_flight.dec()
        if stream is not None:
            try:
                await stream.aclose()
            except Exception:  # the outcome is already decided (or sent): closing must not replace it
                log.warning("closing the upstream stream of response %s failed", composer.response["id"],
                            exc_info=True)
        if loop is not None:
            await loop.aclose()
        seen.close()
