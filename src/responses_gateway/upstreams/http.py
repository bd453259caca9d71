"""What every HTTP upstream shares: one pooled aiohttp session per upstream, timeouts from its route."""

from __future__ import annotations

import aiohttp
import orjson

from .base import Route


class HTTPUpstream:
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
