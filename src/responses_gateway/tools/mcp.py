"""Client side of remote MCP tools: the servers a request declares, executed by the gateway.

Built on the official `mcp` SDK (2.x): `mcp.Client` over the streamable HTTP transport, falling back to the
legacy SSE transport when the endpoint does not speak streamable HTTP (404/405, protocol error...).

Public API:

- `MCPServer.from_tool(spec)`: a Responses `{"type": "mcp", ...}` tool -> `MCPServer` (raises `ValueError`).
- `await check_url(url, allow_hosts)`: refuses non-http(s) URLs and hosts resolving to loopback, private,
  link-local, multicast, reserved or unspecified addresses unless the operator allow-list admits them.
- `await list_tools(server, timeout)` -> OpenAI `mcp_list_tools` tools, filtered by `allowed_tools`.
- `await call_tool(server, name, arguments, timeout)` -> `(output_text, is_error)`.
- `MCPSession(server, timeout=...)`: one connection for a list and several calls (an async context manager).

Every failure (connection, HTTP status, protocol, timeout) is raised as `MCPError` with a readable message
that never contains header values, the authorization token, or the URL's query string / userinfo.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp import Client
from mcp import types as mcp_types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError as SDKError

from responses_gateway import __version__

logger = logging.getLogger(__name__)

# httpx2 (the SDK's HTTP client) logs every request URL at INFO, and a server_url may carry a token in its
# query string: keep it quiet unless the operator configured that logger explicitly.
if logging.getLogger("httpx2").level == logging.NOTSET:
    logging.getLogger("httpx2").setLevel(logging.WARNING)

__all__ = [
    "MCPError",
    "MCPServer",
    "MCPSession",
    "call_tool",
    "check_url",
    "list_tools",
    "result_to_text",
    "safe_url",
]

DEFAULT_TIMEOUT = 30.0
SSE_READ_TIMEOUT = 300.0  # longest wait between two events on an SSE stream (servers ping far more often)
_REQUEST_TIMEOUT_CODE = -32001  # mcp_types.REQUEST_TIMEOUT
_MAX_LIST_PAGES = 100
_CLOSE_GRACE = 5.0
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")
_GUARD = 1.0  # extra seconds for our own guard around a request the SDK already times out


class MCPError(Exception):
    """A failure talking to an MCP server; `str(exc)` is a readable message without secrets.

    `timed_out` tells a timeout from other failures.
    """

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.message = message
        self.timed_out = timed_out

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------------------------------------------------
# Declaration


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"{what} must be a list of tool names")
    return list(value)


@dataclass
class ToolFilter:
    """OpenAI's tool filter: `tool_names` and/or `read_only` (tools annotated `readOnlyHint: true`)."""

    tool_names: list[str] | None = None
    read_only: bool | None = None

    @classmethod
    def parse(cls, value: Any, what: str) -> ToolFilter:
        if isinstance(value, list):
            return cls(tool_names=_names(value, what))
        if not isinstance(value, Mapping):
            raise ValueError(f"{what} must be a list of tool names or an object with tool_names / read_only")
        unknown = set(value) - {"tool_names", "read_only"}
        if unknown:
            raise ValueError(f"{what} has unknown field(s): {', '.join(sorted(unknown))}")
        names = value.get("tool_names")
        read_only = value.get("read_only")
        if read_only is not None and not isinstance(read_only, bool):
            raise ValueError(f"{what}.read_only must be a boolean")
        return cls(tool_names=None if names is None else _names(names, f"{what}.tool_names"), read_only=read_only)

    def matches(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        """Whether the filter selects this tool (a filter with no criteria selects nothing)."""
        if self.tool_names is None and self.read_only is None:
            return False
        if self.tool_names is not None and name not in self.tool_names:
            return False
        if self.read_only is not None:
            is_read_only = bool((annotations or {}).get("readOnlyHint"))
            if is_read_only != self.read_only:
                return False
        return True


@dataclass
class MCPServer:
    """One remote MCP server declared by a request's `{"type": "mcp"}` tool.

    `headers` carries the secrets (including `Authorization` built from `authorization`): it is excluded from
    `repr()` and must never be stored, logged or echoed; use `public_tool()` for what may be stored.
    """

    label: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    allowed_tools: list[str] | None = None
    read_only: bool | None = None  # from allowed_tools={"read_only": ...}: keep only (non-)read-only tools
    require_approval: Any = "always"
    description: str | None = None

    @classmethod
    def from_tool(cls, spec: Mapping[str, Any]) -> MCPServer:
        """Build from a Responses tool; raises `ValueError` with a readable reason for a bad declaration."""
        if spec.get("type", "mcp") != "mcp":
            raise ValueError(f"not an mcp tool: type {spec.get('type')!r}")
        label = spec.get("server_label")
        if not isinstance(label, str) or not label.strip():
            raise ValueError("mcp tool: server_label is required")
        url = spec.get("server_url")
        if url is None and spec.get("connector_id") is not None:
            raise ValueError(f"mcp tool {label!r}: connector_id is not supported, give a server_url")
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"mcp tool {label!r}: server_url is required")
        headers: dict[str, str] = {}
        raw_headers = spec.get("headers")
        if raw_headers is not None:
            if not isinstance(raw_headers, Mapping):
                raise ValueError(f"mcp tool {label!r}: headers must be an object of strings")
            for key, value in raw_headers.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise ValueError(f"mcp tool {label!r}: headers must be an object of strings")
                if not _HEADER_NAME.fullmatch(key):
                    raise ValueError(f"mcp tool {label!r}: invalid header name {key[:64]!r}")
                if _BAD_HEADER_VALUE.search(value):  # never echo the value: it may be a secret
                    raise ValueError(f"mcp tool {label!r}: header {key!r} has an invalid value")
                headers[key] = value
        authorization = spec.get("authorization")
        if authorization is not None:
            if not isinstance(authorization, str):
                raise ValueError(f"mcp tool {label!r}: authorization must be a string")
            if _BAD_HEADER_VALUE.search(authorization):
                raise ValueError(f"mcp tool {label!r}: authorization has an invalid value")
            if authorization and not any(k.lower() == "authorization" for k in headers):
                token = authorization.strip()
                headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
        allowed: list[str] | None = None
        read_only: bool | None = None
        raw_allowed = spec.get("allowed_tools")
        if raw_allowed is not None:
            flt = ToolFilter.parse(raw_allowed, f"mcp tool {label!r}: allowed_tools")
            allowed, read_only = flt.tool_names, flt.read_only
        require_approval = spec.get("require_approval")
        if require_approval is None:
            require_approval = "always"
        _check_require_approval(require_approval, label)
        description = spec.get("server_description")
        if description is not None and not isinstance(description, str):
            raise ValueError(f"mcp tool {label!r}: server_description must be a string")
        return cls(
            label=label,
            url=url.strip(),
            headers=headers,
            allowed_tools=allowed,
            read_only=read_only,
            require_approval=require_approval,
            description=description,
        )

    def allows(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        """Whether `allowed_tools` lets the model see / call this tool."""
        if self.allowed_tools is not None and name not in self.allowed_tools:
            return False
        if self.read_only is not None:
            return bool((annotations or {}).get("readOnlyHint")) == self.read_only
        return True

    def filter_tools(self, tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Keep the `mcp_list_tools`-shaped tools that `allowed_tools` admits."""
        return [dict(t) for t in tools if self.allows(t["name"], t.get("annotations"))]

    def requires_approval(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        """OpenAI's `require_approval`: "always" (default), "never", or {"always": filter, "never": filter}.

        With the object form, a tool matched by `never` needs no approval, one matched by `always` does, and
        one matched by neither needs approval (the default).
        """
        policy = self.require_approval
        if policy == "never":
            return False
        if isinstance(policy, Mapping) and "never" in policy:
            return not ToolFilter.parse(policy["never"], "never").matches(name, annotations)
        return True

    def public_tool(self) -> dict[str, Any]:
        """The declaration as it may be stored or echoed: no headers, no authorization."""
        out: dict[str, Any] = {"type": "mcp", "server_label": self.label, "server_url": self.url}
        if self.allowed_tools is not None or self.read_only is not None:
            if self.read_only is None:
                out["allowed_tools"] = list(self.allowed_tools or [])
            else:
                flt: dict[str, Any] = {"read_only": self.read_only}
                if self.allowed_tools is not None:
                    flt["tool_names"] = list(self.allowed_tools)
                out["allowed_tools"] = flt
        out["require_approval"] = self.require_approval
        if self.description is not None:
            out["server_description"] = self.description
        return out


def _check_require_approval(value: Any, label: str) -> None:
    if value in ("always", "never"):
        return
    if isinstance(value, Mapping):
        unknown = set(value) - {"always", "never"}
        if unknown:
            raise ValueError(f"mcp tool {label!r}: require_approval has unknown field(s): {', '.join(sorted(unknown))}")
        for key in ("always", "never"):
            if key in value:
                ToolFilter.parse(value[key], f"mcp tool {label!r}: require_approval.{key}")
        return
    raise ValueError(f"mcp tool {label!r}: require_approval must be 'always', 'never' or an object")


# ---------------------------------------------------------------------------------------------------------
# URL safety


def safe_url(url: str) -> str:
    """The URL without userinfo, query or fragment: safe to put in messages and logs."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<invalid url>"


def _allow_entries(allow_hosts: Iterable[str]) -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    names: set[str] = set()
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in allow_hosts:
        entry = entry.strip().lower()
        if not entry:
            continue
        if "/" in entry:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
        names.add(entry)
        if entry.startswith("[") and "]" in entry:  # "[::1]" or "[::1]:8080"
            names.add(entry[1:].replace("]", "", 1))
    return names, networks


def _refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _refusal(ip.ipv4_mapped)
    for attr, what in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(ip, attr):
            return what
    if not ip.is_global:
        return "non-public"
    return None


async def check_url(url: str, allow_hosts: Iterable[str] = (), *, resolve_timeout: float = 5.0) -> None:
    """Refuse an MCP `server_url` the gateway must not connect to; raises `ValueError` with the reason.

    The scheme must be http or https. Unless the host (as written, or "host:port", or a resolved IP, or a
    CIDR entry such as "10.0.0.0/8" containing it) is in `allow_hosts`, every address the host resolves to
    must be public: loopback, private, link-local, multicast, reserved and unspecified addresses are refused.
    Resolution uses the event loop's resolver (non-blocking). Note: a hostname is resolved again when the
    SDK connects, so this does not defeat DNS rebinding by a hostile resolver.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"server_url is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"server_url must be http or https, not {scheme + ':' if scheme else 'a relative URL'}")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise ValueError("server_url has no host")
    port = port if port is not None else (443 if scheme == "https" else 80)
    names, networks = _allow_entries(allow_hosts)
    if host in names or f"{host}:{port}" in names or f"[{host}]:{port}" in names:
        return

    literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        literal = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(resolve_timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise ValueError(f"cannot resolve host {host!r}: timed out after {resolve_timeout:g}s") from None
        except (socket.gaierror, UnicodeError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise ValueError(f"cannot resolve host {host!r}: {reason}") from None
        addresses = []
        for info in infos:
            try:
                addresses.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            except ValueError:
                continue
        if not addresses:
            raise ValueError(f"cannot resolve host {host!r}: no usable address")

    for ip in addresses:
        if str(ip) in names or any(ip in net for net in networks if net.version == ip.version):
            continue
        what = _refusal(ip)
        if what is not None:
            shown = host if literal is not None else f"{host} ({ip})"
            raise ValueError(
                f"server_url host {shown} is a {what} address; refused (the operator can allow it with "
                f"--mcp-allow-hosts)"
            )


# ---------------------------------------------------------------------------------------------------------
# Results


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _block_text(block: Any) -> tuple[str, bool]:
    """(text, is_real_text) for one content block; non-text blocks become short placeholders."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text, True
    if kind == "image":
        return f"[image: {block.mime_type}]", False
    if kind == "audio":
        return f"[audio: {block.mime_type}]", False
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if isinstance(text, str):
            return text, True
        return f"[resource: {res.uri}{' (' + res.mime_type + ')' if res.mime_type else ''}]", False
    if kind == "resource_link":
        return f"[resource link: {block.uri}]", False
    return f"[{kind or 'unknown'} content]", False


def result_to_text(result: Any) -> str:
    """A `CallToolResult` as the text OpenAI puts in `mcp_call.output`.

    Text parts (and embedded text resources) joined with newlines; when there is no text part, the
    structured content as JSON text; images, audio, blobs and links as short placeholders.
    """
    parts: list[tuple[str, bool]] = [_block_text(b) for b in (getattr(result, "content", None) or [])]
    structured = getattr(result, "structured_content", None)
    if not any(is_text for _, is_text in parts) and structured is not None:
        parts.insert(0, (_json_text(structured), True))
    return "\n".join(text for text, _ in parts)


def _tool_dict(tool: Any) -> dict[str, Any]:
    annotations = tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True) if tool.annotations else None
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": annotations or None,
    }


