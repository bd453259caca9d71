"""One response from start to terminal event: upstream stream → composer → batches of Responses events.

Every way out — success, length cut, content filter, upstream error, dropped connection, a bug of ours —
ends in exactly one terminal event. Client disconnect arrives as cancellation and closes the upstream.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from .composer import Composer
from .generation import UpstreamError
from .upstreams.base import EventStream

log = logging.getLogger("responses_gateway.pipeline")


async def run(composer: Composer, stream: EventStream) -> AsyncIterator[list[dict]]:
    try:
        yield composer.start()
        try:
            async for batch in stream:
                events = composer.feed(batch)
                if events:
                    yield events
        except UpstreamError as exc:
            log.warning("response %s failed: %s", composer.response["id"], exc.message)
            yield composer.fail(exc.code, exc.message, type=exc.type, param=exc.param)
            return
        except Exception:
            log.exception("response %s failed inside the gateway", composer.response["id"])
            yield composer.fail("server_error", "The gateway failed while processing the response.")
            return
        yield composer.finish()
    finally:
        await stream.aclose()
