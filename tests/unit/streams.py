"""What the unit tests share: a request's Response skeleton, a sink that checks what a composer emitted, and an
in-memory upstream stream.

The sink encodes each batch the moment it is produced, as the SSE sink (api/streaming.py) does, so an event
that a later batch mutates shows up; the whole stream then goes through the same ordering checker and
schema the end-to-end tests use.
"""

from __future__ import annotations

import orjson

from responses_gateway.composer import Composer
from responses_gateway.protocol.request import parse_request
from responses_gateway.protocol.response import skeleton
from responses_gateway.protocol.tools import normalize_tools
from responses_gateway.sse import DONE, encode_all
from tests.support.schema import validate_event
from tests.support.stream_check import StreamResult, check_stream


def new_composer(**options) -> Composer:
    req = parse_request(orjson.dumps({"model": "test-model", "input": "hi"}))
    return Composer(skeleton(req, normalize_tools(req.tools, req.tool_choice)), **options)


class Sink:
    def __init__(self) -> None:
        self.raw = bytearray()
        self.batches: list[list[dict]] = []

    def add(self, events: list[dict]) -> list[dict]:
        self.batches.append(events)
        self.raw += encode_all(events)
        return events

    def check(self, *, schema: bool = False, allow_unknown: bool = False) -> StreamResult:
        """Every ordering rule (and with `schema`, every event's shape); the events as a client decoded them.

        Schema validation costs ~4 ms an event: the tests that build the richest streams ask for it, the
        others check order only, so the unit layer stays fast."""
        result = check_stream(bytes(self.raw) + DONE, allow_unknown=allow_unknown)
        if schema:
            for event in result.events:
                validate_event(event)
        return result


class FakeStream:
    """Batches from memory; raises `exc` instead of batch number `fail_at`; `aclose` may raise too."""

    def __init__(self, batches: list[list], *, fail_at: int | None = None, exc: BaseException | None = None,
                 close_exc: BaseException | None = None, log: list | None = None):
        self.batches = batches
        self.fail_at = fail_at
        self.exc = exc
        self.close_exc = close_exc
        self.closed = 0
        self.log = log if log is not None else []

    def __aiter__(self):
        return self._events()

    async def _events(self):
        for i, batch in enumerate(self.batches):
            if i == self.fail_at:
                raise self.exc
            yield batch
        if self.fail_at is not None and self.fail_at >= len(self.batches):
            raise self.exc

    async def aclose(self) -> None:
        self.closed += 1
        self.log.append("aclose")
        if self.close_exc is not None:
            raise self.close_exc
