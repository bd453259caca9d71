"""One response from start to terminal event: upstream steps → composer → batches of Responses events.

Every way out — success, length cut, content filter, upstream error, dropped connection, a tool loop's cap,
a cancel, a drain, a bug of ours — goes through `end`, the one function that ends a response: it has the
composer write the terminal event, hands the finished response to `on_final` (the store) before that event
goes out, and records the metrics, once. So a client that chains the moment it sees `response.completed`
finds the response, and a store write that fails twice turns the response into `response.failed` (code
`storage_error`): `completed` always means stored. A client that goes away arrives as cancellation: the
upstream is closed and nobody is told (docs/faults.md).

A response of several upstream steps (gateway-run tools, compaction) is driven by a `Steps`: it runs what
comes before the first step, what comes between steps, and says what the next step's call is — or why the
response stops. The pipeline alone opens upstream steps, so each opening is observed the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from . import metrics
from .composer import Composer
from .errors import APIError, UpstreamError
from .logs import RESPONSE_ID
from .observe import Observation
from .protocol.request import CreateResponse
from .upstreams.base import Call, EventStream, Upstream

log = logging.getLogger("responses_gateway.pipeline")

Events = list[dict[str, Any]]
OnFinal = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class Started:
    """A response that has started: consume `batches` (each a list of events) to run it to its end."""

    request: CreateResponse
    composer: Composer
    history: list[dict[str, Any]]  # the full input sent upstream
    items: list[dict[str, Any]]  # this request's input items, with ids, as stored
    owner: str
    batches: AsyncGenerator[list[dict[str, Any]], None]
    # what runs with the final response before the terminal event (store, conversation, `then`); a job that
    # ends the response itself (a background cancel) runs it too
    on_final: OnFinal | None = None
    seen: Observation | None = None  # its timings (metrics), for whoever ends it

    @property
    def final(self) -> dict[str, Any]:
        return self.composer.final

# Graceful drain: the tasks running a response now. When the drain timeout ends (SIGTERM), `end_all` cancels
# each with DRAIN, and its pipeline ends the response with `response.failed` (stored) instead of vanishing.
RUNNING: set[asyncio.Task[Any]] = set()
DRAIN = "the gateway is draining"
SHUTTING_DOWN = "The gateway is shutting down; the response was cut short. Please retry."
GATEWAY_FAILED = "The gateway failed while processing the response."


def end_all() -> int:
    """End every running response (drain timeout reached); returns how many."""
    tasks = list(RUNNING)
    for task in tasks:
        task.cancel(DRAIN)
    if tasks:
        log.warning("drain timeout: ending %d running responses", len(tasks))
    return len(tasks)


# -- how a response ends -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    """The upstream ended cleanly; `incomplete`: why the gateway itself stopped short (a tool-round cap)."""

    incomplete: str | None = None


@dataclass(frozen=True)
class Failed:
    code: str | None
    message: str
    type: str = "server_error"
    param: str | None = None


@dataclass(frozen=True)
class Cancelled:
    """A background response cancelled by its owner."""


Ending = Finished | Failed | Cancelled


def ending(exc: BaseException) -> Failed | None:
    """How a cancellation ends its response: a task cancelled with DRAIN, or with an `APIError` as its message
    (a client that stopped reading, an upstream deadline that ran out while nobody read: edge.py,
    api/streaming.py), ends it as failed. None: a plain cancellation (the client left: nobody to tell)."""
    cause = exc.args[0] if exc.args else None
    if cause == DRAIN:
        return Failed("server_shutting_down", SHUTTING_DOWN)
    if isinstance(cause, APIError):
        return Failed(cause.code, cause.message, cause.type, cause.param)
    return None


class NotEnded(Exception):
    """Raised by an `on_final` that finds the response is not this process's to end (another replica reaped
    it first, or it could not be claimed now): nothing is sent and nothing counted."""


async def end(composer: Composer, how: Ending, on_final: OnFinal | None = None,
              seen: Observation | None = None) -> Events:
    """End the response, whatever the cause: its terminal events (to send or append), after `on_final` has
    stored it, with the metrics recorded once. An already ended response gives no events."""
    if composer.closed:
        return []
    if isinstance(how, Finished):
        events = composer.finish(how.incomplete)
    elif isinstance(how, Failed):
        events = composer.fail(how.code, how.message, type=how.type, param=how.param)
    else:
        events = composer.cancel()
    if on_final is not None:
        try:
            events = await store_final(composer, events, on_final)
        except NotEnded:
            return []
    metrics.finished(composer.final["status"]).inc()
    if seen is not None:
        seen.finished(composer.final)
    return events


async def store_final(composer: Composer, events: Events, on_final: OnFinal) -> Events:
    """Store the finished response before its terminal event goes out; tried twice. A response that cannot be
    stored fails (`storage_error`) rather than reach the client as `completed` and then be missing."""
    final = composer.final
    for attempt in (1, 2):
        try:
            await on_final(final)
            return events
        except NotEnded:
            raise
        except Exception:
            metrics.store_failures.inc()
            log.exception("response %s could not be stored (attempt %d of 2)", final["id"], attempt)
    if final["status"] == "failed":
        return events  # already failed: its terminal event says so, stored or not
    return composer.unstored(events, "The response was generated but could not be stored, so it cannot be "
                                     "retrieved or continued; please retry.")


# -- responses of several upstream steps ----------------------------------------------------------------------


@dataclass(frozen=True)
class Stop:
    """No further upstream step; `incomplete`: why the response stops short, if it does."""

    incomplete: str | None = None


class Steps(Protocol):
    """A response of several upstream steps (gateway-run tools, compaction), as the pipeline drives it."""

    def prelude(self, composer: Composer) -> AsyncIterator[Events]:
        """Before the first step (listing MCP tools, running calls the client approved)."""
        ...

    def next_call(self, composer: Composer) -> Call | Stop:
        """The next step's call, with everything so far (this response's own items included), or Stop."""
        ...

    def after_step(self, composer: Composer) -> AsyncIterator[Events]:
        """After a step's stream ended: run what it asked for (the gateway-run calls the model made)."""
        ...

    async def aclose(self) -> None: ...