# ---------------------------------------------------------------------------------------------------------
# Errors


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for sub in exc.exceptions:
            out.extend(_leaves(sub))
        return out
    return [exc]


def _is_network_error(exc: BaseException) -> bool:
    """Errors reaching the host itself (refused, unreachable, DNS...): another transport would fail too."""
    return any(isinstance(e, (httpx2.ConnectError, httpx2.ConnectTimeout, OSError)) for e in _leaves(exc))


def _describe(exc: BaseException, url: str) -> str:
    messages: list[str] = []
    for leaf in _leaves(exc):
        if isinstance(leaf, httpx2.HTTPStatusError):
            msg = f"HTTP {leaf.response.status_code} {leaf.response.reason_phrase}".strip()
        elif isinstance(leaf, SDKError):
            msg = leaf.message or f"MCP error {leaf.code}"
        elif isinstance(leaf, httpx2.TimeoutException):
            msg = "the HTTP request timed out"
        else:
            msg = str(leaf) or type(leaf).__name__
        # Never echo a URL with its query string / userinfo (tokens sometimes live there).
        if url and url in msg:
            msg = msg.replace(url, safe_url(url))
        if msg not in messages:
            messages.append(msg)
    return "; ".join(messages) or type(exc).__name__


# ---------------------------------------------------------------------------------------------------------
# Sessions


