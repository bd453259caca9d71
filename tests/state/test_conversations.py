"""The Conversations API and `conversation` on /v1/responses, through the openai SDK, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.support import backends, needs
from tests.support.fake_chat import RecordedRequest, Stream, text_stream
from tests.support.stream_check import check_stream

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

MODEL = "fake-model"


def sdk(gw, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=30)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def texts(items) -> list[str]:
    out = []
    for item in items:
        item = item if isinstance(item, dict) else item.model_dump()
        for part in item.get("content") or ():
            out.append(part.get("text"))
    return out


def echo_last(request: RecordedRequest) -> Stream:
    """Answer 're: <last user message>' so each turn's answer is recognisable."""
    last = request.body["messages"][-1]["content"]
    return Stream(text_stream([f"re: {last}"]))


def test_crud_and_items(start_gateway, upstream):
    client = sdk(start_gateway())
    conv = client.conversations.create(items=[user("one"), user("two")], metadata={"topic": "demo"})
    assert conv.id.startswith("conv_") and conv.object == "conversation" and conv.metadata == {"topic": "demo"}
    assert client.conversations.retrieve(conv.id).model_dump() == conv.model_dump()

    updated = client.conversations.update(conv.id, metadata={"topic": "changed"})
    assert updated.metadata == {"topic": "changed"}
    assert client.conversations.retrieve(conv.id).metadata == {"topic": "changed"}

    added = client.conversations.items.create(conv.id, items=[user("three")])
    assert added.object == "list" and texts(added.data) == ["three"] and added.data[0].id.startswith("msg_")

    page = client.conversations.items.list(conv.id)  # default order: newest first
    assert texts(page.data) == ["three", "two", "one"]
    first = client.conversations.items.list(conv.id, order="asc", limit=2)
    assert texts(first.data) == ["one", "two"] and first.has_more
    assert first.first_id == first.data[0].id and first.last_id == first.data[1].id
    rest = client.conversations.items.list(conv.id, order="asc", after=first.last_id)
    assert texts(rest.data) == ["three"] and not rest.has_more

    one = first.data[0]
    assert client.conversations.items.retrieve(one.id, conversation_id=conv.id).id == one.id
    after_delete = client.conversations.items.delete(one.id, conversation_id=conv.id)
    assert after_delete.id == conv.id and after_delete.object == "conversation"
    assert texts(client.conversations.items.list(conv.id, order="asc").data) == ["two", "three"]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(one.id, conversation_id=conv.id)

    deleted = client.conversations.delete(conv.id)
    assert deleted.model_dump() == {"id": conv.id, "object": "conversation.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError) as err:
        client.conversations.retrieve(conv.id)
    assert err.value.body["message"] == f"Conversation with id '{conv.id}' not found."


def test_validation_errors(start_gateway, upstream):
    gw = start_gateway()
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        too_many = http.post("/v1/conversations", json={"items": [user(str(i)) for i in range(21)]})
        assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "items"
        meta = http.post("/v1/conversations", json={"metadata": {f"k{i}": "v" for i in range(17)}})
        assert meta.status_code == 400 and meta.json()["error"]["param"] == "metadata"
        unknown = http.post("/v1/conversations", json={"nope": 1})
        assert unknown.json()["error"] == {"message": "Unknown parameter: 'nope'.", "type": "invalid_request_error",
                                           "param": "nope", "code": "unknown_parameter"}
        conv = http.post("/v1/conversations", json={}).json()
        bad_limit = http.get(f"/v1/conversations/{conv['id']}/items", params={"limit": 101})
        assert bad_limit.status_code == 400 and bad_limit.json()["error"]["param"] == "limit"
        missing = http.get("/v1/conversations/conv_missing/items")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "invalid_request_error"
        both = http.post("/v1/responses", json={"model": MODEL, "input": "x", "conversation": conv["id"],
                                                 "previous_response_id": "resp_1"})
        assert both.status_code == 400 and both.json()["error"]["code"] == "mutually_exclusive_parameters"
        gone = http.post("/v1/responses", json={"model": MODEL, "input": "x", "conversation": "conv_nope"})
        assert gone.status_code == 404 and gone.json()["error"]["param"] == "conversation"


@pytest.mark.parametrize("streaming", [False, True])
def test_responses_in_a_conversation(start_gateway, upstream, streaming):
    client = sdk(start_gateway())
    upstream.default = echo_last
    conv = client.conversations.create(items=[{"role": "developer", "content": "Be brief."}])

    def turn(text: str, conversation):
        if streaming:
            with client.responses.stream(model=MODEL, input=text, conversation=conversation) as s:
                return s.get_final_response()
        return client.responses.create(model=MODEL, input=text, conversation=conversation)

    first = turn("hello", conv.id)
    assert first.conversation.id == conv.id and first.output_text == "re: hello"
    second = turn("again", {"id": conv.id})
    assert second.output_text == "re: again"
    # the upstream saw the conversation's items first, then the new input
    sent = [(m["role"], m["content"]) for m in upstream.requests[-1].body["messages"]]
    assert sent == [("developer", "Be brief."), ("user", "hello"), ("assistant", "re: hello"), ("user", "again")] \
        or sent == [("system", "Be brief."), ("user", "hello"), ("assistant", "re: hello"), ("user", "again")]
    items = client.conversations.items.list(conv.id, order="asc").data
    assert texts(items) == ["Be brief.", "hello", "re: hello", "again", "re: again"]
    assert items[2].id == first.output[0].id  # output items keep their ids


def test_failed_response_appends_nothing(start_gateway, upstream):
    client = sdk(start_gateway())
    conv = client.conversations.create()
    upstream.enqueue(Stream(text_stream(["partial"])[:2] + ["data: {broken\n\n"]))
    with pytest.raises(openai.APIStatusError) as err:
        client.responses.create(model=MODEL, input="doomed", conversation=conv.id)
    assert err.value.status_code == 502
    assert client.conversations.items.list(conv.id).data == []


@pytest.mark.parametrize("streaming", [False, True])
def test_a_response_whose_conversation_append_fails_is_not_kept_either(start_gateway, backend, upstream,
                                                                       streaming):
    """The response and its conversation's new items are one transaction: when the append fails, the client
    is told the response could not be stored — and it is not (no GET, no chaining from it), instead of being
    told so while it sat in the store as completed. Once the database accepts appends again, all is well."""
    gw = start_gateway()
    client = sdk(gw)
    conv = client.conversations.create(items=[user("start")])
    with backend.refusing("conversation_items"), httpx.Client(base_url=gw.url, timeout=30) as http:
        upstream.enqueue(text_stream(["lost"]))
        body = {"model": MODEL, "input": "hello", "conversation": conv.id, "stream": streaming}
        answer = http.post("/v1/responses", json=body)
        if streaming:
            result = check_stream(answer.content)
            assert result.events[-2]["code"] == "storage_error"
            rid, message = result.response["id"], result.events[-2]["message"]
        else:
            assert answer.status_code == 502
            rid, message = answer.headers["x-response-id"], answer.json()["error"]["message"]
        assert "could not be stored" in message and "was stored" not in message
        assert http.get(f"/v1/responses/{rid}").status_code == 404
        chained = http.post("/v1/responses", json={"model": MODEL, "input": "x", "previous_response_id": rid})
        assert chained.status_code == 400 and chained.json()["error"]["code"] == "previous_response_not_found"
    assert texts(client.conversations.items.list(conv.id, order="asc").data) == ["start"]
    upstream.enqueue(text_stream(["kept"]))
    kept = client.responses.create(model=MODEL, input="hello", conversation=conv.id)
    assert client.responses.retrieve(kept.id).output_text == "kept"
    assert texts(client.conversations.items.list(conv.id, order="asc").data) == ["start", "hello", "kept"]


def test_conversations_are_per_key(start_gateway, upstream):
    gw = start_gateway(api_keys="key-a,key-b")
    a, b = sdk(gw, "key-a"), sdk(gw, "key-b")
    conv = a.conversations.create(items=[user("secret")])
    for call in (lambda: b.conversations.retrieve(conv.id), lambda: b.conversations.items.list(conv.id),
                 lambda: b.conversations.delete(conv.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.NotFoundError):
        b.responses.create(model=MODEL, input="x", conversation=conv.id)
    assert texts(a.conversations.items.list(conv.id).data) == ["secret"]


CLIENTS, CONVERSATIONS, TURNS = 20, 5, 3


def test_concurrent_responses_lose_no_item(start_gateway, upstream):
    """20 clients on 5 conversations at once: every response's input and output land in its conversation,
    each response's items together (appends queue on the conversation's row)."""
    gw = start_gateway()
    upstream.default = lambda r: Stream(text_stream(["re: ", r.body["messages"][-1]["content"]]), delay=0.002)

    async def main() -> list[list[dict]]:
        async with openai.AsyncOpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=60) as client:
            convs = [await client.conversations.create() for _ in range(CONVERSATIONS)]

            async def worker(w: int) -> None:
                conv = convs[w % CONVERSATIONS]
                for t in range(TURNS):
                    final = await client.responses.create(model=MODEL, input=f"w{w}t{t}", conversation=conv.id)
                    assert final.output_text == f"re: w{w}t{t}"

            await asyncio.gather(*(worker(w) for w in range(CLIENTS)))
            out = []
            for conv in convs:
                page = await client.conversations.items.list(conv.id, order="asc", limit=100)
                assert not page.has_more
                out.append([item.model_dump() for item in page.data])
            return out

    for c, items in enumerate(asyncio.run(main())):
        said = texts(items)
        expected = {f"w{w}t{t}" for w in range(c, CLIENTS, CONVERSATIONS) for t in range(TURNS)}
        questions = [s for s in said if not s.startswith("re: ")]
        assert sorted(questions) == sorted(expected)  # none lost, none borrowed, none twice
        for i in range(0, len(said), 2):  # each question is followed at once by its own answer
            assert said[i + 1] == f"re: {said[i]}"
        assert len({item["id"] for item in items}) == len(items)


def test_agents_sdk_conversations_session_remembers(start_gateway, upstream):
    """The OpenAI Agents SDK keeps a session in a server-side conversation (`OpenAIConversationsSession`), and
    runs in one with `conversation_id`: both remember earlier turns through the gateway."""
    needs.python_package("agents")
    import agents
    from agents.memory import OpenAIConversationsSession

    agents.set_tracing_disabled(True)
    gw = start_gateway()

    def remembering(request: RecordedRequest) -> Stream:
        said = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
        return Stream(text_stream([f"you said: {' | '.join(said)}"]))

    upstream.default = remembering

    async def main() -> tuple[list[str], list[str], list[str]]:
        async with openai.AsyncOpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30) as client:
            agent = agents.Agent(name="a", instructions="Be brief.",
                                 model=agents.OpenAIResponsesModel(model=MODEL, openai_client=client))
            session = OpenAIConversationsSession(openai_client=client)
            first = await agents.Runner.run(agent, "my name is Ada", session=session)
            second = await agents.Runner.run(agent, "what is my name?", session=session)
            stored = texts(await session.get_items())
            conv = await client.conversations.create()
            await agents.Runner.run(agent, "remember 42", conversation_id=conv.id)
            third = await agents.Runner.run(agent, "what number?", conversation_id=conv.id)
            return [first.final_output, second.final_output, third.final_output], stored, [conv.id]

    outputs, stored, _ = asyncio.run(main())
    assert outputs[0] == "you said: my name is Ada"
    assert outputs[1] == "you said: my name is Ada | what is my name?"
    assert outputs[2] == "you said: remember 42 | what number?"
    assert stored == ["my name is Ada", "you said: my name is Ada", "what is my name?",
                      "you said: my name is Ada | what is my name?"]
