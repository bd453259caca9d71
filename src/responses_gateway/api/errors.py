"""Errors on the wire: every failure a client sees is `{"error": {message, type, param, code}}` with its status.

The errors themselves are data (`responses_gateway.errors`); this module only renders them as responses,
and holds the application's exception handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ..errors import SERVER_ERROR, APIError

log = logging.getLogger("responses_gateway")


def error_response(status: int, body: dict[str, Any], headers: dict[str, Any] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def render(exc: APIError) -> Response:
    return error_response(exc.status, exc.body(), exc.headers() or None)


async def on_api_error(request: Request, exc: APIError) -> Response:
    """Every `APIError` that reaches the app, upstream errors before the stream included."""
    return render(exc)


async def on_http_error(request: Request, exc: HTTPException) -> Response:
    message = f"Invalid URL ({request.method} {request.url.path})" if exc.status_code in (404, 405) \
        else str(exc.detail)
    return render(APIError(exc.status_code, message, code=None))


async def on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return render(SERVER_ERROR)


async def on_client_gone(request: Request, exc: ClientDisconnect) -> Response:
    """The client left (or was closed as too slow) while its body was being read: nobody reads an answer."""
    return Response(status_code=499)


HANDLERS: dict[Any, Callable[..., Awaitable[Response]]] = {
    APIError: on_api_error, HTTPException: on_http_error, ClientDisconnect: on_client_gone, Exception: on_unexpected,
}
