"""A lean HTTP/1.1 client for the one request the gateway makes per response: the POST whose answer streams.

aiohttp's client costs a few hundred microseconds of Python to send a request and read its head, and ten
Python functions per read of a streamed body (its protocol, payload parser, `StreamReader` and waiter). Here a
read is one `data_received`, httptools' C parser and one `on_body` call that appends the bytes and wakes the
reader, which takes everything buffered at once (`take`) or waits on a plain future (`wait`).

What it does: keep-alive connections pooled per origin (a bounded number kept idle, each for at most
`IDLE_EXPIRY` seconds), TLS with the default context (certificates and SNI checked), a body sent with its
`content-length`, answers chunked, with a `content-length` or ended by the connection's close, and
`gzip`/`deflate` answers decoded. A connection whose answer did not end cleanly is closed, never reused; a
pooled connection the server had already closed (it fails before any byte of the answer) is retried once on
a new connection. No proxies, no redirects, no cookies: the callers need none.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import socket
import ssl
import zlib
from collections import deque
from typing import cast
from urllib.parse import urlsplit

import httptools

IDLE_EXPIRY = 60.0  # seconds an idle pooled connection is kept
MAX_IDLE = 256  # idle connections kept per origin (a burst of streams finishing together keeps them)
HIGH_WATER = 1 << 18  # unread body bytes at which reading from the socket pauses (a slow reader)
MAX_HEAD = 1 << 16  # bytes of an answer's status line and headers (aiohttp: 8 KiB a line; httptools has no bound)
WRITE_PIECE = 1 << 16  # a large request body is written this much per loop turn
USER_AGENT = "User-Agent: responses-gateway"


class ClientError(Exception):
    """What this client raises for a failed exchange (besides the `OSError` of a failed connect)."""


class ConnectionLost(ClientError, ConnectionError):
    """The server closed the connection before its answer ended."""


class BadResponse(ClientError):
    """The server's bytes are not an HTTP/1.1 answer (or not the encoding they say)."""


class InvalidURL(ClientError, ValueError):
    """Not an http(s) URL with a host (a route's base URL that cannot be called)."""


class ConnectTimeout(ClientError, TimeoutError):
    """No connection (with its TLS handshake) within the connect timeout."""


class _Decoder:
    """`content-encoding: gzip` or `deflate` (zlib-wrapped or raw, as servers send both)."""

    __slots__ = ("_z", "_raw_tried")

    def __init__(self, encoding: str):
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 32 if encoding == "gzip" else zlib.MAX_WBITS)
        self._raw_tried = encoding == "gzip"

    def decompress(self, data: bytes) -> bytes:
        try:
            return self._z.decompress(data)
        except zlib.error:
            if self._raw_tried:
                raise
            self._raw_tried = True  # a raw deflate stream, without the zlib header
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._z.decompress(data)

    def flush(self) -> bytes:
        return self._z.flush()


