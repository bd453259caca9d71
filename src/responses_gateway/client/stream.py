"""`read_stream`: a Responses SSE stream, from any source of chunks, read with an `Accumulator`."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any

from .accumulator import Accumulator
from .events import Event


def read_stream(source: bytes | str | Iterable[bytes | str] | AsyncIterable[bytes | str], *,
                window: int = 256) -> ResponseStream:
    """Read a Responses SSE stream: iterate (`for` or `async for`) for events, then read `.response`.

    `source`: the whole body (bytes or str), or an iterable / async iterable of chunks (bytes or str) split
    anywhere, e.g. `httpx.Response.iter_bytes()` / `aiter_bytes()` or `aiohttp`'s `content.iter_any()`.
    """
    return ResponseStream(source, window=window)


class ResponseStream:
    """The reader `read_stream` returns. Iterate it once; `response` is the final Response afterwards."""

    def __init__(self, source: Any, *, window: int = 256):
        self.accumulator = Accumulator(window=window)
        self.exception: BaseException | None = None  # what the source raised, if it failed mid-stream
        self._source = source

    # -- results -----------------------------------------------------------------------------------------

    @property
    def response(self) -> dict[str, Any]:
        """The accumulated Response: final once iteration ended, the state so far before that."""
        return self.accumulator.response

    @property
    def status(self) -> str | None:
        return self.response.get("status")

    @property
    def output_text(self) -> str:
        """The text of every output_text part of every message, concatenated (like the SDKs' `output_text`)."""
        return "".join(part.get("text") or "" for item in self.response.get("output") or ()
                       if isinstance(item, dict) and item.get("type") == "message"
                       for part in item.get("content") or () if part.get("type") == "output_text")

    @property
    def unknown(self) -> list[Event]:
        """Events that were skipped because the reader does not know their type (or they were not JSON)."""
        return self.accumulator.unknown

    @property
    def ended_early(self) -> bool:
        return self.accumulator.ended_early

    def collect(self) -> dict[str, Any]:
        """Read everything (synchronously) and return the final Response."""
        for _ in self:
            pass
        return self.response

    async def acollect(self) -> dict[str, Any]:
        async for _ in self:
            pass
        return self.response

    # -- iteration ---------------------------------------------------------------------------------------

    def _chunks(self) -> Any:
        source = self._source
        if isinstance(source, (bytes, bytearray, memoryview, str)):
            return [source]
        return source

    def __iter__(self) -> Iterator[Event]:
        source = self._chunks()
        if not isinstance(source, Iterable):
            raise TypeError("this source is asynchronous: use `async for`")
        acc = self.accumulator
        try:
            for chunk in source:
                yield from acc.feed(chunk)
        except Exception as exc:  # a dropped connection: the response ends as failed, and says why
            self.exception = exc
            yield from acc.close(reason=f"the source failed ({exc.__class__.__name__}: {exc})")
            return
        yield from acc.close()

    async def __aiter__(self) -> AsyncIterator[Event]:
        source = self._chunks()
        acc = self.accumulator
        try:
            if isinstance(source, AsyncIterable):
                async for chunk in source:
                    for event in acc.feed(chunk):
                        yield event
            else:
                for chunk in source:
                    for event in acc.feed(chunk):
                        yield event
        except Exception as exc:
            self.exception = exc
            for event in acc.close(reason=f"the source failed ({exc.__class__.__name__}: {exc})"):
                yield event
            return
        for event in acc.close():
            yield event
