"""Connection-level limits uvicorn does not have: slow, idle, oversized and non-reading clients, open connections.

uvicorn closes an idle keep-alive connection (`timeout_keep_alive`) but has no header or body read timeout,
no bound on the bytes of a request's head, and waits for ever for a client that stops reading: a client
that connects and never sends, sends its headers a byte at a time, sends megabytes of header lines, announces
a body and never finishes it, or reads nothing of its response holds a socket (and memory) for ever, and
enough of them starve the process. These protocols (uvicorn's httptools one and its WebSocket one, given to
uvicorn as `http=EdgeProtocol`, `ws=EdgeWebSocketProtocol`) add, per connection:

- a header deadline, from the connection's first byte of a request (or from the connection itself, for a
  client that sends nothing) until the request line and headers are complete;
- a bound on the head's bytes: the request line (`MAX_REQUEST_LINE`, else 414), the request line and
  headers together (`max_header_bytes`, else 431) and the number of headers (`max_headers`, else 431).
  The HTTP parser keeps a header until it is complete (httptools holds a partial one in its own buffer),
  so the bytes are counted as they arrive, not as headers complete: a head is refused at most one read
  (256 KiB) past its bound, whatever its shape;
- a body deadline, from the end of the headers until the whole body has arrived;
- a send deadline (`send_timeout`, nginx's `send_timeout`): once the server's write buffer is full the
  client has this long to read anything of it. Past it the app is told (`Edge.on_stall`: a stream ends its
  response as failed, stored) and the connection is aborted, not closed: a graceful close would wait for a
  buffer that never drains;
- a bound on pipelined requests: past `PIPELINE_DEPTH` requests queued behind the running one the
  connection is not read (and a big read is parsed `PIPELINE_SLICE` bytes at a time, the rest held), until
  the queue has drained; uvicorn resumed reading after every response, so one connection pipelining 16 MiB
  of `GET /health` queued a million requests (1.3 GiB);
- a cap on open connections per process: when it is reached, or when the process runs short of file
  descriptors, the connections idle longest (kept alive after a response, or open with nothing sent yet) are
  closed first; only when none is idle is the new one closed at once;
- for a WebSocket, a message still arriving holds its bytes in the process's budget (bodies.py), and one of
  which nothing came for `body_idle` seconds closes the connection (1008).

Each close is counted in `responses_gateway_connections_closed_total{reason}` (idle keep-alive closes too)
and logged at WARNING, at most once a second per reason (a flood of refused connections is one line a
second with a count, not one line each). The header and body deadlines do not apply while the gateway is
answering (a long stream is not a slow client); the send deadline is what applies then.

Over WebSocket the keepalive timeout aborts the connection (uvicorn's closes it gracefully, which waits on
a buffer that never drains), and a SIGTERM hands each connection to the app (`Edge.on_shutdown`), which
finishes or ends its running turn before it closes (api/websocket.py), instead of closing it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import resource
import socket
import struct
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from . import metrics
from .bodies import BUDGET
from .errors import APIError

log = logging.getLogger("responses_gateway.edge")

MAX_REQUEST_LINE = 8192  # bytes of the request target (nginx's buffer for it); ours are all far shorter
LINGER = 2.0  # seconds a refused client's further bytes are read and dropped, so it can read the refusal
EDGE = "responses_gateway.edge"  # the scope key of the request's `Edge`
WARN_EVERY = 1.0  # seconds: at most one WARNING line per close reason in this long
PHRASES = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}  # RFC 9110, RFC 6585
PIPELINE_DEPTH = 16  # requests queued behind the running one before the connection is not read
PIPELINE_SLICE = 4096  # bytes of a bigger read parsed at a time, the queue checked between two
FD_HEADROOM = 32  # descriptors kept free for the process's own (upstreams, database, files) below ulimit -n


@dataclass(frozen=True)
class EdgeLimits:
    header_timeout: float = 30.0
    body_timeout: float = 60.0
    max_connections: int = 0  # 0: three quarters of the open-file limit
    max_header_bytes: int = 65536  # the request line and headers (Envoy: 60 KiB; nginx: 4 x 8 KiB)
    max_headers: int = 100  # Envoy's default
    send_timeout: float = 60.0  # 0: none
    body_idle: float = 15.0  # seconds without a byte of a WebSocket message still arriving (0: none)

    def connection_cap(self) -> int:
        if self.max_connections > 0:
            return self.max_connections
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return max(16, soft * 3 // 4) if soft != resource.RLIM_INFINITY else 50_000


class Edge:
    """What the edge offers the app for one request or WebSocket (in its scope, under `EDGE`).

    `abort()` drops the connection without waiting for its write buffer. The app may set `on_stall`,
    called with the error to end its response with when the client stopped reading (the connection is
    aborted right after), and, for a WebSocket, `on_shutdown`, called at SIGTERM instead of closing."""

    __slots__ = ("abort", "on_stall", "on_shutdown")

    def __init__(self, abort: Callable[[], None]):
        self.abort = abort
        self.on_stall: Callable[[APIError], None] | None = None
        self.on_shutdown: Callable[[], None] | None = None


class HttpEdge(Edge):
    """An HTTP request's `Edge`, which also writes a streamed body straight to the connection.

    uvicorn's `send` is a coroutine with a dozen checks per call, behind an ASGI message made per call: per
    token of a stream that is most of the server's Python. Once the response's head went out through the
    server's `send` (so every layer saw the status), `writable()` says whether `write` and `finish` may
    carry its body: each is one transport write, framed as uvicorn frames it (chunked), the bytes counted in
    `sent` (the access log adds them to what passed its own `send`). While the transport's buffer is full
    (`paused`), the writer awaits `drain()` first, as uvicorn's `send` does; the send deadline watches the
    same pause. `on_lost`, when set, is called once if the connection is lost before the response is
    complete: a stream is told so without a task waiting on `receive()`."""

    __slots__ = ("sent", "on_lost", "_protocol", "_cycle")

    def __init__(self, protocol: EdgeProtocol):
        super().__init__(protocol._abort)
        self.sent = 0  # body bytes written by `write` and `finish`
        self.on_lost: Callable[[], None] | None = None
        self._protocol = protocol
        self._cycle: RequestResponseCycle | None = None  # set when the request's app starts

    def writable(self) -> bool:
        """The head went out through the server's `send`, chunked, and the body is neither complete nor cut."""
        cycle = self._cycle
        return (cycle is not None and cycle.response_started and bool(cycle.chunked_encoding)
                and not cycle.response_complete and not cycle.disconnected and cycle.scope["method"] != "HEAD")

    @property
    def lost(self) -> bool:
        """The connection was lost before the response was complete."""
        return self._cycle is not None and self._cycle.disconnected

    @property
    def paused(self) -> bool:
        """The transport's buffer is full: `drain()` before writing more."""
        return self._protocol.flow.write_paused

    async def drain(self) -> None:
        """Until the transport takes writes again (or the connection is lost)."""
        await self._protocol.flow.drain()

    def write(self, body: bytes) -> None:
        """One chunk of the body (not empty), as uvicorn's `send` writes it; nothing once the connection is lost."""
        if self._cycle is None or self._cycle.disconnected:
            return
        self.sent += len(body)
        self._protocol.transport.write(b"%x\r\n%b\r\n" % (len(body), body))

    def finish(self, body: bytes) -> None:
        """The body's last chunk and its end: the response is complete, and the connection goes back to
        reading the next request (or is closed, when it is not kept alive), as after uvicorn's last `send`."""
        cycle = self._cycle
        if cycle is None or cycle.disconnected or cycle.response_complete:
            return
        self.sent += len(body)
        transport = self._protocol.transport
        transport.write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
        cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            transport.close()
        cycle.on_response()

    def connection_lost(self) -> None:
        cycle = self._cycle
        if cycle is None or cycle.response_complete:
            return
        cycle.disconnected = True
        cycle.message_event.set()
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback()


