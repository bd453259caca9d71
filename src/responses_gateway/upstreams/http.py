"""What every HTTP upstream shares: the pooled connections per upstream, the request that opens a stream
(failures before it become HTTP errors), and the stream object that releases the connection.

The streaming POST that opens a generation goes through the lean client of `net.http1` (the hot path: its
head and every read of its body); everything else (model lists, token counts) through one aiohttp session."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp
import orjson

from .. import causes, offload
from ..errors import UpstreamError
from ..net import http1
from ..net.urls import safe_url
from ..sse import SSEDecoder
from .base import Batch, Call, FrameParser, Route

log = logging.getLogger("responses_gateway.upstream")

NETWORK_ERRORS = (TimeoutError, aiohttp.ClientError, OSError, http1.ClientError)


HTTPError = Callable[[int, bytes, "str | None"], UpstreamError]


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """The headers of OpenAI-style servers (Chat Completions, Responses)."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def unreachable(exc: BaseException, url: str) -> UpstreamError:
    """The log names the URL and the cause (refused, host not found, TLS, timed out); the client gets only the
    kind of failure, never the gateway's internal addresses."""
    log.warning("upstream %s unreachable: %s", safe_url(url), causes.cause(exc))
    return UpstreamError(f"Could not reach the upstream model server ({causes.kind(exc)}).",
                           status=502, code="upstream_unreachable")


TIMEOUTS = {  # which deadline ran out → (code, message with the seconds)
    "connect": ("upstream_connect_timeout", "Could not connect to the upstream model server within {:g} s "
                                            "(connect timeout)."),
    "first_byte": ("upstream_first_byte_timeout", "The upstream model server did not answer within {:g} s "
                                                  "(first-byte timeout)."),
    "idle": ("upstream_idle_timeout", "The upstream model server sent nothing for {:g} s mid-stream "
                                      "(idle timeout)."),
    "total": ("upstream_total_timeout", "The upstream model server's stream did not finish within {:g} s "
                                        "(total timeout)."),
}


def timed_out(which: str, seconds: float | None, url: Any = None) -> UpstreamError:
    code, message = TIMEOUTS[which]
    log.warning("upstream %s%s timeout after %s s", f"{safe_url(str(url))} " if url else "", which, seconds)
    return UpstreamError(message.format(seconds or 0), status=504, code=code)


def _shortest(*limits: float | None) -> float | None:
    given = [x for x in limits if x is not None]
    return min(given) if given else None


