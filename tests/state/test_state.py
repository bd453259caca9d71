"""Server-side state through the real gateway, on SQLite and on PostgreSQL, with the official openai SDK:
previous_response_id chains, retrieve / delete / input_items, item_reference, API-key tenancy, store
failures, retention and the `db` command. OpenAI's semantics are the reference throughout."""

from __future__ import annotations

import logging
import re
import time

import httpx
import openai
import orjson
import pytest

from tests.helpers import create, stream
from tests.support import backends
from tests.support.fake_chat import Stream, reasoning_then_text, sse_chunks, text_stream, tool_calls_stream

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

MODEL = "fake-model"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False},
    "strict": True,
}


@pytest.fixture
def gw(start_gateway):
    return start_gateway()


@pytest.fixture
def oai(gw):
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0, timeout=20)


@pytest.fixture
def web(gw):
    with httpx.Client(base_url=gw.url, timeout=20) as client:
        yield client


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str | None, **extra) -> dict:
    return {"role": "assistant", "content": text, **extra}


def sent_messages(upstream, i: int) -> list[dict]:
    return upstream.requests[i].body["messages"]


def assert_previous_not_found(exc: openai.APIStatusError, response_id: str) -> None:
    assert exc.status_code == 400, exc
    assert exc.code == "previous_response_not_found", exc.body
    assert exc.param == "previous_response_id", exc.body
    assert exc.type == "invalid_request_error", exc.body
    assert response_id in exc.message


def metric(web: httpx.Client, name: str) -> float:
    text = web.get("/metrics").text
    found = re.search(rf"^responses_gateway_{name} (\S+)$", text, re.M)
    assert found, text
    return float(found.group(1))


# --------------------------------------------------------------------------- chains


