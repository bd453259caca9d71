"""Connect to the address that was checked: an HTTP client whose connections to one host go to one IP.

`urls.check_url` resolves a URL's host and refuses special-purpose addresses. If an HTTP client
then resolved the name again, a hostile DNS server could answer with a public address the first time and
127.0.0.1 the second (DNS rebinding). The client built here never resolves that host: its network backend
dials the pinned IP, while the URL, the Host header, TLS SNI and certificate checks keep the hostname.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import httpcore2
import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's default backend, except that `host` is dialled at `address`."""

    def __init__(self, host: str, address: str):
        self.host, self.address = host.lower(), address
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        if host.lower().rstrip(".") == self.host:
            host = self.address
        return await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                             socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are never used for URLs a request names")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def pinned_transport(host: str | None, address: str | None) -> httpx2.AsyncHTTPTransport:
    """An httpx2 transport whose connections to `host` dial `address` (the default one without both)."""
    transport = httpx2.AsyncHTTPTransport()
    if host and address:
        # AsyncHTTPTransport takes no network backend: give it a pool that has ours (same TLS context).
        transport._pool = httpcore2.AsyncConnectionPool(ssl_context=transport._pool._ssl_context,
                                                        network_backend=PinnedBackend(host, address))
    return transport


def client_factory(host: str | None, address: str | None) -> Callable[..., httpx2.AsyncClient]:
    """A factory with the MCP SDK's `McpHttpClientFactory` signature; pinned when `address` is given."""

    def make(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
             auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        transport = pinned_transport(host, address)
        if timeout is None:
            timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport,
                                  trust_env=False)

    return make