class MCPSession:
    """One connection to an MCP server, for a listing and any number of calls, e.g. during one response.

        async with MCPSession(server, timeout=30) as session:
            tools = await session.list_tools()
            output, is_error = await session.call_tool("add", {"a": 1, "b": 2})

    The SDK connection lives in a background task owned by the session, so the session may be opened, used
    and closed from different tasks (or inside an async generator) without anyio cancel-scope trouble.
    `timeout` bounds connecting and is the default per-request timeout; calls run concurrently if you like.
    """

    def __init__(self, server: MCPServer, *, timeout: float = DEFAULT_TIMEOUT):
        self.server = server
        self.timeout = timeout
        self.transport: str | None = None  # "streamable_http" or "sse" once connected
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lost: str | None = None
        self._annotations: dict[str, dict[str, Any] | None] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def __aenter__(self) -> MCPSession:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def connect(self, timeout: float | None = None) -> None:
        """Connect (streamable HTTP, then SSE); raises `MCPError`. Idempotent."""
        if self._task is not None:
            if self._client is None:
                raise MCPError(self._lost or f"MCP server {self.server.label!r}: not connected")
            return
        timeout = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own(timeout), name=f"mcp-session:{self.server.label}")
        self._task.add_done_callback(self._owner_done)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            await self.aclose()
            raise MCPError(
                f"connecting to MCP server {self.server.label!r} at {safe_url(self.server.url)} "
                f"timed out after {timeout:g}s",
                timed_out=True,
            ) from None
        except BaseException:
            await self.aclose()
            raise

    def _owner_done(self, task: asyncio.Task[None]) -> None:
        self._client = None
        if not task.cancelled() and task.exception() is not None:
            logger.debug("MCP session task for %r ended with %s", self.server.label, type(task.exception()).__name__)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(MCPError(f"cannot connect to MCP server {self.server.label!r}"))

    async def aclose(self) -> None:
        """Close the connection (ends the server session); never raises."""
        task, self._task = self._task, None
        self._client = None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        if self._ready is not None and not self._ready.done():
            task.cancel()  # still connecting: nothing to close gracefully
        if not task.done():
            try:
                async with asyncio.timeout(_CLOSE_GRACE):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
            except BaseException:  # the owner task logs its own errors
                pass
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # mark retrieved

    async def _open(self, stack: AsyncExitStack, kind: str, timeout: float) -> Client:
        server = self.server
        headers = dict(server.headers)
        if kind == "streamable_http":
            http = create_mcp_http_client(headers=headers, timeout=httpx2.Timeout(timeout, read=SSE_READ_TIMEOUT))
            await stack.enter_async_context(http)
            transport: Any = streamable_http_client(server.url, http_client=http)
        else:
            transport = sse_client(server.url, headers=headers, timeout=timeout, sse_read_timeout=SSE_READ_TIMEOUT)
        client = Client(
            transport,
            read_timeout_seconds=timeout,
            client_info=mcp_types.Implementation(name="responses-gateway", version=__version__),
            cache=None,
        )
        return await stack.enter_async_context(client)

    async def _own(self, timeout: float) -> None:
        assert self._ready is not None and self._stop is not None
        ready, stop = self._ready, self._stop
        label, url = self.server.label, self.server.url
        failures: list[str] = []
        for kind in ("streamable_http", "sse"):
            try:
                async with AsyncExitStack() as stack:
                    client = await self._open(stack, kind, timeout)
                    self._client, self.transport = client, kind
                    logger.debug("MCP server %r connected via %s at %s", label, kind, safe_url(url))
                    if not ready.done():
                        ready.set_result(None)
                    await stop.wait()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every failure becomes a readable message
                me = asyncio.current_task()
                if me is not None and me.cancelling():
                    raise  # being closed: an error that wraps our cancellation is not a failure to report
                if ready.done():  # the connection was up and broke (or failed while closing)
                    self._client = None
                    if not stop.is_set():
                        self._lost = f"connection to MCP server {label!r} was lost: {_describe(exc, url)}"
                        logger.warning("MCP server %r at %s: connection lost", label, safe_url(url))
                    else:
                        logger.debug("MCP server %r: error while closing: %s", label, _describe(exc, url))
                    return
                name = "streamable HTTP" if kind == "streamable_http" else "SSE"
                failures.append(f"{name}: {_describe(exc, url)}")
                if _is_network_error(exc):
                    break
        if not ready.done():
            ready.set_exception(
                MCPError(f"cannot connect to MCP server {label!r} at {safe_url(url)}: {'; '.join(failures)}")
            )

    def _timeout(self, what: str, timeout: float) -> MCPError:
        return _timed_out(f"{what} MCP server {self.server.label!r}", timeout)

    def _connected(self) -> Client:
        if self._client is None:
            if self._lost:
                raise MCPError(self._lost)
            raise MCPError(f"MCP server {self.server.label!r}: not connected")
        return self._client

    # -- requests -------------------------------------------------------------------------------------------

    async def list_tools(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """The server's tools in `mcp_list_tools` shape, filtered by `allowed_tools`; raises `MCPError`."""
        timeout = self.timeout if timeout is None else timeout
        client = self._connected()
        tools: list[dict[str, Any]] = []
        try:
            async with asyncio.timeout(timeout + _GUARD):  # the SDK's own request timeout fires first
                cursor: str | None = None
                for _ in range(_MAX_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)  # read_timeout_seconds set on the Client
                    tools.extend(_tool_dict(t) for t in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError:
            raise self._timeout("listing the tools of", timeout) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, SDKError) and exc.code == _REQUEST_TIMEOUT_CODE:
                raise self._timeout("listing the tools of", timeout) from None
            raise MCPError(
                f"listing the tools of MCP server {self.server.label!r} failed: {_describe(exc, self.server.url)}"
            ) from None
        self._annotations = {t["name"]: t["annotations"] for t in tools}
        return self.server.filter_tools(tools)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> tuple[str, bool]:
        """Call a tool: `(output text, is_error)`; raises `MCPError` on timeout / connection / protocol errors.

        A tool that `allowed_tools` hides is refused without contacting the server.
        """
        timeout = self.timeout if timeout is None else timeout
        label = self.server.label
        allowed = self.server.allowed_tools is None or name in self.server.allowed_tools
        if allowed and self.server.read_only is not None and name in self._annotations:
            allowed = self.server.allows(name, self._annotations[name])  # read-only filter, when listed here
        if not allowed:
            raise MCPError(f"tool {name!r} is not allowed on MCP server {label!r}")
        client = self._connected()
        try:
            async with asyncio.timeout(timeout + _GUARD):  # the SDK's own request timeout fires first
                result = await client.call_tool(name, dict(arguments or {}), read_timeout_seconds=timeout)
        except TimeoutError:
            raise self._timeout(f"MCP tool {name!r} on", timeout) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, SDKError) and exc.code == _REQUEST_TIMEOUT_CODE:
                raise self._timeout(f"MCP tool {name!r} on", timeout) from None
            raise MCPError(f"MCP tool {name!r} on server {label!r} failed: {_describe(exc, self.server.url)}") from None
        return result_to_text(result), bool(result.is_error)


