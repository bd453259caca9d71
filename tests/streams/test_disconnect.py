"""A client that goes away closes the upstream request at once: under any ASGI server (the app waits on
`http.disconnect`) and under the gateway's own protocol (the edge tells it, edge.py)."""

import contextlib

import httpx
import pytest

from tests.support.fake_chat import Sleep, Stream, text_stream


@pytest.fixture(scope="module", params=["asgi", "edge"])
def gateway(request, _upstream_server, tmp_path_factory):
    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    db = tmp_path_factory.mktemp("store") / "responses.db"
    options = {"http": "responses_gateway.edge:EdgeProtocol" if request.param == "edge" else "httptools"}
    with GatewayServer(Settings(upstream_url=_upstream_server.base_url, db=str(db)), **options) as server:
        yield server


def test_client_disconnect_closes_the_upstream_connection(gateway, upstream):
    # a slow model: a few tokens, then a long pause in which only the gateway could notice the client left
    frames = text_stream(["one ", "two "])
    upstream.enqueue(Stream(frames[:3] + [Sleep(30)] + frames[3:]))
    with httpx.Client(base_url=gateway.url, timeout=10) as client, \
            client.stream("POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if "output_text.delta" in line:
                break  # we have seen the stream flowing; now hang up
    assert upstream.wait_disconnect(timeout=5), "the upstream never saw the connection close"


def test_gateway_keeps_serving_after_a_disconnect(gateway, upstream, http):
    upstream.enqueue(Stream(text_stream(["a"])[:2] + [Sleep(30)]))
    with httpx.Client(base_url=gateway.url, timeout=10) as client, \
            client.stream("POST", "/v1/responses", json={"model": "m", "input": "x", "stream": True}) as resp:
        next(resp.iter_lines())
    assert upstream.wait_disconnect(timeout=5)
    upstream.enqueue(text_stream(["still here"]))
    assert http.post("/v1/responses", json={"model": "m", "input": "x"}).json()["output"][0]["content"][0][
        "text"] == "still here"


def _hang_up_after(gateway, body: dict, seconds: float) -> None:
    # the client gives up and closes its connection
    with httpx.Client(base_url=gateway.url, timeout=seconds) as client, contextlib.suppress(httpx.ReadTimeout):
        client.post("/v1/responses", json=body)


def test_client_leaving_a_non_streamed_request_closes_the_upstream(gateway, upstream):
    """A non-streamed request has no SSE sink watching the client: the handler itself must notice."""
    upstream.enqueue(Stream(text_stream(["one "])[:2] + [Sleep(30)]))
    _hang_up_after(gateway, {"model": "m", "input": "x"}, 1.0)
    assert upstream.wait_disconnect(timeout=5), "the upstream kept generating for nobody"


def test_client_leaving_before_the_upstream_answers_closes_the_upstream(gateway, upstream):
    """A streamed request still waiting for the upstream's headers: the SSE sink has not started yet."""
    upstream.enqueue(Stream(text_stream(["late"]), before_headers=30))
    _hang_up_after(gateway, {"model": "m", "input": "x", "stream": True}, 1.0)
    assert upstream.wait_disconnect(timeout=5), "the upstream kept the request open for nobody"


def test_client_leaving_a_compaction_closes_the_upstream(gateway, upstream):
    """POST /v1/responses/compact waits for a whole summary: the client leaving must stop it."""
    upstream.enqueue(Stream(text_stream(["a summary"])[:2] + [Sleep(30)]))
    with httpx.Client(base_url=gateway.url, timeout=1.0) as client, contextlib.suppress(httpx.ReadTimeout):
        client.post("/v1/responses/compact", json={"model": "m", "input": "a long conversation"})
    assert upstream.wait_disconnect(timeout=5), "the upstream kept summarising for nobody"