class HTTPUpstream:
    headers: dict[str, str]

    def __init__(self, route: Route):
        self.route = route
        self.base = route.base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None
        self._streams: http1.Client | None = None

    @property
    def streams(self) -> http1.Client:
        """The client of the streaming POSTs: keep-alive connections pooled per origin."""
        if self._streams is None:
            self._streams = http1.Client(connect_timeout=self.route.connect_timeout)
        return self._streams

    @property
    def session(self) -> aiohttp.ClientSession:
        """Created on first use, inside the server's event loop; keeps upstream connections alive."""
        if self._session is None:
            # connect here; first byte in post(), idle and total in BodyStream.chunks()
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.route.connect_timeout, sock_read=None)
            self._session = aiohttp.ClientSession(
                timeout=timeout,
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60, ttl_dns_cache=300),
                json_serialize=lambda o: orjson.dumps(o).decode(),
                auto_decompress=True,
            )
        return self._session

    async def close(self) -> None:
        if self._streams is not None:
            self._streams.close()
            self._streams = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def hint(self, status: int) -> str:
        """What to change, for an error status that usually means the upstream is misconfigured."""
        return ""

    def refused(self, method: str, url: str, status: int, error: UpstreamError) -> UpstreamError:
        """Log an error answer with what was called and what the upstream said (and a hint); return it."""
        log.warning("upstream %s %s answered HTTP %s: %s%s", method, safe_url(url), status,
                    (error.detail or error.message)[:200], self.hint(status))
        return error

    async def get_json(self, url: str, http_error: HTTPError, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET a JSON object (a model list); any failure is an UpstreamError."""
        try:
            async with self.session.get(url, params=params, headers=self.headers) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise self.refused("GET", url, resp.status, http_error(resp.status, raw, None))
        except NETWORK_ERRORS as exc:
            raise unreachable(exc, url) from None
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            raise UpstreamError("The upstream model server answered with something that is not a JSON object.")
        return obj

    async def post_json(self, url: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST for a small JSON answer (token counts): None on any failure, for callers that can estimate."""
        try:
            async with self.session.post(url, data=orjson.dumps(body), headers=self.headers) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    return None
            obj = orjson.loads(raw)
        except (*NETWORK_ERRORS, orjson.JSONDecodeError):
            return None
        return obj if isinstance(obj, dict) else None

    async def openai_models(self, http_error: HTTPError) -> list[dict[str, Any]]:
        """`GET {base}/models` of an OpenAI-style server, passed through."""
        data = (await self.get_json(f"{self.base}/models", http_error)).get("data") or []
        return [m for m in data if isinstance(m, dict) and "id" in m]

    async def post(self, url: str, body: dict[str, Any], model: str, http_error: HTTPError,
                   headers: dict[str, str] | None = None) -> http1.Response:
        """POST and wait for the upstream's answer headers; anything but 200 is raised as its HTTP error.
        `headers`: this request's own (else the upstream's)."""
        route = self.route
        first_byte = _shortest(route.first_byte_timeout, route.total_timeout)
        try:
            async with asyncio.timeout(first_byte):
                resp = await self.streams.post(url, headers or self.headers, await _encoded(body))
        except http1.ConnectTimeout:
            raise timed_out("connect", route.connect_timeout, url) from None
        except TimeoutError:
            raise timed_out("first_byte", first_byte, url) from None
        except NETWORK_ERRORS as exc:
            raise unreachable(exc, url) from None
        if resp.status != 200:
            try:
                async with asyncio.timeout(first_byte):
                    raw = await resp.read()
            except NETWORK_ERRORS:
                raw = b""
            finally:
                resp.release()
            raise self.refused("POST", url, resp.status, http_error(resp.status, raw, model))
        return resp


async def _encoded(body: dict[str, Any]) -> bytes | io.BytesIO:
    """The JSON body to send. A large one is encoded an element of its longest list at a time, in a worker
    thread, into a file-like payload that the client writes a piece per loop turn: one `orjson.dumps` or one
    write of tens of MB would each hold the GIL, and so the event loop, for tens of milliseconds."""
    if offload.is_large():
        return await offload.run(_encode_large, body)
    return orjson.dumps(body)


def _encode_large(body: dict[str, Any]) -> io.BytesIO:
    lists = [key for key, value in body.items() if isinstance(value, list)]
    longest = max(lists, key=lambda key: len(body[key]), default=None)
    out = io.BytesIO()
    if longest is None:
        out.write(orjson.dumps(body))
    else:  # the longest list last: its elements follow the rest, which ends with `"key":[]}`
        rest = orjson.dumps({**{k: v for k, v in body.items() if k != longest}, longest: []})
        out.write(rest[:-3])
        out.write(b"[")
        for i, element in enumerate(body[longest]):
            if i:
                out.write(b",")
            out.write(orjson.dumps(element))
        out.write(b"]}")
    out.seek(0)
    return out


UNREAD_GRACE = 1.0  # seconds past the total deadline a body may go unread before its reader is ended


class _Expired(Exception):
    """Raised into a waiting read of the body when a deadline runs out: `which` one."""

    def __init__(self, which: str):
        super().__init__(which)
        self.which = which


class BodyStream:
    """An upstream response body as batches of generation events, one batch per network read.

    Subclasses write `_events()` and set `_complete` once the body was read to its end: the connection
    then goes back to the pool; otherwise it is closed, so the upstream sees the client went away."""

    def __init__(self, resp: http1.Response, call: Call, route: Route | None = None):
        self.resp = resp
        self.call = call
        self._gen = self._events()
        self._complete = False
        self.idle = route.read_timeout if route is not None else None
        total = route.total_timeout if route is not None else None
        self.total = total
        self.deadline = asyncio.get_running_loop().time() + total if total else None
        self._since: float | None = None  # when the read waiting now began (loop time); None between reads
        self._watch: asyncio.TimerHandle | None = None
        self._armed = 0.0  # the loop time the watch is set for
        self._reader: asyncio.Task[Any] | None = None  # the task reading the body (pipeline.ending)

    def _limit(self) -> tuple[float | None, str]:
        """The time the next read may take, and which deadline that is."""
        if self.deadline is None:
            return self.idle, "idle"
        left = self.deadline - asyncio.get_running_loop().time()
        return (self.idle, "idle") if self.idle is not None and self.idle < left else (left, "total")

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives, within the route's idle deadline (the longest silence between two reads)
        and total deadline (the whole stream). The bytes that came before a connection was lost are read
        before the loss is raised."""
        resp = self.resp
        loop = asyncio.get_running_loop()
        self._reader = asyncio.current_task()
        self._watch_from(loop.time())
        try:
            while True:
                try:
                    data = resp.take()
                    while data is None:
                        self._since = loop.time()
                        await resp.wait()
                        self._since = None
                        data = resp.take()
                except _Expired as exc:
                    raise self._expired(exc) from None
                if not data:
                    return
                yield data
        finally:
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None

    def _expired(self, exc: _Expired) -> UpstreamError:
        return timed_out(exc.which, self.idle if exc.which == "idle" else self.total, self.resp.url)

    # The deadlines are kept by one timer per stream, not one per read (a per-read `asyncio.timeout` was a
    # quarter of a paced token's instructions: on uvloop each timer is a libuv handle). It is set for the
    # earliest time a deadline could run out and, when it fires, either ends the read waiting then (the
    # body's reader raises `_Expired`) or sets itself for the next such time. The idle deadline counts only
    # while a read waits, as before; the total deadline ends the stream whether a read waits or not.

    def _watch_from(self, now: float) -> None:
        idle, deadline = self.idle, self.deadline
        due = now + idle if idle is not None else deadline
        if deadline is not None and due is not None and deadline < due:
            due = deadline
        if due is None:
            return
        self._armed = due
        self._watch = asyncio.get_running_loop().call_at(due, self._check)

    def _check(self) -> None:
        self._watch = None
        armed, since, idle, deadline = self._armed, self._since, self.idle, self.deadline
        idle_due = since + idle if since is not None and idle is not None else None
        if idle_due is not None and idle_due <= armed and (deadline is None or idle_due < deadline):
            self.resp.fail(_Expired("idle"))
        elif deadline is not None and deadline <= armed:
            self.resp.fail(_Expired("total"))  # reading or not: the stream is over
            if since is None:  # nobody reads now; if nobody does soon, the reader waits on a slow client
                self._watch = asyncio.get_running_loop().call_later(UNREAD_GRACE, self._unread)
        else:
            self._watch_from(since if since is not None else asyncio.get_running_loop().time())

    def _unread(self) -> None:
        """The total deadline passed a while ago and the body was not read since (a read would have ended the
        stream and this watch): its reader waits elsewhere — on a client that reads slowly or not at all —
        and is ended now, with the deadline's error (pipeline.ending)."""
        self._watch = None
        if self._since is None and self._reader is not None:
            self._reader.cancel(timed_out("total", self.total))

    def __aiter__(self) -> AsyncGenerator[Batch, None]:
        return self._gen

    async def aclose(self) -> None:
        await self._gen.aclose()
        if self._complete:
            self.resp.release()
        else:
            self.resp.close()

    def _events(self) -> AsyncGenerator[Batch, None]:
        """The stream's batches: an async generator (the pipeline iterates it directly)."""
        raise NotImplementedError

    async def read_whole(self) -> bytes:
        """The body of a server that ignored `stream: true` and answered with one JSON object."""
        limit, which = self._limit()
        try:
            async with asyncio.timeout(limit):
                raw = await self.resp.read()
        except TimeoutError:
            raise timed_out(which, self.idle if which == "idle" else self.total, self.resp.url) from None
        except NETWORK_ERRORS:
            raise UpstreamError("The connection to the upstream model server was lost.") from None
        self._complete = True
        return raw

    async def read_sse(self, parser: FrameParser, end: Callable[[], Batch] | None = None
                       ) -> AsyncGenerator[Batch, None]:
        """Batches from an SSE body: `parser.frames(frames) -> batch`. A parser error is raised once the
        events before it were delivered; the body read to its end marks the stream complete, and then
        `end()` gives a last batch or raises what the stream lacked (a stream cut before its finish).

        The body is read here, not through `chunks()`, and an adapter's `_events` returns this generator
        itself rather than wrapping it: a token's bytes go from the connection's buffer through the decoder
        and the parser to the pipeline in one resumption of one generator (the deadlines and the late
        reader's bytes behave as in `chunks()`)."""
        decoder = SSEDecoder()
        feed, frames = decoder.feed, parser.frames
        resp = self.resp
        loop = asyncio.get_running_loop()
        self._reader = asyncio.current_task()
        self._watch_from(loop.time())
        try:
            while True:
                try:
                    data = resp.take()
                    while data is None:
                        self._since = loop.time()
                        await resp.wait()
                        self._since = None
                        data = resp.take()
                except _Expired as exc:
                    raise self._expired(exc) from None
                if not data:
                    break
                batch = frames(feed(data))
                if batch:
                    yield batch
                if parser.error:
                    raise parser.error
            batch = frames(decoder.flush())
            if batch:
                yield batch
            if parser.error:
                raise parser.error
            self._complete = True
        except NETWORK_ERRORS:
            raise UpstreamError("The connection to the upstream model server was lost mid-stream.") from None
        finally:
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None
        if end is not None:
            batch = end()
            if batch:
                yield batch