# ---------------------------------------------------------------------------------------------------------
# One-shot helpers


def _timed_out(what: str, timeout: float) -> MCPError:
    return MCPError(f"{what} timed out after {timeout:g}s", timed_out=True)


def _remaining(deadline: float, loop: asyncio.AbstractEventLoop) -> float:
    return max(deadline - loop.time(), 0.001)


async def list_tools(server: MCPServer, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    """Connect, list the tools (`mcp_list_tools` shape, filtered by `allowed_tools`), disconnect.

    `timeout` bounds connecting plus listing; raises `MCPError`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        async with MCPSession(server, timeout=timeout) as session:
            return await session.list_tools(timeout=_remaining(deadline, loop))
    except MCPError as exc:
        if exc.timed_out:
            raise _timed_out(f"listing the tools of MCP server {server.label!r}", timeout) from None
        raise


async def call_tool(
    server: MCPServer, name: str, arguments: Mapping[str, Any] | None, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str, bool]:
    """Connect, call one tool, disconnect: `(output text, is_error)`.

    `timeout` bounds connecting plus the call; raises `MCPError` ("... timed out after Xs" on timeout).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        async with MCPSession(server, timeout=timeout) as session:
            return await session.call_tool(name, arguments, timeout=_remaining(deadline, loop))
    except MCPError as exc:
        if exc.timed_out:
            raise _timed_out(f"MCP tool {name!r} on server {server.label!r}", timeout) from None
        raise