class Connection(asyncio.Protocol):
    """One connection, one exchange at a time: the answer's head, then its body as it arrives."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.loop = asyncio.get_running_loop()
        self.idle_since = 0.0
        self.reset()

    def reset(self) -> None:
        self.received = False  # any byte of the current answer
        self.head_bytes: int | None = 0  # bytes read while the answer's head was incomplete; None once it is whole
        self.status = 0
        self.headers: dict[str, str] = {}
        self.head: asyncio.Future[None] = self.loop.create_future()
        self.pending = b""  # body bytes not taken yet: the first piece, as it came (no copy)
        self.more: list[bytes] = []  # the pieces after it, when several came before a take (a slow reader)
        self.size = 0  # bytes in `more`
        self.done = False  # the body ended (the answer is whole)
        self.keep_alive = False
        self.error: BaseException | None = None  # raised once the buffer is empty
        self.waiter: asyncio.Future[None] | None = None
        self.decoder: _Decoder | None = None
        self.paused = False
        self.length_known = False  # chunked or a content-length: the end is in the bytes, not the close
        self._write_ready: asyncio.Future[None] | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's transports are not its subclasses)

    def data_received(self, data: bytes) -> None:
        self.received = True
        if self.head_bytes is not None:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(BadResponse(f"invalid HTTP answer: {exc}"))
        except zlib.error as exc:
            self._fail(BadResponse(f"invalid compressed body: {exc}"))
        else:  # still no whole head after this read: an endless one would grow `headers` without a bound
            if self.head_bytes is not None and self.head_bytes > MAX_HEAD:
                self._fail(BadResponse(f"the answer's head is longer than {MAX_HEAD} bytes"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.keep_alive = False
        self.pool.forget(self)
        self.resume_writing()  # a body being sent stops waiting
        if self.done:
            return
        if self.head.done() and not self.length_known and exc is None:
            self._finish()  # a body delimited by the connection's close
            return
        lost = ConnectionLost("the upstream closed the connection")
        if exc is not None:
            lost.__cause__ = exc
        self._fail(lost, close=False)

    def pause_writing(self) -> None:
        self._write_ready = self.loop.create_future()

    def resume_writing(self) -> None:
        ready, self._write_ready = self._write_ready, None
        if ready is not None and not ready.done():
            ready.set_result(None)

    # -- httptools callbacks ---------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:  # an informational answer: the real one follows
            self.headers = {}
            return
        self.status = status
        self.head_bytes = None
        headers = self.headers
        self.length_known = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "")
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding in ("gzip", "deflate", "x-gzip"):
            self.decoder = _Decoder("gzip" if encoding == "x-gzip" else encoding)
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.decoder is not None:
            body = self.decoder.decompress(body)
            if not body:
                return
        if not self.pending:
            self.pending = body
        else:
            self.more.append(body)
            self.size += len(body)
            if self.size > HIGH_WATER and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def on_message_complete(self) -> None:
        if self.status == 0:  # the end of an informational answer
            return
        self.keep_alive = self.parser.should_keep_alive()
        self._finish()

    # -- the exchange ----------------------------------------------------------------------------------------

    def _finish(self) -> None:
        if self.decoder is not None:
            rest = self.decoder.flush()
            if rest:
                if self.pending:
                    self.more.append(rest)
                else:
                    self.pending = rest
        self.done = True
        self.wake()

    def _fail(self, exc: BaseException, close: bool = True) -> None:
        self.keep_alive = False
        if self.error is None:
            self.error = exc
        if not self.head.done():
            self.head.set_exception(exc)
            self.head.exception()  # (retrieved: nobody may be waiting for the head)
        self.wake()
        if close and self.transport is not None:
            self.transport.close()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def send(self, head: bytes, body: bytes | io.BytesIO) -> None:
        transport = self.transport
        assert transport is not None
        if isinstance(body, bytes):
            transport.write(head + body)
            return
        transport.write(head)
        view = body.getbuffer()
        try:
            for start in range(0, len(view), WRITE_PIECE):
                if self.error is not None or transport.is_closing():
                    return  # the answer (or the loss) came early: the head wait reports it
                transport.write(bytes(view[start:start + WRITE_PIECE]))
                if self._write_ready is not None:
                    await self._write_ready
                else:
                    await asyncio.sleep(0)
        finally:
            view.release()

    def reusable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing() and not self.received


class Response:
    """An answer's head, and its body read as it arrives.

    `take()` returns every body byte that arrived since the last take, `b""` at the body's end, `None` when
    nothing arrived yet (then `await wait()`); it raises the failure that ended the body once the bytes before
    it were taken (a connection lost, or what `fail` set)."""

    __slots__ = ("url", "status", "headers", "_conn")

    def __init__(self, url: str, conn: Connection):
        self.url = url
        self.status = conn.status
        self.headers = conn.headers
        self._conn: Connection | None = conn

    @property
    def content_type(self) -> str:
        """The media type, without its parameters, lower case (as aiohttp gives it)."""
        value = self.headers.get("content-type")
        if value is None:
            return "application/octet-stream"
        return value.partition(";")[0].strip().lower()

    def take(self) -> bytes | None:
        conn = self._conn
        if conn is None:
            raise ConnectionLost("the answer was closed")
        data = conn.pending
        if data:
            conn.pending = b""
            if conn.more:
                data = b"".join([data, *conn.more])
                conn.more.clear()
                conn.size = 0
                if conn.paused:
                    conn.paused = False
                    if conn.transport is not None:
                        conn.transport.resume_reading()
            return data
        if conn.error is not None:
            raise conn.error
        if conn.done:
            return b""
        return None

    def wait(self) -> asyncio.Future[None]:
        """A future that is done when `take` has something to say (bytes, the end, or a failure)."""
        conn = self._conn
        if conn is None:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.set_result(None)
            return future
        future = conn.loop.create_future()
        if conn.pending or conn.done or conn.error is not None:
            future.set_result(None)
        else:
            conn.waiter = future
        return future

    def fail(self, exc: BaseException) -> None:
        """End the body with `exc` now (a deadline): unread bytes are dropped, a waiting read wakes, and the
        connection is closed (nothing more is read from it)."""
        conn = self._conn
        if conn is not None:
            conn.pending = b""
            conn.more.clear()
            conn.error = exc
            conn.keep_alive = False
            conn.wake()
            conn.pool.discard(conn)

    async def read(self) -> bytes:
        """The whole (rest of the) body."""
        parts: list[bytes] = []
        while True:
            data = self.take()
            if data is None:
                await self.wait()
                continue
            if not data:
                return b"".join(parts)
            parts.append(data)

    def release(self) -> None:
        """Done with the answer: a connection whose answer ended cleanly goes back to the pool, any other is
        closed (the server sees the reader went away)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.done and conn.keep_alive and not conn.pending and conn.error is None:
            conn.pool.put(conn)
        else:
            conn.pool.discard(conn)

    def close(self) -> None:
        """Done with the answer, whatever is left of it: the connection is closed."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.pool.discard(conn)


class Pool:
    """The connections to one origin (scheme, host, port)."""

    def __init__(self, scheme: str, host: str, port: int, connect_timeout: float | None,
                 ssl_context: ssl.SSLContext | None = None):
        self.host = host
        self.port = port
        self.ssl = (ssl_context or ssl.create_default_context()) if scheme == "https" else None
        self.connect_timeout = connect_timeout
        self.host_header = host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"
        if ":" in host:
            self.host_header = f"[{host}]" if port == (443 if scheme == "https" else 80) else f"[{host}]:{port}"
        self.idle: deque[Connection] = deque()
        self.busy: set[Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None

    async def connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await self._connect(loop)
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {self.host}:{self.port} within {self.connect_timeout} s") \
                from None

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> Connection:
        """Each address the name resolves to in turn; the first failure is the one raised (a refused
        connection stays a `ConnectionRefusedError`, not a list of every address's error)."""
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        first: OSError | None = None
        for family, _, proto, _, address in infos:
            host, port = str(address[0]), int(address[1])
            try:
                _, protocol = await loop.create_connection(
                    lambda: Connection(self), host=host, port=port, family=family, proto=proto,
                    ssl=self.ssl, server_hostname=self.host if self.ssl is not None else None)
            except OSError as exc:
                first = first or exc
                continue
            conn = protocol
            assert isinstance(conn, Connection)
            sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return conn
        raise first or OSError(f"{self.host} resolved to no address")

    def acquire_idle(self) -> Connection | None:
        now = asyncio.get_running_loop().time()
        idle = self.idle
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to have been closed by the server
            if conn.reusable() and now - conn.idle_since < IDLE_EXPIRY:
                conn.reset()
                self.busy.add(conn)
                return conn
            self._close(conn)
        return None

    def put(self, conn: Connection) -> None:
        self.busy.discard(conn)
        if len(self.idle) >= MAX_IDLE or conn.transport is None or conn.transport.is_closing():
            self._close(conn)
            return
        conn.received = False
        conn.idle_since = asyncio.get_running_loop().time()
        self.idle.append(conn)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(IDLE_EXPIRY, self._sweep)

    def discard(self, conn: Connection) -> None:
        self.busy.discard(conn)
        self._close(conn)

    def forget(self, conn: Connection) -> None:
        """A connection that closed: never handed out again."""
        self.busy.discard(conn)
        with contextlib.suppress(ValueError):
            self.idle.remove(conn)

    def _close(self, conn: Connection) -> None:
        if conn.transport is not None and not conn.transport.is_closing():
            conn.transport.close()

    def _sweep(self) -> None:
        self._sweeper = None
        now = asyncio.get_running_loop().time()
        while self.idle and now - self.idle[0].idle_since >= IDLE_EXPIRY:
            self._close(self.idle.popleft())
        if self.idle:
            due = self.idle[0].idle_since + IDLE_EXPIRY
            self._sweeper = asyncio.get_running_loop().call_at(due, self._sweep)

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in [*self.idle, *self.busy]:
            self._close(conn)
        self.idle.clear()
        self.busy.clear()


class Client:
    """Pools by origin; `post` sends a request and returns once the answer's head arrived."""

    def __init__(self, connect_timeout: float | None = None, ssl_context: ssl.SSLContext | None = None):
        self.connect_timeout = connect_timeout
        self.ssl_context = ssl_context
        self.pools: dict[tuple[str, str, int], Pool] = {}
        self.targets: dict[str, tuple[Pool, bytes]] = {}  # URL -> its pool, request line and Host line
        self._rendered: tuple[dict[str, str], bytes] | None = None  # the last headers and their lines

    def pool(self, scheme: str, host: str, port: int) -> Pool:
        key = (scheme, host, port)
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = Pool(scheme, host, port, self.connect_timeout, self.ssl_context)
        return pool

    async def post(self, url: str, headers: dict[str, str], body: bytes | io.BytesIO) -> Response:
        """Raises `ConnectTimeout`, the connect's `OSError` (refused, host not found, TLS), `ConnectionLost`
        or `BadResponse`; the caller's own deadline cancels it."""
        found = self.targets.get(url)
        if found is None:
            found = self._target(url)
        pool, start = found
        rendered = self._rendered
        if rendered is None or rendered[0] != headers:  # (an upstream sends the same headers every time)
            rendered = self._rendered = (dict(headers), _lines(headers))
        length = len(body) if isinstance(body, bytes) else len(body.getbuffer())
        head = b"%sContent-Length: %d\r\n%s\r\n" % (start, length, rendered[1])
        conn = pool.acquire_idle()
        if conn is not None:
            try:
                return await self._exchange(url, conn, head, body)
            except ConnectionLost:
                if conn.received:
                    raise
                # the server had closed the kept-alive connection before it read the request: once more, anew
                if isinstance(body, io.BytesIO):
                    body.seek(0)
        conn = await pool.connect()
        pool.busy.add(conn)
        return await self._exchange(url, conn, head, body)

    def _target(self, url: str) -> tuple[Pool, bytes]:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise InvalidURL(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if scheme == "https" else 80)
        pool = self.pool(scheme, parts.hostname, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if any(c in target for c in " \r\n"):
            raise InvalidURL(f"invalid request target {target!r}")
        found = pool, f"POST {target} HTTP/1.1\r\nHost: {pool.host_header}\r\n".encode("latin-1")
        if len(self.targets) >= 256:
            self.targets.clear()
        self.targets[url] = found
        return found

    async def _exchange(self, url: str, conn: Connection, head: bytes, body: bytes | io.BytesIO) -> Response:
        try:
            await conn.send(head, body)
            await conn.head
        except BaseException:
            conn.pool.discard(conn)
            raise
        return Response(url, conn)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()


def _lines(headers: dict[str, str]) -> bytes:
    """The header lines after the request line, Host and Content-Length, each ending in CRLF."""
    lines = ["Accept-Encoding: gzip, deflate"]
    if not any(name.lower() == "user-agent" for name in headers):
        lines.append(USER_AGENT)
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise ValueError(f"invalid header {name!r}")
        lines.append(f"{name}: {value}")
    return "".join(line + "\r\n" for line in lines).encode("latin-1")
