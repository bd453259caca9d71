"""What every HTTP upstream shares: one pooled aiohttp session per upstream, the request that opens a
stream (failures before it become HTTP errors), and the stream object that releases the connection."""

from __future__ import annotations

import logging
from collections.abc import Callable

import aiohttp
import orjson

from .. import generation as g
from .base import Call, Route

log = logging.getLogger("responses_gateway.upstream")

NETWORK_ERRORS = (TimeoutError, aiohttp.ClientError, OSError)


def unreachable(exc: BaseException) -> g.UpstreamError:
    log.warning("upstream unreachable: %s", exc.__class__.__name__)
    return g.UpstreamError(f"Could not reach the upstream model server ({exc.__class__.__name__}).",
                           status=502, code="upstream_unreachable")


class HTTPUpstream:
    headers: dict[str, str]

    def __init__(self, route: Route):
        self.route = route
        self.base = route.base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """Created on first use, inside the server's event loop; keeps upstream connections alive."""
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.route.connect_timeout,
                                            sock_read=self.route.read_timeout)
            self._session = aiohttp.ClientSession(
                timeout=timeout,
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60, ttl_dns_cache=300),
                json_serialize=lambda o: orjson.dumps(o).decode(),
                auto_decompress=True,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(self, url: str, body: dict, model: str,
                   http_error: Callable[[int, bytes, str | None], g.UpstreamError]) -> aiohttp.ClientResponse:
        """POST and wait for the upstream's answer headers; anything but 200 is raised as its HTTP error."""
        try:
            resp = await self.session.post(url, data=orjson.dumps(body), headers=self.headers)
        except NETWORK_ERRORS as exc:
            raise unreachable(exc) from None
        if resp.status != 200:
            try:
                raw = await resp.read()
            except NETWORK_ERRORS:
                raw = b""
            finally:
                resp.close()
            raise http_error(resp.status, raw, model)
        return resp


class BodyStream:
    """An upstream response body as batches of generation events, one batch per network read.

    Subclasses write `_events()` and set `_complete` once the body was read to its end: the connection
    then goes back to the pool; otherwise it is closed, so the upstream sees the client went away."""

    def __init__(self, resp: aiohttp.ClientResponse, call: Call):
        self.resp = resp
        self.call = call
        self._gen = self._events()
        self._complete = False

    def __aiter__(self):
        return self._gen

    async def aclose(self) -> None:
        await self._gen.aclose()
        if self._complete:
            self.resp.release()
        else:
            self.resp.close()

    async def _events(self):
        raise NotImplementedError
        yield  # (an async generator)
