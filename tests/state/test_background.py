"""Background responses in one gateway process, on SQLite and PostgreSQL: queued → in_progress → final,
resumable streams (`starting_after`), cancel, the concurrency cap and key isolation. The fake upstream
paces its chunks, so there is a "mid-stream" to resume or cancel in."""

from __future__ import annotations

import time

import httpx
import openai
import orjson
import pytest

from tests.helpers import sdk_validate
from tests.support import backends
from tests.support.fake_chat import Stream, text_stream
from tests.support.schema import validate_event
from tests.support.stream_check import check_stream

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

MODEL = "fake-model"
WORDS = [f"w{k} " for k in range(30)]
FAST = {"background_poll": 0.05, "lease_timeout": 1.0}


def slow(request) -> Stream:
    return Stream(text_stream(WORDS), delay=0.05)


def events_of(body: bytes) -> list[dict]:
    return [orjson.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: {")]


def wait_status(http: httpx.Client, rid: str, statuses: tuple[str, ...], timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        got = http.get(f"/v1/responses/{rid}").json()
        if got["status"] in statuses or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def wait_seq(http: httpx.Client, rid: str, at_least: int) -> None:
    """Until the response's log has reached sequence number `at_least` (read from a resumed stream)."""
    with http.stream("GET", f"/v1/responses/{rid}", params={"stream": "true"}) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: {") and orjson.loads(line[6:])["sequence_number"] >= at_least:
                return


def start(http: httpx.Client, **extra) -> dict:
    resp = http.post("/v1/responses", json={"model": MODEL, "input": "go", "background": True, **extra})
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.fixture
def gw(start_gateway, upstream):
    upstream.default = slow
    server = start_gateway(**FAST)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


def test_queued_then_in_progress_then_completed(gw, upstream):
    queued = start(gw)
    assert queued["status"] == "queued" and queued["background"] is True and queued["output"] == []
    assert wait_status(gw, queued["id"], ("in_progress", "completed"))["status"] in ("in_progress", "completed")
    final = wait_status(gw, queued["id"], ("completed",))
    assert final["status"] == "completed"
    assert final["output"][0]["content"][0]["text"] == "".join(WORDS)
    assert final["background"] is True


def test_streamed_background_starts_queued_and_replays_whole(gw):
    resp = gw.post("/v1/responses", json={"model": MODEL, "input": "go", "background": True, "stream": True})
    result = check_stream(resp.content)
    first = result.events[0]
    assert first["type"] == "response.created" and first["response"]["status"] == "queued"
    assert result.terminal["type"] == "response.completed"
    for event in result.events:
        validate_event(event)
        sdk_validate(event)
    rid = result.response["id"]
    # after the end, the whole log replays from event 0, and from any cursor
    again = gw.get(f"/v1/responses/{rid}", params={"stream": "true"})
    assert events_of(again.content) == result.events
    tail = gw.get(f"/v1/responses/{rid}", params={"stream": "true", "starting_after": 10})
    assert events_of(tail.content) == result.events[11:]


def test_resume_after_the_terminal_event_is_an_empty_stream(gw):
    """`starting_after` the terminal event's number (or beyond it) once the response has ended: an empty
    stream, closed at once (it answered a second terminal event after a few polls)."""
    resp = gw.post("/v1/responses", json={"model": MODEL, "input": "go", "background": True, "stream": True})
    result = check_stream(resp.content)
    rid, end = result.response["id"], result.terminal["sequence_number"]
    for after in (end, end + 3):
        tail = gw.get(f"/v1/responses/{rid}", params={"stream": "true", "starting_after": after})
        assert tail.status_code == 200 and tail.headers["content-type"].startswith("text/event-stream")
        assert events_of(tail.content) == []
    # the event before the terminal one still gives exactly the terminal one
    last = gw.get(f"/v1/responses/{rid}", params={"stream": "true", "starting_after": end - 1})
    assert events_of(last.content) == [result.terminal]


def test_resume_mid_stream_has_no_gap_and_no_duplicate(gw):
    rid = start(gw)["id"]
    wait_seq(gw, rid, 8)
    resumed = gw.get(f"/v1/responses/{rid}", params={"stream": "true", "starting_after": 5})
    events = events_of(resumed.content)
    seqs = [e["sequence_number"] for e in events]
    assert seqs == list(range(6, 6 + len(seqs)))
    assert events[-1]["type"] == "response.completed"
    whole = check_stream(gw.get(f"/v1/responses/{rid}", params={"stream": "true"}).content)
    assert whole.events[6:] == events
    assert whole.response["output"][0]["content"][0]["text"] == "".join(WORDS)


def test_a_client_that_leaves_does_not_stop_the_response(gw, upstream):
    with gw.stream("POST", "/v1/responses",
                   json={"model": MODEL, "input": "go", "background": True, "stream": True}) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                rid = orjson.loads(line[6:])["response"]["id"]
                break
    assert wait_status(gw, rid, ("completed",))["status"] == "completed"
    assert upstream.disconnects == 0


def test_cancel_stops_the_upstream_and_ends_every_follower(gw, upstream):
    rid = start(gw)["id"]
    wait_seq(gw, rid, 5)
    cancelled = gw.post(f"/v1/responses/{rid}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    body = cancelled.json()
    assert body["status"] == "cancelled" and body["id"] == rid
    assert upstream.wait_disconnect(timeout=5), "the upstream request was not closed"
    assert gw.get(f"/v1/responses/{rid}").json() == body
    assert gw.post(f"/v1/responses/{rid}/cancel").json() == body  # repeated: the same final object
    result = check_stream(gw.get(f"/v1/responses/{rid}", params={"stream": "true"}).content)
    assert result.terminal["type"] == "response.incomplete"
    assert result.response["status"] == "cancelled"
    sdk_validate(result.terminal)


def test_a_cancelled_background_response_is_measured_like_any_other(gw):
    """Its duration and terminal status are recorded once, by the one ending (before, a cancel skipped them)."""
    from prometheus_client import REGISTRY

    def sample(name: str, labels: dict) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    durations = ("responses_gateway_response_duration_seconds_count", {"route": "*", "status": "cancelled"})
    statuses = ("responses_gateway_responses_total", {"status": "cancelled"})
    before = sample(*durations), sample(*statuses)
    rid = start(gw)["id"]
    wait_seq(gw, rid, 5)
    assert gw.post(f"/v1/responses/{rid}/cancel").json()["status"] == "cancelled"
    assert (sample(*durations), sample(*statuses)) == (before[0] + 1, before[1] + 1)


def test_cancel_of_finished_or_foreground_responses(gw):
    rid = start(gw)["id"]
    done = wait_status(gw, rid, ("completed",))
    assert gw.post(f"/v1/responses/{rid}/cancel").json() == done
    fg = gw.post("/v1/responses", json={"model": MODEL, "input": "go"}).json()
    refused = gw.post(f"/v1/responses/{fg['id']}/cancel")
    assert refused.status_code == 400
    assert "background" in refused.json()["error"]["message"]
    streamed = gw.get(f"/v1/responses/{fg['id']}", params={"stream": "true"})
    assert streamed.status_code == 400 and streamed.json()["error"]["param"] == "stream"


def test_background_requires_store(gw):
    resp = gw.post("/v1/responses", json={"model": MODEL, "input": "go", "background": True, "store": False})
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "background"


def test_cap_on_concurrent_background_jobs(start_gateway, upstream):
    upstream.default = slow
    server = start_gateway(max_background=1, **FAST)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        first = start(http)
        over = http.post("/v1/responses", json={"model": MODEL, "input": "go", "background": True})
        assert over.status_code == 429
        error = over.json()["error"]
        assert error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
        assert len(upstream.requests) == 1  # refused before any upstream call
        wait_status(http, first["id"], ("completed",))
        start(http)


def test_other_keys_get_404(start_gateway, upstream):
    upstream.default = slow
    server = start_gateway(api_keys="key-a,key-b", **FAST)
    a = httpx.Client(base_url=server.url, timeout=30, headers={"authorization": "Bearer key-a"})
    b = httpx.Client(base_url=server.url, timeout=30, headers={"authorization": "Bearer key-b"})
    with a, b:
        rid = start(a)["id"]
        assert b.get(f"/v1/responses/{rid}").status_code == 404
        assert b.get(f"/v1/responses/{rid}", params={"stream": "true"}).status_code == 404
        assert b.post(f"/v1/responses/{rid}/cancel").status_code == 404
        assert wait_status(a, rid, ("completed",))["status"] == "completed"


def test_openai_sdk_resumes(gw):
    client = openai.OpenAI(base_url=str(gw.base_url).rstrip("/") + "/v1", api_key="k", max_retries=0)
    rid = client.responses.create(model=MODEL, input="go", background=True).id
    wait_seq(gw, rid, 4)
    events = list(client.responses.retrieve(rid, stream=True, starting_after=3))
    assert [e.sequence_number for e in events] == list(range(4, 4 + len(events)))
    assert events[-1].type == "response.completed"
    with client.responses.stream(response_id=rid, starting_after=3) as stream:
        seen = [e.sequence_number for e in stream]
        final = stream.get_final_response()
    assert seen == [e.sequence_number for e in events]
    assert final.output_text == "".join(WORDS)


def test_chaining_waits_for_the_end(gw, upstream):
    rid = start(gw)["id"]
    early = gw.post("/v1/responses", json={"model": MODEL, "input": "next", "previous_response_id": rid})
    assert early.status_code == 400
    assert early.json()["error"]["code"] == "previous_response_not_finished"
    wait_status(gw, rid, ("completed",))
    upstream.default = None
    upstream.enqueue(text_stream(["ok"]))
    later = gw.post("/v1/responses", json={"model": MODEL, "input": "next", "previous_response_id": rid})
    assert later.status_code == 200, later.text
    assert upstream.requests[-1].body["messages"][-3:] == [
        {"role": "user", "content": "go"}, {"role": "assistant", "content": "".join(WORDS)},
        {"role": "user", "content": "next"}]


def test_expired_event_log_is_a_clear_error(start_gateway, upstream, backend):
    upstream.default = lambda request: Stream(text_stream(["short"]))
    server = start_gateway(event_retention_hours=0.0003, **FAST)  # about a second
    with httpx.Client(base_url=server.url, timeout=30) as http:
        rid = start(http)["id"]
        wait_status(http, rid, ("completed",))
        assert http.get(f"/v1/responses/{rid}", params={"stream": "true"}).status_code == 200
        time.sleep(1.2)
        backends.run_cli("db", "purge", "--db", backend.db, "--event-retention-hours", "0.0003")
        gone = http.get(f"/v1/responses/{rid}", params={"stream": "true"})
        assert gone.status_code == 400
        assert gone.json()["error"]["code"] == "event_log_expired"
        assert http.get(f"/v1/responses/{rid}").json()["status"] == "completed"


def test_purge_removes_event_logs_past_their_retention(backend):
    import asyncio

    from responses_gateway.store import open_store

    async def go() -> tuple[int, int]:
        store = open_store(backend.db)
        await store.open()
        try:
            await store.upgrade()
            await store.append_events([("resp_x", 0, 1, "event: a\n\nevent: b\n\n")])
            await store.append_events([("resp_x", 0, 1, "event: a\n\nevent: b\n\n")])  # a duplicate is ignored
            kept = await store.last_event("resp_x")
            await store.purge(event_retention=3600)
            still = await store.last_event("resp_x")
            await store.purge(event_retention=-1)
            return kept, still, await store.last_event("resp_x")
        finally:
            await store.close()

    assert asyncio.run(go()) == (1, 1, -1)