def test_chain_mixes_text_reasoning_and_a_function_call_round_trip(oai, upstream):
    # turn 1: instructions, reasoning + text, not streamed
    upstream.enqueue(reasoning_then_text(["Two plus ", "two."], ["4", "."]))
    r1 = oai.responses.create(model=MODEL, instructions="Be terse.", input="What is 2+2?")
    assert [i.type for i in r1.output] == ["reasoning", "message"]

    # turn 2: no instructions, a tool; the model reasons and calls it (streamed)
    upstream.enqueue(sse_chunks([
        {"reasoning_content": "Need the weather."},
        {"tool_calls": [{"index": 0, "id": "call_w1", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
    ], finish_reason="tool_calls"))
    with oai.responses.stream(model=MODEL, input="Weather in Paris?", tools=[WEATHER],
                              previous_response_id=r1.id) as s:
        r2 = s.get_final_response()
    assert [i.type for i in r2.output] == ["reasoning", "function_call"]
    call = r2.output[1]
    assert (call.call_id, call.name, call.arguments) == ("call_w1", "get_weather", '{"city": "Paris"}')
    assert r2.previous_response_id == r1.id and r2.instructions is None

    # turn 3: only the function's output, chained
    upstream.enqueue(text_stream(["Sunny", ", 21°C."]))
    r3 = oai.responses.create(model=MODEL, previous_response_id=r2.id, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21}'}])
    assert r3.output_text == "Sunny, 21°C."
    assert r3.previous_response_id == r2.id and r3.tools == []

    # turn 4: new instructions replace nothing inherited; streamed
    upstream.enqueue(text_stream(["Merci."]))
    with oai.responses.stream(model=MODEL, instructions="Answer in French.", input="Thanks!",
                              previous_response_id=r3.id) as s:
        r4 = s.get_final_response()
    assert r4.output_text == "Merci."

    q1, a1 = user("What is 2+2?"), assistant("4.", reasoning_content="Two plus two.")
    q2 = user("Weather in Paris?")
    a2 = assistant(None, reasoning_content="Need the weather.", tool_calls=[
        {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}])
    tool = {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp": 21}'}
    a3 = assistant("Sunny, 21°C.")

    assert len(upstream.requests) == 4
    assert sent_messages(upstream, 0) == [{"role": "system", "content": "Be terse."}, q1]
    # instructions are not inherited: no system message on turn 2
    assert sent_messages(upstream, 1) == [q1, a1, q2]
    assert [t["function"]["name"] for t in upstream.requests[1].body["tools"]] == ["get_weather"]
    assert sent_messages(upstream, 2) == [q1, a1, q2, a2, tool]
    # tools are not inherited either
    assert "tools" not in upstream.requests[2].body and "tool_choice" not in upstream.requests[2].body
    assert sent_messages(upstream, 3) == [{"role": "system", "content": "Answer in French."}, q1, a1, q2, a2, tool,
                                          a3, user("Thanks!")]


def test_chain_the_moment_response_completed_arrives(gw, oai, upstream):
    """The stored response is there before the terminal event goes out: chain while [DONE] is still unread."""
    upstream.enqueue(text_stream(["first ", "answer"]), text_stream(["second answer"]),
                     text_stream(["third answer"]))
    chained = None
    rest = []
    with httpx.Client(base_url=gw.url, timeout=20) as web, web.stream(
            "POST", "/v1/responses", json={"model": MODEL, "input": "one", "stream": True}) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if chained is not None:
                rest.append(line)
                continue
            if not line.startswith("data: "):
                continue
            event = orjson.loads(line[6:])
            if event["type"] == "response.completed":
                # the first stream is still open: chain right now
                chained = oai.responses.create(model=MODEL, input="two",
                                               previous_response_id=event["response"]["id"])
    assert chained is not None and chained.output_text == "second answer"
    assert "data: [DONE]" in rest

    # and with the SDK's stream helper, chaining right after get_final_response()
    with oai.responses.stream(model=MODEL, input="three", previous_response_id=chained.id) as s:
        third = s.get_final_response()
    assert third.output_text == "third answer"
    assert sent_messages(upstream, 1) == [user("one"), assistant("first answer"), user("two")]
    assert sent_messages(upstream, 2) == [user("one"), assistant("first answer"), user("two"),
                                          assistant("second answer"), user("three")]


def test_retrieve_returns_the_terminal_event_object(web, oai, upstream):
    upstream.enqueue(reasoning_then_text(["Hmm."], ["Hello", " there"]), text_stream(["Plain."]))
    streamed = stream(web, {"model": MODEL, "input": "hi", "metadata": {"k": "v"}, "instructions": "Hi!"})
    assert streamed.terminal["type"] == "response.completed"
    got = web.get(f"/v1/responses/{streamed.response['id']}")
    assert got.status_code == 200
    assert got.json() == streamed.response

    made = create(web, {"model": MODEL, "input": "hello", "temperature": 0.5})
    got = web.get(f"/v1/responses/{made['id']}")
    assert got.status_code == 200 and got.json() == made

    # the SDK's typed view agrees too
    sdk = oai.responses.retrieve(streamed.response["id"])
    assert sdk.output_text == "Hello there" and sdk.status == "completed"
    assert sdk.model_dump(mode="json", exclude_unset=True) == streamed.response


def test_delete_then_everything_is_not_found(web, oai, upstream):
    upstream.enqueue(text_stream(["kept?"]))
    r = oai.responses.create(model=MODEL, input="to delete")

    resp = web.delete(f"/v1/responses/{r.id}")
    assert resp.status_code == 200
    assert resp.json() == {"id": r.id, "object": "response.deleted", "deleted": True}

    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.delete(r.id)
    assert web.delete(f"/v1/responses/{r.id}").status_code == 404
    with pytest.raises(openai.NotFoundError):
        oai.responses.input_items.list(r.id)
    with pytest.raises(openai.BadRequestError) as exc:
        oai.responses.create(model=MODEL, input="more", previous_response_id=r.id)
    assert_previous_not_found(exc.value, r.id)
    assert len(upstream.requests) == 1  # refused before reaching the upstream


def test_unstored_and_unknown_responses_cannot_be_chained(oai, upstream):
    upstream.enqueue(text_stream(["not kept"]), text_stream(["kept"]), text_stream(["chained, not kept"]))
    unstored = oai.responses.create(model=MODEL, input="ephemeral", store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(unstored.id)
    for bad in (unstored.id, "resp_" + "0" * 48, "nonsense"):
        with pytest.raises(openai.BadRequestError) as exc:
            oai.responses.create(model=MODEL, input="next", previous_response_id=bad)
        assert_previous_not_found(exc.value, bad)

    # a store:false request may itself chain off a stored one; it is then not kept
    kept = oai.responses.create(model=MODEL, input="remember me")
    chained = oai.responses.create(model=MODEL, input="and?", previous_response_id=kept.id, store=False)
    assert chained.output_text == "chained, not kept"
    assert sent_messages(upstream, 2) == [user("remember me"), assistant("kept"), user("and?")]
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(chained.id)
    with pytest.raises(openai.BadRequestError) as exc:
        oai.responses.create(model=MODEL, input="next", previous_response_id=chained.id)
    assert_previous_not_found(exc.value, chained.id)
    assert len(upstream.requests) == 3


def test_chain_through_a_deleted_response_keeps_its_items(oai, upstream):
    upstream.enqueue(text_stream(["answer A"]), text_stream(["answer B"]), text_stream(["answer C"]))
    a = oai.responses.create(model=MODEL, input="question A")
    b = oai.responses.create(model=MODEL, input="question B", previous_response_id=a.id)
    oai.responses.delete(a.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(a.id)
    c = oai.responses.create(model=MODEL, input="question C", previous_response_id=b.id)
    assert c.output_text == "answer C"
    assert sent_messages(upstream, 2) == [user("question A"), assistant("answer A"), user("question B"),
                                          assistant("answer B"), user("question C")]
    assert oai.responses.retrieve(b.id).output_text == "answer B"


# --------------------------------------------------------------------------- input_items

SEVEN_ITEMS = [
    {"type": "message", "role": "developer", "content": "Be kind."},
    {"role": "user", "content": "first"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}],
     "id": "msg_client_given_1"},
    {"type": "message", "role": "assistant", "id": "msg_client_given_2", "status": "completed",
     "content": [{"type": "output_text", "text": "an earlier answer", "annotations": []}]},
    {"type": "function_call", "call_id": "call_lookup", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_lookup", "output": "found it"},
    {"role": "user", "content": "third"},
]


def _seven(oai, upstream) -> str:
    """The id of a response whose input is SEVEN_ITEMS."""
    upstream.enqueue(text_stream(["ok"]))
    return oai.responses.create(model=MODEL, input=SEVEN_ITEMS).id


def _page(web, response_id: str, **params) -> dict:
    resp = web.get(f"/v1/responses/{response_id}/input_items", params=params)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"object", "data", "first_id", "last_id", "has_more"}
    assert body["object"] == "list"
    data = body["data"]
    assert body["first_id"] == (data[0]["id"] if data else None)
    assert body["last_id"] == (data[-1]["id"] if data else None)
    return body


def test_input_items_list_shape_ids_and_order(web, oai, upstream):
    rid = _seven(oai, upstream)
    asc = _page(web, rid, order="asc")
    items = asc["data"]
    assert asc["has_more"] is False and len(items) == 7
    assert [i["type"] for i in items] == ["message", "message", "message", "message", "function_call",
                                         "function_call_output", "message"]
    assert [i.get("role") for i in items] == ["developer", "user", "user", "assistant", None, None, "user"]
    # items sent with an id keep it, the others get one; ids are unique
    assert items[2]["id"] == "msg_client_given_1" and items[3]["id"] == "msg_client_given_2"
    ids = [i["id"] for i in items]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 7
    assert items[0]["id"].startswith("msg_") and items[1]["id"].startswith("msg_") and items[6]["id"].startswith("msg_")
    assert all(i["status"] == "completed" for i in items if i["type"] == "message")
    assert items[1]["content"] == [{"type": "input_text", "text": "first"}]
    assert items[4]["call_id"] == "call_lookup" and items[5]["output"] == "found it"

    # default order is descending; the ids are stable from one listing to the next
    desc = _page(web, rid)
    assert desc["data"] == list(reversed(items)) and desc["has_more"] is False

    # the SDK lists them (typed) and pages through them itself with `after`
    listed = [i.id for i in oai.responses.input_items.list(rid, order="asc", limit=2)]
    assert listed == ids
    first = oai.responses.input_items.list(rid, order="asc", limit=2)
    assert [i.id for i in first.data] == ids[:2] and first.has_more is True


def test_input_items_pagination_with_after(web, oai, upstream):
    rid = _seven(oai, upstream)
    ids = [i["id"] for i in _page(web, rid, order="asc")["data"]]
    for order, expected in (("asc", ids), ("desc", list(reversed(ids)))):
        pages, after = [], None
        while True:
            params = {"order": order, "limit": 3, **({"after": after} if after else {})}
            page = _page(web, rid, **params)
            pages.append(([i["id"] for i in page["data"]], page["has_more"]))
            if not page["has_more"]:
                break
            after = page["last_id"]
            assert len(pages) < 5
        assert pages == [(expected[0:3], True), (expected[3:6], True), (expected[6:7], False)], order
    assert _page(web, rid, limit=7)["has_more"] is False
    assert _page(web, rid, limit=6)["has_more"] is True
    assert _page(web, rid, limit=1, order="asc")["data"][0]["id"] == ids[0]
    assert [i["id"] for i in _page(web, rid, order="asc", after=ids[5])["data"]] == ids[6:]
    assert _page(web, rid, order="asc", after=ids[6])["data"] == []


def test_input_items_before_gives_the_previous_page(web, oai, upstream):
    """`before` is the previous page (the items just before the cursor), as in OpenAI's cursor lists."""
    rid = _seven(oai, upstream)
    ids = [i["id"] for i in _page(web, rid, order="asc")["data"]]
    page = _page(web, rid, order="asc", limit=3, before=ids[3])
    assert ([i["id"] for i in page["data"]], page["has_more"]) == (ids[0:3], False)
    # paging backwards from the last page: [6] → [3, 4, 5] → [0, 1, 2]
    page = _page(web, rid, order="asc", limit=3, before=ids[6])
    assert ([i["id"] for i in page["data"]], page["has_more"]) == (ids[3:6], True)
    desc = list(reversed(ids))
    page = _page(web, rid, order="desc", limit=3, before=desc[6])
    assert ([i["id"] for i in page["data"]], page["has_more"]) == (desc[3:6], True)


def test_input_items_of_a_chained_response_are_its_own_input_only(oai, upstream):
    upstream.enqueue(text_stream(["a1"]), text_stream(["a2"]))
    r1 = oai.responses.create(model=MODEL, input="q1")
    r2 = oai.responses.create(model=MODEL, input=[user("q2"), user("q2 again")], previous_response_id=r1.id)
    items = oai.responses.input_items.list(r2.id, order="asc").data
    assert [(i.type, i.role, i.content[0].text) for i in items] == [("message", "user", "q2"),
                                                                    ("message", "user", "q2 again")]
    (only,) = oai.responses.input_items.list(r1.id).data
    assert only.content[0].text == "q1" and only.id.startswith("msg_")


def test_input_items_bad_parameters(web, oai, upstream):
    upstream.enqueue(text_stream(["x"]))
    r = oai.responses.create(model=MODEL, input="x")
    for params, param in (({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"order": "sideways"}, "order")):
        resp = web.get(f"/v1/responses/{r.id}/input_items", params=params)
        assert resp.status_code == 400, params
        assert resp.json()["error"]["param"] == param
    resp = web.get("/v1/responses/resp_unknown/input_items")
    assert resp.status_code == 404 and resp.json()["error"]["type"] == "invalid_request_error"


# --------------------------------------------------------------------------- item_reference, include


def test_item_reference_resolves_stored_items(oai, upstream):
    upstream.enqueue(
        reasoning_then_text(["Thinking."], ["Bonjour!"]),
        tool_calls_stream([("call_ref", "get_weather", ['{"city": "Oslo"}'])]),
        text_stream(["ok"]),
    )
    greeting = oai.responses.create(model=MODEL, input=[
        {"type": "message", "role": "user", "content": "Say hi in French", "id": "msg_client_ref"}])
    msg_id = greeting.output[1].id
    weather = oai.responses.create(model=MODEL, input="Weather in Oslo?", tools=[WEATHER], store=True)
    fc_id = weather.output[0].id

    oai.responses.create(model=MODEL, tools=[WEATHER], input=[
        {"type": "item_reference", "id": "msg_client_ref"},  # an input item
        {"type": "item_reference", "id": msg_id},  # an output message
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "item_reference", "id": fc_id},  # an output function call
        {"type": "function_call_output", "call_id": "call_ref", "output": "snow"},
    ])
    assert sent_messages(upstream, 2) == [
        user("Say hi in French"), assistant("Bonjour!"), user("Weather in Oslo?"),
        assistant(None, tool_calls=[{"id": "call_ref", "type": "function",
                                     "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]),
        {"role": "tool", "tool_call_id": "call_ref", "content": "snow"},
    ]

    with pytest.raises(openai.NotFoundError) as exc:
        oai.responses.create(model=MODEL, input=[{"type": "item_reference", "id": "msg_nope"}, user("hi")])
    assert exc.value.status_code == 404 and "msg_nope" in exc.value.message
    assert len(upstream.requests) == 3


def test_item_reference_to_a_deleted_response_is_not_found(oai, upstream):
    """Deleting a response also hides its items from item_reference (they resolved before)."""
    upstream.enqueue(text_stream(["kept?"]))
    gone = oai.responses.create(model=MODEL, input=[
        {"type": "message", "role": "user", "content": "secret", "id": "msg_deleted_ref"}])
    oai.responses.delete(gone.id)
    for ref in ("msg_deleted_ref", gone.output[0].id):
        with pytest.raises(openai.NotFoundError):
            oai.responses.create(model=MODEL, input=[{"type": "item_reference", "id": ref}, user("hi")])
    assert len(upstream.requests) == 1


def test_retrieve_with_encrypted_reasoning(oai, upstream, web):
    upstream.enqueue(reasoning_then_text(["Secret ", "thoughts."], ["Done."]), text_stream(["next"]))
    r = oai.responses.create(model=MODEL, input="think")
    plain = oai.responses.retrieve(r.id)
    assert plain.output[0].type == "reasoning" and not plain.output[0].encrypted_content

    sealed = oai.responses.retrieve(r.id, include=["reasoning.encrypted_content"])
    token = sealed.output[0].encrypted_content
    assert isinstance(token, str) and token
    assert sealed.output[1] == plain.output[1]

    # the token alone restores the reasoning for a stateless client
    oai.responses.create(model=MODEL, store=False, input=[
        user("think"),
        {"type": "reasoning", "id": sealed.output[0].id, "summary": [], "encrypted_content": token},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        user("again"),
    ])
    assert sent_messages(upstream, 1) == [user("think"), assistant("Done.", reasoning_content="Secret thoughts."),
                                          user("again")]
    resp = web.get(f"/v1/responses/{r.id}", params={"include": "bogus"})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "include[0]"


# --------------------------------------------------------------------------- tenancy


def _clients(gw, *keys):
    return [openai.OpenAI(base_url=f"{gw.url}/v1", api_key=k, max_retries=0, timeout=20) for k in keys]


def test_api_keys_isolate_tenants(start_gateway, backend, upstream):
    gw = start_gateway(api_keys="key-a,key-b")
    a, b, wrong = _clients(gw, "key-a", "key-b", "key-c")
    upstream.enqueue(text_stream(["A's answer"]), text_stream(["B's answer"]), text_stream(["A again"]))
    ra = a.responses.create(model=MODEL, input="A's secret")

    with httpx.Client(base_url=gw.url, timeout=20) as web:
        assert web.get("/health").status_code == 200
        for method, path in (("POST", "/v1/responses"), ("GET", f"/v1/responses/{ra.id}"),
                             ("DELETE", f"/v1/responses/{ra.id}"), ("GET", f"/v1/responses/{ra.id}/input_items")):
            resp = web.request(method, path, json={"model": MODEL, "input": "x"} if method == "POST" else None)
            assert resp.status_code == 401, (method, path)
            assert resp.json()["error"]["type"] == "invalid_request_error"
        bad = web.get(f"/v1/responses/{ra.id}", headers={"Authorization": "Bearer key-c"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        wrong.responses.create(model=MODEL, input="x")
    with pytest.raises(openai.AuthenticationError):
        wrong.responses.retrieve(ra.id)

    with pytest.raises(openai.NotFoundError):
        b.responses.retrieve(ra.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.delete(ra.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.input_items.list(ra.id)
    with pytest.raises(openai.BadRequestError) as exc:
        b.responses.create(model=MODEL, input="steal", previous_response_id=ra.id)
    assert_previous_not_found(exc.value, ra.id)
    with pytest.raises(openai.NotFoundError):
        b.responses.create(model=MODEL, input=[{"type": "item_reference", "id": ra.output[0].id}])
    rb = b.responses.create(model=MODEL, input="B's own")
    with pytest.raises(openai.NotFoundError):
        a.responses.retrieve(rb.id)

    # A's response survived all of B's attempts
    assert a.responses.retrieve(ra.id).output_text == "A's answer"
    assert [i.content[0].text for i in a.responses.input_items.list(ra.id).data] == ["A's secret"]
    again = a.responses.create(model=MODEL, input="more", previous_response_id=ra.id)
    assert again.output_text == "A again"
    assert sent_messages(upstream, 2) == [user("A's secret"), assistant("A's answer"), user("more")]
    assert len(upstream.requests) == 3
    stored = repr(backend.query("SELECT * FROM responses") + backend.query("SELECT * FROM items"))
    assert "key-a" not in stored and "key-b" not in stored


def test_owner_ids_are_keyed_and_an_upgrade_reowns_legacy_rows(start_gateway, backend, upstream):
    """Owners are HMAC-SHA256(secret, key): the secret generated by the first start is kept in the store and
    shared; rows from before (the unsalted SHA-256 prefix) are moved to the keyed owner at startup."""
    from responses_gateway.api.auth import legacy_owner_of, owner_of

    gw = start_gateway(api_keys="key-a,key-b")
    a, b = _clients(gw, "key-a", "key-b")
    upstream.enqueue(text_stream(["A's answer"]), text_stream(["B's answer"]), text_stream(["A again"]))
    ra = a.responses.create(model=MODEL, input="A's secret")
    rb = b.responses.create(model=MODEL, input="B's")
    [(secret,)] = backend.query("SELECT value FROM rg_secrets WHERE name = 'owner_hmac'")
    keyed = {key: owner_of(key, secret) for key in ("key-a", "key-b")}
    assert {row[0] for row in backend.query("SELECT owner FROM responses")} == set(keyed.values())
    for key, owner in keyed.items():  # the rows as a gateway before keyed owners wrote them
        for table in ("responses", "items"):
            backend.query(f"UPDATE {table} SET owner = ? WHERE owner = ?", legacy_owner_of(key), owner)

    upgraded = start_gateway(api_keys="key-a,key-b")  # a second replica starting on the same database
    a2, b2 = _clients(upgraded, "key-a", "key-b")
    assert a2.responses.retrieve(ra.id).output_text == "A's answer"
    assert b2.responses.retrieve(rb.id).output_text == "B's answer"
    with pytest.raises(openai.NotFoundError):
        b2.responses.retrieve(ra.id)
    assert a2.responses.create(model=MODEL, input="more", previous_response_id=ra.id).output_text == "A again"
    for table in ("responses", "items"):
        assert {row[0] for row in backend.query(f"SELECT DISTINCT owner FROM {table}")} == set(keyed.values())


def test_api_keys_are_never_stored_or_logged(start_gateway, backend, upstream, caplog):
    keys = ("rg-key-alpha-7d1f0c", "rg-key-beta-92ab4e")
    gw = start_gateway(api_keys=",".join(keys))
    caplog.set_level(logging.DEBUG)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        caplog.set_level(logging.DEBUG, logger=name)
        logging.getLogger(name).addHandler(caplog.handler)
    try:
        a, b, wrong = _clients(gw, keys[0], keys[1], "rg-key-gamma-000000")
        upstream.enqueue(reasoning_then_text(["r"], ["one"]), text_stream(["two"]), text_stream(["three"]))
        r1 = a.responses.create(model=MODEL, input="hello", include=["reasoning.encrypted_content"])
        with a.responses.stream(model=MODEL, input="again", previous_response_id=r1.id) as s:
            s.get_final_response()
        rb = b.responses.create(model=MODEL, input="bee")
        a.responses.retrieve(r1.id)
        a.responses.input_items.list(r1.id)
        b.responses.delete(rb.id)
        for call in (lambda: wrong.responses.retrieve(r1.id), lambda: b.responses.retrieve(r1.id)):
            with pytest.raises(openai.APIStatusError):
                call()
    finally:
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(name).removeHandler(caplog.handler)

    rows = backend.query("SELECT * FROM responses") + backend.query("SELECT * FROM items")
    assert len(rows) >= 3
    dump = repr(rows)
    owners = {row[0] for row in backend.query("SELECT DISTINCT owner FROM responses")}
    assert len(owners) == 2
    for key in (*keys, "rg-key-gamma"):
        assert key not in dump
        assert key not in owners

    client_side = ("openai", "httpx", "httpcore")
    gateway_records = [r for r in caplog.records if not r.name.startswith(client_side)]
    assert any(r.name == "uvicorn.access" for r in gateway_records)  # the server thread's logs are captured
    for record in gateway_records:
        text = record.getMessage() + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
        for key in (*keys, "rg-key-gamma"):
            assert key not in text, (record.name, text)


def test_api_keys_not_in_a_debug_logging_process(backend, upstream, tmp_path):
    keys = ("rg-key-alpha-7d1f0c", "rg-key-beta-92ab4e")
    log_path = tmp_path / "gateway.log"
    proc = backends.GatewayProcess(upstream.base_url, backend.db, "--api-keys", ",".join(keys),
                                   log_path=log_path, log_level="debug")
    try:
        proc.wait_ready()
        upstream.enqueue(text_stream(["one"]), text_stream(["two"]))
        a, b, wrong = (openai.OpenAI(base_url=f"{proc.url}/v1", api_key=k, max_retries=0, timeout=20)
                       for k in (*keys, "rg-key-gamma-000000"))
        r = a.responses.create(model=MODEL, input="hello")
        for _ in a.responses.create(model=MODEL, input="again", previous_response_id=r.id, stream=True):
            pass
        with pytest.raises(openai.NotFoundError):
            b.responses.retrieve(r.id)
        with pytest.raises(openai.AuthenticationError):
            wrong.responses.retrieve(r.id)
    finally:
        proc.kill()
    text = log_path.read_text(errors="replace")
    assert "API keys required" in text  # debug logging really ran
    for key in (*keys, "rg-key-gamma"):
        assert key not in text


# --------------------------------------------------------------------------- store failures, retention, db command


def test_a_response_that_cannot_be_stored_fails(gw, web, upstream, monkeypatch):
    """`completed` means stored: a store that fails (twice) turns the stream's end into an `error` event and
    `response.failed` (storage_error), and a non-streamed request into an error; one retry hides a blip."""
    calls = []

    async def broken_save(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(gw.app.state.services.store, "save", broken_save)
    before = metric(web, "store_failures_total")
    upstream.enqueue(text_stream(["still ", "here"]), text_stream(["also here"]))
    result = stream(web, {"model": MODEL, "input": "hi"})  # requires one terminal event and [DONE]
    assert result.terminal["type"] == "response.failed" and result.text == "still here"
    assert result.events[-2]["type"] == "error" and result.events[-2]["code"] == "storage_error"
    assert result.response["error"]["code"] == "server_error"
    assert [e["sequence_number"] for e in result.events] == list(range(len(result.events)))
    made = web.post("/v1/responses", json={"model": MODEL, "input": "hi"})
    assert made.status_code >= 500 and "could not be stored" in made.json()["error"]["message"]
    assert len(calls) == 4 and metric(web, "store_failures_total") - before == 4
    assert web.get(f"/v1/responses/{result.response['id']}").status_code == 404

    async def flaky_save(*args, **kwargs):  # one failure, then the real store
        monkeypatch.setattr(gw.app.state.services.store, "save", real_save)
        raise RuntimeError("blip")

    monkeypatch.undo()
    real_save = gw.app.state.services.store.save
    monkeypatch.setattr(gw.app.state.services.store, "save", flaky_save)
    upstream.enqueue(text_stream(["kept"]))
    kept = create(web, {"model": MODEL, "input": "hi"})
    assert kept["status"] == "completed"
    assert web.get(f"/v1/responses/{kept['id']}").json() == kept


def test_a_failed_response_says_whether_it_was_stored(gw, web, backend, upstream):
    """A non-streamed failure is a 502 naming the response (message and `x-response-id`); it says the
    response was stored with status failed only when GET finds it so."""
    broken = Stream(text_stream(["partial"])[:2] + ["data: {broken\n\n"])  # the upstream breaks mid-stream
    upstream.enqueue(broken)
    made = web.post("/v1/responses", json={"model": MODEL, "input": "hi"})
    rid = made.headers["x-response-id"]
    assert made.status_code == 502 and f"response {rid} was stored with status failed" in made.json()["error"]["message"]
    assert web.get(f"/v1/responses/{rid}").json()["status"] == "failed"

    with backend.refusing("responses"):
        upstream.enqueue(Stream(text_stream(["partial"])[:2] + ["data: {broken\n\n"]))
        failed = web.post("/v1/responses", json={"model": MODEL, "input": "hi"})  # and its write fails too
        upstream.enqueue(text_stream(["fine"]))
        unstored = web.post("/v1/responses", json={"model": MODEL, "input": "hi"})  # completed, write fails
    for made in (failed, unstored):
        rid, message = made.headers["x-response-id"], made.json()["error"]["message"]
        assert made.status_code == 502 and f"response {rid} was not stored" in message, message
        assert web.get(f"/v1/responses/{rid}").status_code == 404
    assert "could not be stored" in unstored.json()["error"]["message"]


def test_retention_expires_and_purge_removes(start_gateway, backend, upstream):
    gw = start_gateway(retention_days=2.5 / 86400)  # 3 seconds: retention rounds up to whole seconds
    oai = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0, timeout=20)
    upstream.enqueue(text_stream(["short-lived"]))
    r = oai.responses.create(model=MODEL, input="soon gone")
    assert oai.responses.retrieve(r.id).output_text == "short-lived"

    time.sleep(max(0.0, r.created_at + 3 - time.time()) + 0.05)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.input_items.list(r.id)
    with pytest.raises(openai.BadRequestError) as exc:
        oai.responses.create(model=MODEL, input="next", previous_response_id=r.id)
    assert_previous_not_found(exc.value, r.id)
    # expired but still on disk until a purge runs
    assert backend.query("SELECT count(*) FROM responses WHERE id = ?", r.id) == [(1,)]

    done = backends.run_cli("db", "purge", "--db", backend.db, "--db-timeout", "5")
    assert re.search(r"purged 1 expired responses", done.stdout), done.stdout
    assert "retention removed 1 expired responses" in done.stderr  # progress is logged as the batches go
    assert backend.query("SELECT count(*) FROM responses WHERE id = ?", r.id) == [(0,)]
    assert backend.query("SELECT count(*) FROM items WHERE response_id = ?", r.id) == [(0,)]
    out = backends.run_cli("db", "purge", "--db", backend.db).stdout
    assert "purged 0 expired responses" in out


def test_db_upgrade_is_idempotent(backend):
    first = backends.run_cli("db", "upgrade", "--db", backend.db).stdout.strip()
    second = backends.run_cli("db", "upgrade", "--db", backend.db).stdout.strip()
    from responses_gateway.store.schema import MIGRATIONS

    latest = len(MIGRATIONS)
    assert re.fullmatch(rf"schema at version {latest} \(.+\)", first), first
    assert second == first
    assert sorted(backend.query("SELECT version FROM rg_schema")) == [(v,) for v in range(1, latest + 1)]
    assert backend.tables_exist()