def edge_of(scope: Any) -> Edge | None:
    """The request's `Edge`; None under a server without these protocols (the tests' in-process servers)."""
    edge: Edge | None = scope.get(EDGE)
    return edge


class _Throttle:
    """One WARNING line per reason per `WARN_EVERY` seconds; the lines in between are counted, and the count
    is logged when the second is over."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}

    def warn(self, reason: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self.last.get(reason, -WARN_EVERY) >= WARN_EVERY:
            self.last[reason] = now
            log.warning(message, *args)
            return
        self.held[reason] = self.held.get(reason, 0) + 1
        if self.held[reason] == 1:
            asyncio.get_running_loop().call_later(WARN_EVERY, self._flush, reason)

    def _flush(self, reason: str) -> None:
        count = self.held.pop(reason, 0)
        if count:
            self.last[reason] = time.monotonic()
            log.warning("closed %d more connections: %s (in the last %gs)", count, reason.replace("_", " "),
                        WARN_EVERY)


THROTTLE = _Throttle()


def send_timeout_error(seconds: float) -> APIError:
    return APIError(408, f"The client read nothing of the response for {seconds:g} s (send timeout); the "
                    "response was ended and the connection closed.", type="server_error", code="send_timeout")


class _Transported(Protocol):
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    client: tuple[str, int] | None


def unsent(transport: asyncio.Transport) -> int:
    """Bytes written and not yet taken by the client: the transport's buffer plus the kernel's send queue
    (sent, not yet acknowledged). The transport's buffer alone does not show a slow reader's progress: the
    kernel refills its own queue from it only once a third or so of it is free, megabytes on loopback."""
    size = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            size += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    return size


class _StallWatch:
    """The send deadline, shared by the HTTP and WebSocket protocols: armed when the transport asks us to
    stop writing (its buffer is full), disarmed when it resumes. When it fires, the client has read nothing
    for `seconds` if the buffer did not shrink meanwhile (a slow reader that makes progress is given
    another period, as nginx's `send_timeout` counts between two successful writes)."""

    def __init__(self, owner: _Transported, seconds: float, on_stall: Callable[[], None]):
        self.owner = owner
        self.seconds = seconds
        self.on_stall = on_stall
        self.timer: asyncio.TimerHandle | None = None
        self.size = 0

    def arm(self) -> None:
        if self.seconds > 0 and self.timer is None:
            self.size = unsent(self.owner.transport)
            self.timer = self.owner.loop.call_later(self.seconds, self._check)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _check(self) -> None:
        self.timer = None
        if unsent(self.owner.transport) < self.size:  # it read something: another period
            self.arm()
            return
        self.on_stall()


def reset(transport: asyncio.Transport) -> None:
    """Drop the connection with a reset: closed plainly, the kernel would go on trying to deliver what the
    client does not read (minutes, megabytes), and the client would not know (nginx's
    `reset_timedout_connection`)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def descriptors_short() -> bool:
    """Fewer than `FD_HEADROOM` file descriptors left under the soft limit. Counting them lists
    /proc/self/fd, so it is done only once the connections alone use half the limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return False
    try:
        return len(os.listdir("/proc/self/fd")) > soft - FD_HEADROOM
    except OSError:
        return False


def evict_idle(connections: set[Any], newcomer: object) -> bool:
    """Close the connection idle longest (none of the newcomer's), to make room: a connection kept alive
    after its response or open with nothing sent is cheaper to lose than a new request. False: none idle."""
    oldest: EdgeProtocol | None = None
    since = float("inf")
    for connection in connections:
        if connection is newcomer or not isinstance(connection, EdgeProtocol):
            continue
        idle = connection.idle_since()
        if idle is not None and idle < since and not connection.transport.is_closing():
            oldest, since = connection, idle
    if oldest is None:
        return False
    metrics.connections_closed.labels("idle_evicted").inc()
    THROTTLE.warn("idle_evicted", "closing the connection from %s: idle, to make room for a new one",
                  _client(oldest))
    oldest.transport.close()
    return True


def _client(owner: _Transported) -> str:
    return f"{owner.client[0]}:{owner.client[1]}" if owner.client else "a client"


def _closing(owner: _Transported, reason: str, detail: str) -> None:
    """Count and log a close the edge makes."""
    metrics.connections_closed.labels(reason).inc()
    THROTTLE.warn(reason, "closing the connection from %s: %s (%s)", _client(owner), reason.replace("_", " "),
                  detail)


class _WatchesSends(asyncio.Protocol):
    """The send deadline's hooks into the transport's flow control, for both protocols (first in their bases)."""

    _stall: _StallWatch

    def pause_writing(self) -> None:
        super().pause_writing()
        self._stall.arm()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stall.disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stall.disarm()
        super().connection_lost(exc)


class _Refused(Exception):
    """Raised in a parser callback to stop parsing a head the edge refuses (the parser wraps it)."""


class EdgeProtocol(_WatchesSends, HttpToolsProtocol):
    limits = EdgeLimits()
    cap = limits.connection_cap()

    @classmethod
    def configure(cls, limits: EdgeLimits) -> None:
        """Set this process's limits (before serving; each worker process calls it for itself)."""
        cls.limits, cls.cap = limits, limits.connection_cap()
        EdgeWebSocketProtocol.limits = limits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._head: int | None = 0  # bytes of the request head received so far; None once it is complete
        self._due: tuple[float, str] | None = None  # the deadline the request now in progress needs (see data_received)
        self._head_size = 0  # the head's request line and headers, as the parser delivered them
        self._header_count = 0
        self._refusal: tuple[int, str, str] | None = None  # (status, reason, message) of a refused head
        self._stall = _StallWatch(self, self.limits.send_timeout, self._stalled)
        self._running: HttpEdge | None = None  # the edge of the request whose app runs now
        self._idle_since: float | None = None  # when the connection's last response was complete, if idle since
        self._opened = 0.0  # when the connection was made (the idle order of one that never sent a request)
        self._holding = False  # the pipeline is full: the connection is not read, what was read is held
        self._held = b""  # bytes read and not yet parsed while holding

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened = self.loop.time()
        crowded = len(self.connections) > self.cap
        if crowded or (len(self.connections) > self.cap // 2 and descriptors_short()):
            room = evict_idle(self.connections, self)
            if crowded and not room:
                self._close("over_capacity", f"{len(self.connections) - 1} connections already open, none idle")
                return
        self._arm(self.limits.header_timeout, "header_timeout")

    def idle_since(self) -> float | None:
        """When this connection became idle — its last response complete, or opened with nothing sent since —
        or None while a request is in progress (`evict_idle` closes the idle ones, longest idle first)."""
        if self._idle_since is not None:
            return self._idle_since
        if self.cycle is None and self._head == 0 and not self._holding:
            return self._opened
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._held = b""
        super().connection_lost(exc)
        running, self._running = self._running, None
        if running is not None:
            running.connection_lost()  # uvicorn marks only the newest cycle, not a pipelined one's running
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None

    def data_received(self, data: bytes) -> None:
        """uvicorn's, with the head's bytes counted as they arrive, a refused head answered and the pipeline
        bounded. The header and body deadlines are armed here, once a read leaves a head or a body incomplete
        (the parser's callbacks say which is due): a request that arrives whole in one read, as nearly all do,
        needs no timer. A read of more than `PIPELINE_SLICE` bytes is parsed a slice at a time (a body, and
        what follows it in the read, in one piece), so that pipelined requests stop queueing at
        `PIPELINE_DEPTH`: the rest is held, unparsed, and the connection not read until the queue has drained."""
        if self._refusal is not None:
            return  # lingering after a refusal: what the client still sends is dropped
        if self._holding:  # uvicorn resumed reading (an app awaited `receive()`): keep it, unparsed
            self._held += data
            self.flow.pause_reading()
            return
        self._unset_keepalive_if_required()
        if len(data) <= PIPELINE_SLICE:
            if self._feed(data) and len(self.pipeline) >= PIPELINE_DEPTH:
                self._hold(b"")
            return
        view = memoryview(data)
        at = 0
        while at < len(data):
            if len(self.pipeline) >= PIPELINE_DEPTH:
                self._hold(bytes(view[at:]))
                return
            # a body, and what follows it in this read, in one piece: a body is never cut in slices
            size = len(data) - at if self._head is None else PIPELINE_SLICE
            if not self._feed(view[at:at + size]):
                return
            at += size

    def _feed(self, data: bytes | memoryview) -> bool:
        """Parse `data`; False when the connection is refused or upgraded (nothing more is parsed)."""
        if self._head is not None:
            self._head += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse()
                return False
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        if self._head is not None and self._head > self.limits.max_header_bytes:
            self._too_large()  # the head is not complete and already over its bound
            self._refuse()
            return False
        if self._due is not None and self._deadline is None and self._refusal is None:
            self._arm(*self._due)  # a head or body still to come after this read: its deadline runs from now
        return not self.transport.is_closing()

    def _hold(self, rest: bytes) -> None:
        """The pipeline is full: keep `rest` unparsed and stop reading until it drains (on_response_complete)."""
        self._holding = True
        self._held = rest
        self.flow.pause_reading()

    def _release(self) -> None:
        """The pipeline has drained: parse what was held, and read again unless it filled the pipeline anew."""
        if self.transport.is_closing() or not self._holding:
            return
        self._holding = False
        held, self._held = self._held, b""
        if held:
            self.data_received(held)
        if not self._holding:
            self.flow.resume_reading()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[EDGE] = HttpEdge(self)  # type: ignore[literal-required]  # our own scope key
        if self._head is None:
            self._head = 0
        self._head_size = self._header_count = 0
        self._due = (self.limits.header_timeout, "header_timeout")

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_REQUEST_LINE:
            self._refusal = (414, "request_line_too_long", f"The request target is longer than {MAX_REQUEST_LINE} "
                             "bytes.")
            raise _Refused
        self._head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._head_size += len(name) + len(value) + 4
        if self._header_count > self.limits.max_headers:
            self._refusal = (431, "too_many_headers", f"The request has more than {self.limits.max_headers} "
                             "headers.")
            raise _Refused
        if self._head_size > self.limits.max_header_bytes:
            self._too_large()
            raise _Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head = None
        self._disarm()
        self._due = (self.limits.body_timeout, "body_timeout")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        self._due = None
        self._head = 0  # whatever comes next is the next request's head
        super().on_message_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        """uvicorn starts one request's app at a time (a pipelined one waits): its edge is the running one."""
        edge = cycle.scope.get(EDGE)
        if isinstance(edge, HttpEdge):
            edge._cycle = cycle
            self._running = edge
        super()._start_asgi_task(cycle, app)

    def handle_websocket_upgrade(self) -> None:
        self._disarm()  # the connection becomes a WebSocket's: no HTTP deadline applies any more
        self._stall.disarm()
        super().handle_websocket_upgrade()

    # The keep-alive timeout (uvicorn's `timeout_keep_alive`): uvicorn arms a timer when a response is complete
    # and cancels it when the next request's first bytes come, two timer operations per request. Here one
    # timer per connection is left running: when it fires it closes a connection idle for the whole timeout
    # since its last response, re-arms itself for the rest of one idle for less, and stops for a busy one
    # (the next response complete arms it again).

    def _unset_keepalive_if_required(self) -> None:
        self._idle_since = None  # busy: the pending timer, if any, finds it so and stops

    def on_response_complete(self) -> None:
        """uvicorn's, with the keep-alive timer left armed (above)."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if not self._holding:
            self.flow.resume_reading()
        if self.pipeline:
            self._idle_since = None
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            if self._holding and len(self.pipeline) <= PIPELINE_DEPTH // 2:
                self.loop.call_soon(self._release)
            return
        if self._holding:
            self.loop.call_soon(self._release)
        self._idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self._idle_check)

    def _idle_check(self) -> None:
        self.timeout_keep_alive_task = None
        if self._idle_since is None:
            return
        left = self._idle_since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self._idle_check)
            return
        self.timeout_keep_alive_handler()

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            metrics.connections_closed.labels("idle").inc()
        super().timeout_keep_alive_handler()

    def _stalled(self) -> None:
        if self.transport.is_closing() and self.transport.get_write_buffer_size() == 0:
            return
        seconds = self.limits.send_timeout
        _closing(self, "send_timeout", f"read nothing for {seconds:g}s")
        cycle = self.cycle
        edge = edge_of(cycle.scope) if cycle is not None and not cycle.response_complete else None
        if edge is not None and edge.on_stall is not None:
            edge.on_stall(send_timeout_error(seconds))  # the app ends its response (stored)
        reset(self.transport)

    def _abort(self) -> None:
        self._stall.disarm()
        reset(self.transport)

    def _too_large(self) -> None:
        self._refusal = (431, "headers_too_large", f"The request line and headers are larger than "
                         f"{self.limits.max_header_bytes} bytes.")

    def _refuse(self) -> None:
        """Answer a refused head (431 or 414, OpenAI's error body) and close. What the client still sends
        is read and dropped for a moment, so it can read the answer rather than meet a reset."""
        assert self._refusal is not None
        status, reason, message = self._refusal
        self._disarm()
        _closing(self, reason, message)
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # a pipelined request while a response is being sent: no room for an answer
            return
        body = orjson.dumps(APIError(status, message, code=reason).body())
        self.transport.write(b"".join([
            b"HTTP/1.1 %d %s\r\n" % (status, PHRASES[status]),
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body),
            body,
        ]))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER, self.transport.close)
        else:
            self.transport.close()

    def _arm(self, seconds: float, reason: str) -> None:
        if seconds > 0:
            self._deadline = self.loop.call_later(seconds, self._close, reason, f"not done within {seconds:g}s")

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self, reason: str, detail: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        _closing(self, reason, detail)
        self.transport.close()


class EdgeWebSocketProtocol(_WatchesSends, WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol with the send deadline, a keepalive timeout that aborts, and a drain
    the app runs (`Edge.on_shutdown`)."""

    limits = EdgeLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stall = _StallWatch(self, self.limits.send_timeout, self._stalled)
        self.edge: Edge | None = None
        self._pending = 0  # bytes of a message (or frame) still arriving, held in the budget
        self._last = 0.0  # when the last byte came
        self._idle: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        """uvicorn's, with what is left of a message still arriving held in the budget (bodies.py) and
        watched for idleness. Nearly every message arrives whole in one read: nothing is left, nothing held."""
        super().data_received(data)
        if not self.handshake_complete or self.transport.is_closing():
            return
        pending = len(self.conn.reader.buffer)
        for frame in self.frames:
            pending += len(frame)
        if pending == self._pending:
            if pending:
                self._last = self.loop.time()
            return
        if pending > self._pending and not BUDGET.take(pending - self._pending):
            self._drop(1013, "bodies_budget", f"over the budget of {BUDGET.limit} bytes of bodies in flight",
                       APIError(503, "The gateway is receiving too many request bodies at once; retry in a "
                                "moment.", type="server_error", code="server_busy"))
            return
        if pending < self._pending:
            BUDGET.give(self._pending - pending)
        self._pending = pending
        self._last = self.loop.time()
        if pending and self._idle is None and self.limits.body_idle > 0:
            self._idle = self.loop.call_later(self.limits.body_idle, self._idle_check)

    def _idle_check(self) -> None:
        self._idle = None
        if not self._pending or self.transport.is_closing():
            return
        if self.read_paused:  # not read by us: the client is not the one idle
            self._last = self.loop.time()
        left = self._last + self.limits.body_idle - self.loop.time()
        if left > 0:
            self._idle = self.loop.call_later(left, self._idle_check)
            return
        seconds = self.limits.body_idle
        self._drop(1008, "body_idle", f"nothing of a message came for {seconds:g}s",
                   APIError(408, f"Nothing of a WebSocket message came for {seconds:g} s; the connection was "
                            "closed.", code="request_timeout"))

    def _drop(self, code: int, reason: str, detail: str, error: APIError) -> None:
        """Close the connection with `code`, the running turn ended with `error` (stored), the app told."""
        _closing(self, reason, detail)
        self._end_turn(error)
        if not self.close_sent:
            self.close_sent = True
            self.conn.send_close(code, error.message[:120])
            self.transport.write(b"".join(self.conn.data_to_send()))
        self.queue.put_nowait({"type": "websocket.disconnect", "code": code})
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._pending:
            BUDGET.give(self._pending)
            self._pending = 0
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        super().connection_lost(exc)

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        if getattr(self, "scope", None) is not None:  # an upgrade the app will see
            self.edge = Edge(lambda: reset(self.transport))
            self.scope[EDGE] = self.edge  # type: ignore[literal-required]  # our own scope key

    def keepalive_timeout(self) -> None:
        """No pong in time: the running turn ends (stored) and the connection is dropped. uvicorn closes it
        gracefully, which waits for ever when the client reads nothing (the ping sits behind the buffer)."""
        if self.close_sent or self.transport.is_closing():
            return super().keepalive_timeout()
        seconds = self.ping_timeout or 0
        _closing(self, "keepalive_timeout", f"no pong within {seconds:g}s")
        self._end_turn(APIError(408, f"The client answered no ping within {seconds:g} s (WebSocket keepalive "
                                "timeout); the response was ended and the connection closed.",
                                type="server_error", code="websocket_keepalive_timeout"))
        super().keepalive_timeout()
        reset(self.transport)

    def shutdown(self) -> None:
        edge = self.edge
        if (edge is not None and edge.on_shutdown is not None and self.handshake_complete
                and not self.close_sent and not self.transport.is_closing()):
            edge.on_shutdown()  # the app drains its turn, then closes (code 1012)
            return
        super().shutdown()

    def _stalled(self) -> None:
        seconds = self.limits.send_timeout
        _closing(self, "send_timeout", f"read nothing for {seconds:g}s")
        self._end_turn(send_timeout_error(seconds))
        reset(self.transport)

    def _end_turn(self, error: APIError) -> None:
        if self.edge is not None and self.edge.on_stall is not None:
            self.edge.on_stall(error)
