"""A streamed response whose upstream is slow to answer at all (issue 25.7): its SSE starts after
`--sse-keepalive` seconds with a keep-alive comment, so the client gets bytes while the model server thinks;
a refusal that comes after that is reported in the stream, as OpenAI reports a late refusal, while one
that comes within the grace keeps its own HTTP status. The fake upstream holds back its headers for real."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx
import pytest

from responses_gateway.config import Settings
from tests.support.fake_chat import Stream, error_json, text_stream
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream

GRACE = 0.5  # --sse-keepalive: the grace before the stream starts, then the keep-alive period


@pytest.fixture
def http(upstream, tmp_path) -> Iterator[httpx.Client]:
    settings = Settings(upstream_url=upstream.base_url, db=str(tmp_path / "rg.db"), sse_keepalive=GRACE)
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        yield client


def late(script: Stream) -> Stream:
    script.before_headers = 6 * GRACE  # answers long after the grace
    return script


def test_a_stream_starts_with_keep_alives_while_the_upstream_is_slow_to_answer(http, upstream):
    upstream.enqueue(late(Stream(text_stream(["at ", "last"]))))
    with http.stream("POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(lines) == ": keep-alive"  # before any event: the upstream has not answered yet
        rest = "\n".join(lines)
    result = check_stream(": keep-alive\n\n" + rest + "\n")
    assert result.terminal["type"] == "response.completed" and result.text == "at last"
    assert http.get(f"/v1/responses/{result.response['id']}").json()["status"] == "completed"


def test_a_refusal_after_the_grace_is_a_failed_response_in_the_stream(http, upstream):
    refusal = error_json(404, "The model `nope` does not exist.", code="model_not_found")
    upstream.enqueue(late(Stream([json.dumps(refusal.body)], status=404, headers={"content-type": "application/json"})))
    r = http.post("/v1/responses", json={"model": "nope", "input": "x", "stream": True})
    assert r.status_code == 200 and r.text.startswith(": keep-alive\n\n")
    result = check_stream(r.content)
    assert [e["type"] for e in result.events] == ["response.created", "response.in_progress", "error",
                                                  "response.failed"]
    error = result.events[2]  # what the HTTP 404 would have said
    assert error["code"] == "model_not_found" and error["error"]["type"] == "invalid_request_error"
    assert "does not exist" in error["message"] and "does not exist" in result.response["error"]["message"]
    assert http.get(f"/v1/responses/{result.response['id']}").status_code == 404  # nothing stored


def test_a_refusal_within_the_grace_keeps_its_http_status(http, upstream):
    upstream.enqueue(error_json(404, "The model `nope` does not exist.", code="model_not_found"))
    r = http.post("/v1/responses", json={"model": "nope", "input": "x", "stream": True})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_a_client_that_leaves_before_the_upstream_answers_closes_it(http, upstream):
    upstream.enqueue(Stream(text_stream(["never read"]), before_headers=30))
    with contextlib.suppress(httpx.ReadTimeout), \
            http.stream("POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}) as r:
        assert next(r.iter_lines()) == ": keep-alive"  # the stream has started; then the client leaves
    assert upstream.wait_disconnect(timeout=5), "the upstream kept the request open for nobody"
