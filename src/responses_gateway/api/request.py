"""What every HTTP handler uses: the caller's owner id, the body read within bounds, a client that leaves,
JSON answers, and the app's services as a handler needs them — including a gateway-run tool's own service
for the tool's routes (tools/<tool>/*_api.py).

It sits low (docs/architecture.md, "Layers"): beside the edge and the front door, below the tools, so a
tool's HTTP API can use it without reaching the request path (respond.py) or the app.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

import orjson
from starlette.requests import Request
from starlette.responses import Response

from .. import offload
from ..config import Settings
from ..door import Door, too_large
from ..edge import HttpEdge, edge_of
from ..errors import APIError, invalid
from ..protocol.bounds import InputLayout
from ..protocol.request import CreateResponse, parse_request
from ..protocol.tools import Toolbox
from ..store import Store
from ..tools.frame import ToolServices
from .admission import body_of

T = TypeVar("T")


class Served(Protocol):
    """What a handler uses of the app's services (services.Services is one)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def door(self) -> Door: ...

    @property
    def store(self) -> Store | None: ...

    @property
    def tools(self) -> ToolServices: ...

    @property
    def toolbox(self) -> Toolbox: ...


def served(request: Request) -> Served:
    """The app's services (made at start-up, app.py)."""
    services: Served = request.app.state.services
    return services


def running(request: Request, name: str, kind: type[T], what: str) -> T:
    """The service of the gateway-run tool `name` (a `kind`), for the tool's own routes; where the tool does
    not run here, a 400 saying `what` is unavailable and why (`Unavailable.why`)."""
    tools = served(request).tools
    service = tools.named(name, kind)
    if service is None:
        why = tools.why(name)
        raise APIError(400, f"{what} are unavailable on this gateway: {why.why if why else 'not running'}",
                       code="unsupported_parameter")
    return service


def stored(request: Request, what: str) -> Store:
    """The store, or a 400 when the gateway keeps no state (`--db none`)."""
    store = served(request).store
    if store is None:
        raise APIError(400, f"This gateway keeps no state (it runs with --db none): {what} are unavailable.",
                       code="unsupported_parameter")
    return store


def owner(request: Request) -> str:
    """The caller's owner id (an HMAC of its API key: api/auth.py), "" without keys."""
    who: str = request.scope.get("state", {}).get("owner", "")
    return who


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json", headers=headers)


# -- bodies ---------------------------------------------------------------------------------------------

async def read_body(request: Request, limit: int | None = None) -> bytes | bytearray:
    """The body, refused with a 413 above `limit` bytes (an endpoint's own bound; --max-body-bytes always
    holds) and a 400 when it costs too much to parse."""
    raw, _ = await read_checked(request, limit)
    return raw


async def read_object(request: Request, limit: int | None = None) -> dict[str, Any]:
    """A JSON object body (an empty body is `{}`), or a 400."""
    raw = await read_body(request, limit)
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid("We could not parse the JSON body of your request.", None, "invalid_json") from None
    if not isinstance(body, dict):
        raise invalid("The body of your request must be a JSON object.", None, "invalid_type")
    return body


async def read_request(request: Request) -> CreateResponse:
    """The validated body of POST /v1/responses; a large one is parsed in a worker thread, its input items
    one by one (so no single step holds the GIL for long)."""
    raw, layout = await read_checked(request)
    return await offload.run(parse_request, raw, layout if offload.is_large() else None)


async def read_checked(request: Request, limit: int | None = None) -> tuple[bytes | bytearray, InputLayout | None]:
    door = served(request).door
    raw = body_of(request.scope)  # read before admission (api/admission.py)
    if raw is None:  # none, or a multipart body its endpoint reads as it comes
        raw = await read_streamed(request, door.limits.max_body_bytes if limit is None else limit)
    elif limit is not None and len(raw) > limit:
        raise too_large(limit)
    offload.mark(len(raw))  # what this request's items cost is paid in a worker thread too (offload.py)
    layout = await offload.run(door.scan, raw)
    return raw, layout


async def read_streamed(request: Request, limit: int) -> bytearray:
    """Appended chunk by chunk as it arrives: one join of tens of MB at the end would be a single step of
    tens of milliseconds on the event loop (most of it page faults on the fresh memory)."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise too_large(limit)
        body += chunk
    return body


# -- a client that leaves -------------------------------------------------------------------------------

class ClientGone(Exception):
    """The client hung up while the gateway was still working for it."""


@contextlib.asynccontextmanager
async def cancelled_if_client_leaves(request: Request) -> AsyncIterator[None]:
    """Run the block in this task, cancelled the moment the client goes away: waiting for the upstream's
    headers, or for a whole non-streamed answer, must not keep a model generating for nobody (once streaming,
    the SSE sink watches). The work stays in this task, so nothing waits for a task switch. Under the edge
    (edge.py) it learns of the departure from the connection itself; elsewhere a task waits on `receive`."""
    task = asyncio.current_task()
    assert task is not None
    gone = False

    def left() -> None:
        nonlocal gone
        gone = True
        task.cancel()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        left()

    edge = edge_of(request.scope)
    watcher = None
    if isinstance(edge, HttpEdge):  # the edge tells (no task waiting on `receive`)
        if edge.lost:
            raise ClientGone
        edge.on_lost = left
    else:
        watcher = asyncio.create_task(watch())
    try:
        yield
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()
        raise ClientGone from None
    finally:
        if watcher is not None:
            watcher.cancel()
        elif isinstance(edge, HttpEdge):
            edge.on_lost = None
