"""Work that grows with the request runs in a worker thread when the request is large.

A 30 MB body of 15,000 items costs the gateway a few hundred milliseconds of Python: scanning and parsing
it, normalizing and numbering its items, converting them for the upstream, encoding the upstream body and
the rows to store. On the event loop that is a pause for every other request; in a worker thread the loop
gets the GIL back every few milliseconds (`sys.getswitchinterval()`), so `/health` and other streams keep
being answered. A small request does the same work inline: a thread hop costs more than the work.

Whether a request is large is decided once, from its size in bytes, and kept in a context variable: the
steps deep in the call chain (adapters, the store) run `offload.run(...)` without being told, and tasks the
request starts (a background job) inherit the choice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

# Above this many bytes a body (or WebSocket frame) is large.
LARGE_BYTES = 256 * 1024

T = TypeVar("T")

_large: ContextVar[bool] = ContextVar("large_request", default=False)


def mark(size: int) -> None:
    """Declare the size of the request the current task serves."""
    _large.set(size > LARGE_BYTES)


def is_large() -> bool:
    """Whether the current request is large (`mark`); worker threads `run` starts see the same."""
    return _large.get()


async def run(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`: in a worker thread when the current request is large, else right here."""
    if _large.get():
        return await asyncio.to_thread(fn, *args)  # copies the context: the thread sees the mark too
    return fn(*args)