# -- the run ----------------------------------------------------------------------------------------------------


async def run(composer: Composer, stream: EventStream | None, on_final: OnFinal | None = None,
              loop: Steps | None = None, seen: Observation | None = None, upstream: Upstream | None = None
              ) -> AsyncGenerator[Events, None]:
    """`stream`: the first upstream step, already opened (so HTTP errors could still be HTTP errors); None
    when a `loop` must run first (listing MCP tools) and gives the first call itself, opened on `upstream`.
    `seen`: the response's timings, marked here once each (metrics)."""
    task = asyncio.current_task()
    if task is not None:
        RUNNING.add(task)
    seen = seen or Observation("", "")
    RESPONSE_ID.set(composer.response["id"])
    metrics.in_flight.inc()
    try:
        yield composer.start()
        how: Ending
        try:
            if loop is not None:
                async for events in loop.prelude(composer):
                    yield events
            while True:
                if stream is None:
                    if loop is None or upstream is None:
                        raise ValueError("run() needs an opened stream, or a tool loop and its upstream")
                    call = loop.next_call(composer)
                    if isinstance(call, Stop):
                        how = Finished(call.incomplete)
                        break
                    composer.next_step()
                    seen.opening()
                    stream = await upstream.open(call)
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
                    how = Finished()
                    break
                async for events in loop.after_step(composer):
                    yield events
        except asyncio.CancelledError as exc:
            cause = ending(exc)
            if cause is None or task is None:
                raise  # the client left: nobody to tell
            task.uncancel()
            if exc.args != (DRAIN,):
                log.warning("response %s ended: %s", composer.response["id"], cause.message)
            how = cause
        except UpstreamError as exc:
            log.warning("response %s failed: %s", composer.response["id"], exc.message)
            how = Failed(exc.code, exc.message, exc.type, exc.param)
        except Exception:
            log.exception("response %s failed inside the gateway", composer.response["id"])
            how = Failed("server_error", GATEWAY_FAILED)
        yield await end(composer, how, on_final, seen)
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
