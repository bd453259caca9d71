"""api/request.py: what every handler uses — the owner, bodies within bounds, JSON answers, the store and a
tool's own service or a 400 saying why not — behind a real Starlette app (in-process ASGI)."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from responses_gateway.api.errors import HANDLERS
from responses_gateway.api.request import json_response, owner, read_object, running, stored
from responses_gateway.config import Settings
from responses_gateway.door import Door, Limits
from responses_gateway.tools.frame import ToolServices, Unavailable

pytestmark = pytest.mark.anyio


class Counter:
    """A tool's service, as a kit's `serve` would make it."""

    def __init__(self) -> None:
        self.n = 1

    async def aclose(self) -> None:
        pass


async def echo(request: Request):
    return json_response({"owner": owner(request), "body": await read_object(request, 64)})


async def count(request: Request):
    return json_response({"n": running(request, "counter", Counter, "Counts").n})


async def files(request: Request):
    stored(request, "files")
    return json_response({})


def app(tools: ToolServices, owner_id: str = "") -> Starlette:
    application = Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/count", count),
                                    Route("/files", files)], exception_handlers=HANDLERS)
    settings = Settings()
    application.state.services = SimpleNamespace(settings=settings, door=Door(Limits.of(settings)), store=None,
                                                 tools=tools, toolbox=None)

    async def with_owner(scope, receive, send):
        scope.setdefault("state", {})["owner"] = owner_id
        await application(scope, receive, send)

    return with_owner


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def call(asgi, method: str, path: str, **kwargs) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://gw") as client:
        return await client.request(method, path, **kwargs)


async def test_a_json_object_body_and_the_callers_owner():
    response = await call(app(ToolServices(), "owner-1"), "POST", "/echo", content=b'{"a": 1}')
    assert response.json() == {"owner": "owner-1", "body": {"a": 1}}
    assert (await call(app(ToolServices()), "POST", "/echo", content=b"")).json()["body"] == {}


@pytest.mark.parametrize("body, status, code", [
    (b"{not json", 400, "invalid_json"),
    (b"[1, 2]", 400, "invalid_type"),
    (b'{"a": "' + b"x" * 100 + b'"}', 413, None),  # over this endpoint's own bound (64 bytes)
])
async def test_a_body_that_is_not_an_object_is_an_openai_error(body, status, code):
    response = await call(app(ToolServices()), "POST", "/echo", content=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if code:
        assert error["code"] == code


async def test_a_tools_service_or_a_400_saying_why():
    assert (await call(app(ToolServices({"counter": Counter()})), "GET", "/count")).json() == {"n": 1}
    off = ToolServices(unavailable={"counter": Unavailable("start with --counter")})
    response = await call(app(off), "GET", "/count")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Counts are unavailable on this gateway: start with --counter"
    assert response.json()["error"]["code"] == "unsupported_parameter"


async def test_no_store_is_a_400_naming_what_is_unavailable():
    response = await call(app(ToolServices()), "GET", "/files")
    assert response.status_code == 400 and "files are unavailable" in response.json()["error"]["message"]
