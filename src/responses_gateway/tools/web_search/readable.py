"""A fetched page made readable (extract.py) in a child process the kernel bounds (isolated.py): a page costs
at most `--web-extract-timeout` seconds of CPU, however it is built, and the work stops when its call does.

In a thread, a hostile page — 100,000 nested `<div>`, 1.1 MB, 25 s of the HTML parser's CPU — ran on after the
call gave up (a thread cannot be stopped), two such pages took both extraction threads and both cores for
minutes, and every page opened meanwhile failed. Here the child is killed at its deadline, or at once when the
call is cancelled (its deadline in the tool loop, the response cancelled, the client gone); at most
`extract.CONCURRENT` children run at a time (the service's `extracting` slots), so a burst of pages queues
instead of taking every core, and a slot is held no longer than the deadline.
"""

from __future__ import annotations

import asyncio

from ...isolated import Bounds, ChildFailed, run_async
from ...net.urls import safe_url
from .extract import Page
from .fetch import Fetched, FetchError

READER = "responses_gateway.tools.web_search.extract:read"
MEMORY = 1024 << 20  # bytes of address space a page's reader may use (an 8 MiB page needs under 300 MiB)
FLAG = "--web-extract-timeout"


async def readable(fetched: Fetched, seconds: float, slots: asyncio.Semaphore) -> Page:
    """The page's title and text; FetchError (the model reads why) when it cannot be read within its bounds."""
    bounds = Bounds(seconds, MEMORY, FLAG)
    async with slots:
        try:
            result = await run_async(READER, fetched.body, [fetched.content_type, fetched.charset or "", fetched.url],
                                     bounds)
        except ChildFailed as exc:
            raise FetchError(f"{safe_url(fetched.url)} could not be made readable: {exc.why}") \
                from None
    return Page(result["url"], result["title"], result["text"])
