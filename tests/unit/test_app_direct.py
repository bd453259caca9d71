"""POST /v1/responses past starlette's router (app.Gateway, app.Endpoint): the same middleware and the same
exception handlers as every other route, so the same answers."""

import httpx
import pytest
from starlette.testclient import TestClient

from responses_gateway import app as app_module
from responses_gateway.config import Settings
from responses_gateway.errors import APIError


def _post(app, path: str = "/v1/responses", headers: dict | None = None) -> httpx.Response:
    with TestClient(app, raise_server_exceptions=False) as client:  # the lifespan runs (the owners of keys)
        return client.post(path, json={"model": "m", "input": "x"}, headers=headers or {})


@pytest.fixture
def failing(monkeypatch):
    """The app with POST /v1/responses raising `exc`."""
    def make(exc: Exception, **settings):
        async def endpoint(request):
            await request.body()
            raise exc
        monkeypatch.setattr(app_module, "create_response", endpoint)
        return app_module.create_app(Settings(upstream_url="http://127.0.0.1:9/v1", db="none", **settings))
    return make


def test_an_api_error_is_answered_by_its_handler(failing):
    r = _post(failing(APIError(409, "taken", code="conflict")))
    assert r.status_code == 409
    assert r.json() == {"error": {"message": "taken", "type": "invalid_request_error", "param": None,
                                  "code": "conflict"}}


def test_an_unexpected_error_is_a_500_in_openais_shape(failing, caplog):
    r = _post(failing(RuntimeError("boom")))
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    assert "unhandled error on POST /v1/responses" in caplog.text


def test_the_middleware_still_runs(failing, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("sk-right\n")
    app = failing(APIError(409, "taken", code="conflict"), api_keys_file=str(keys))
    assert _post(app).status_code == 401  # KeyAuth, before the endpoint
    r = _post(app, headers={"authorization": "Bearer sk-wrong"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "invalid_request_error"


def test_health_and_the_routes_around_it():
    app = app_module.create_app(Settings(upstream_url="http://127.0.0.1:9/v1", db="none"))
    with TestClient(app) as client:
        assert client.get("/health").json() == {"status": "ok"}
        assert client.head("/health").status_code == 200  # by the router, as before
        r = client.get("/v1/responses")  # another method on the direct path: the router's 405, in OpenAI's shape
        assert r.status_code == 405 and r.json()["error"]["message"] == "Invalid URL (GET /v1/responses)"
