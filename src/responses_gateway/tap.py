"""A tap on the event path: what a watcher (the web console's live view, console/live.py) sees of the responses
running in this process, batch by batch, as their clients see them.

Nothing is watched unless a watcher is installed (`install`, by the app when `--console` is given): with none,
`pipeline.run` hands out its batches as they are, and the tap costs one global read per response, nothing per
event. A watcher sees each batch after it is made and before it is sent; it must not block and must not fail
the response (what it raises is logged and the watcher is dropped from that response).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any, Protocol

log = logging.getLogger("responses_gateway.tap")

Events = list[dict[str, Any]]


class Watcher(Protocol):
    def opened(self, response: dict[str, Any], owner: str) -> None:
        """A response started (its skeleton: id, model, created_at), for `owner` (an HMAC id, never a key)."""
        ...

    def batch(self, response_id: str, events: Events) -> None:
        """A batch of its events, in order."""
        ...

    def closed(self, response_id: str) -> None:
        """Its generator ended (the terminal event was the last batch, or the client left)."""
        ...


WATCHER: Watcher | None = None


def install(watcher: Watcher | None) -> None:
    """Watch every response started from now on (None: stop watching)."""
    global WATCHER
    WATCHER = watcher


def watched(response: dict[str, Any], owner: str, batches: AsyncGenerator[Events, None]) -> AsyncGenerator[Events, None]:
    """`batches` as they are when nothing watches, else passing through the watcher."""
    watcher = WATCHER
    if watcher is None:
        return batches
    return _through(watcher, response, owner, batches)


async def _through(watcher: Watcher, response: dict[str, Any], owner: str,
                   batches: AsyncGenerator[Events, None]) -> AsyncGenerator[Events, None]:
    rid = str(response.get("id"))
    alive = _call(watcher.opened, response, owner)
    try:
        async for events in batches:
            if alive:
                alive = _call(watcher.batch, rid, events)
            yield events
    finally:
        try:
            await batches.aclose()
        finally:
            _call(watcher.closed, rid)


def _call(fn: Any, *args: Any) -> bool:
    try:
        fn(*args)
        return True
    except Exception:
        log.exception("the event tap's watcher failed; it no longer sees this response")
        return False
