"""file_search in /v1/responses, end to end: the openai SDK (streamed and not, with include), the Agents SDK's
FileSearchTool, on SQLite and PostgreSQL; every stream through the checker and the spec schemas; citations'
offsets against the final text; later turns; a failed search the model sees; two keys; two replicas."""

from __future__ import annotations

import asyncio
import io
import json
import time

import httpx
import openai
import pytest

from responses_gateway.configure import make as make_settings
from tests import helpers
from tests.support import backends
from tests.support.fake_chat import EMBEDDING_MODEL, error_json, make_usage, text_stream, tool_calls_stream
from tests.support.server import GatewayServer
from tests.test_vector_stores import DOCS, clear

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway
stream = helpers.stream


@pytest.fixture(autouse=True)
def _empty_tables(request):
    if "backend" in request.fixturenames:
        clear(request.getfixturevalue("backend"))


def sdk(gw, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=60)


def make_store(client: openai.OpenAI, docs: dict[str, str] = DOCS) -> str:
    vs = client.vector_stores.create(name="docs")
    batch = client.vector_stores.file_batches.upload_and_poll(
        vector_store_id=vs.id, files=[(name, text.encode()) for name, text in docs.items()])
    assert batch.status == "completed" and batch.file_counts.completed == len(docs)
    return vs.id


def search_call(queries, call_id="call_1"):
    return tool_calls_stream([(call_id, "file_search", [json.dumps({"queries": queries})])], usage=make_usage(30, 8))


@pytest.fixture
def gw(start_gateway):
    return start_gateway(embeddings_model=EMBEDDING_MODEL)


def tool(vs_id, **extra):
    return {"type": "file_search", "vector_store_ids": [vs_id], **extra}


def test_streamed_with_results_and_citations(gw, upstream, backend):
    client = sdk(gw)
    vs_id = make_store(client)
    upstream.enqueue(search_call(["volcano lava"]))
    # the answer cites with markers split across deltas; one marker cites a number the search never gave
    upstream.enqueue(text_stream(["Mount Etna erupts often", " 【", "1】. Lava escapes", "【9】 through the crust",
                                  "【1", "】."], usage=make_usage(50, 12)))
    with httpx.Client(base_url=gw.url, timeout=60) as http:
        result = stream(http, {"model": "fake-model", "input": "Tell me about volcanoes",
                               "tools": [tool(vs_id)], "include": ["file_search_call.results"]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["file_search_call", "message"]
    call = out[0]
    assert call["id"].startswith("fs_") and call["status"] == "completed" and call["queries"] == ["volcano lava"]
    assert set(call) == {"id", "type", "status", "queries", "results"}  # the gateway's own fields never shown
    assert call["results"][0]["filename"] == "volcano.md" and call["results"][0]["score"] == 1.0
    assert set(call["results"][0]) == {"attributes", "file_id", "filename", "score", "text"}
    types = result.types
    at = types.index("response.output_item.added")
    assert types[at:at + 5] == ["response.output_item.added", "response.file_search_call.in_progress",
                                "response.file_search_call.searching", "response.file_search_call.completed",
                                "response.output_item.done"]
    added = result.events[at]["item"]
    assert added["status"] == "in_progress" and added["queries"] == [] and added["results"] is None

    text = "Mount Etna erupts often . Lava escapes through the crust."
    assert result.text == text  # deltas add up to the final text: no marker ever reached the client
    deltas = "".join(e["delta"] for e in result.events if e["type"] == "response.output_text.delta")
    assert deltas == text and "【" not in deltas
    part = out[1]["content"][0]
    notes = part["annotations"]
    file_id = call["results"][0]["file_id"]
    assert notes == [{"type": "file_citation", "file_id": file_id, "filename": "volcano.md", "index": 24},
                     {"type": "file_citation", "file_id": file_id, "filename": "volcano.md", "index": 56}]
    assert text[:24].endswith("often ") and text[:56].endswith("crust")
    # each annotation went out during the stream, right after the text it follows, before the text is done
    added_events = [e for e in result.events if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation"] for e in added_events] == notes
    assert [e["annotation_index"] for e in added_events] == [0, 1]
    done_at = types.index("response.output_text.done")
    first_note = result.events.index(added_events[0])
    assert first_note < done_at
    sent_before = "".join(e["delta"] for e in result.events[:first_note] if e["type"] == "response.output_text.delta")
    assert len(sent_before) >= 24 and len(sent_before) < len(text)
    # what the model read: the results under their markers
    tool_message = upstream.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "【1】 volcano.md" in tool_message["content"]
    offered = upstream.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered] == ["file_search"]
    echoed = result.response["tools"][0]
    assert echoed["type"] == "file_search" and echoed["vector_store_ids"] == [vs_id]
    assert result.response["usage"]["input_tokens"] == 80


def test_not_streamed_without_include_then_a_later_turn(gw, upstream, backend):
    client = sdk(gw)
    vs_id = make_store(client)
    upstream.enqueue(search_call(["bread"]))
    upstream.enqueue(text_stream(["Bake sourdough at 250 degrees【1】."]))
    first = client.responses.create(model="fake-model", input="How hot to bake bread?", tools=[tool(vs_id)])
    call = first.output[0]
    assert call.type == "file_search_call" and call.results is None and call.queries == ["bread"]
    assert first.output_text == "Bake sourdough at 250 degrees."
    note = first.output[1].content[0].annotations[0]
    assert note.type == "file_citation" and note.filename == "bread.txt" and note.index == len("Bake sourdough at 250 degrees")
    again = client.responses.retrieve(first.id, include=["file_search_call.results"])
    assert again.output[0].results[0].filename == "bread.txt"
    assert client.responses.retrieve(first.id).output[0].results is None
    items = client.responses.input_items.list(first.id)
    assert items.data[0].type == "message"

    # the next turn renders the earlier search back to the model, and its markers keep their numbers: the
    # new search's results are numbered after the earlier ones, and both stay citable
    n = len(again.output[0].results) + 1
    upstream.enqueue(search_call(["Danube"], "call_2"))
    upstream.enqueue(text_stream([f"The Danube reaches the Black Sea【{n}】, and bread needs heat【1】."]))
    second = client.responses.create(model="fake-model", input="And rivers?", tools=[tool(vs_id, max_num_results=1)],
                                     previous_response_id=first.id, include=["file_search_call.results"])
    messages = upstream.requests[3].body["messages"]
    earlier = [m for m in messages if m["role"] == "tool"]
    assert "【1】 bread.txt" in earlier[0]["content"] and f"【{n}】 rivers.html" in earlier[1]["content"]
    assert messages[1]["tool_calls"][0]["function"] == {"name": "file_search", "arguments": '{"queries":["bread"]}'}
    assert upstream.requests[2].body["messages"][2] == earlier[0]  # the same on both steps of the second turn
    assert len(second.output[0].results) == 1
    notes = second.output[1].content[0].annotations
    assert [(n.filename, n.index) for n in notes] == [("rivers.html", len("The Danube reaches the Black Sea")),
                                                      ("bread.txt", len(second.output_text) - 1)]


def test_tool_options_filters_and_max_results(gw, upstream, backend):
    client = sdk(gw)
    vs_id = make_store(client)
    files = {f.id: f for f in client.vector_stores.files.list(vector_store_id=vs_id).data}
    bread = next(fid for fid in files if client.files.retrieve(fid).filename == "bread.txt")
    client.vector_stores.files.update(bread, vector_store_id=vs_id, attributes={"topic": "food"})
    upstream.enqueue(search_call(["volcano bread rivers"]))
    upstream.enqueue(text_stream(["ok"]))
    only_food = client.responses.create(
        model="fake-model", input="x", include=["file_search_call.results"],
        tools=[tool(vs_id, filters={"type": "eq", "key": "topic", "value": "food"},
                    ranking_options={"score_threshold": 0.0, "hybrid_search": {"text_weight": 1,
                                                                                "embedding_weight": 1}})])
    assert [r.filename for r in only_food.output[0].results] == ["bread.txt"]
    assert only_food.output[0].results[0].attributes == {"topic": "food"}
    upstream.enqueue(search_call(["volcano bread rivers"]))
    upstream.enqueue(text_stream(["ok"]))
    one = client.responses.create(model="fake-model", input="x", include=["file_search_call.results"],
                                  tools=[tool(vs_id, max_num_results=1)])
    assert len(one.output[0].results) == 1 and one.output[0].results[0].score == 1.0
    for bad, param in (({"max_num_results": 0}, "tools[0].max_num_results"),
                       ({"filters": {"type": "gt", "key": "k", "value": True}}, "tools[0].filters.value"),
                       ({"ranking_options": {"score_threshold": -1}}, "tools[0].ranking_options.score_threshold"),
                       ({"vector_store_ids": []}, "tools[0].vector_store_ids")):
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="fake-model", input="x", tools=[{**tool(vs_id), **bad}])
        assert err.value.body["param"] == param


def test_unknown_and_foreign_stores_are_404_before_the_response(start_gateway, upstream, backend):
    gw = start_gateway(api_keys="key-a,key-b", embeddings_model=EMBEDDING_MODEL)
    a, b = sdk(gw, "key-a"), sdk(gw, "key-b")
    vs_id = make_store(a, {"secret.txt": "the vault code is 7391"})
    for client, store in ((b, vs_id), (a, "vs_missing")):
        for streamed in (False, True):
            with pytest.raises(openai.NotFoundError) as err:
                client.responses.create(model="fake-model", input="code?", tools=[tool(store)], stream=streamed)
            assert store in err.value.body["message"]
    assert upstream.requests == []  # no model was called for any of them


def test_a_failed_search_is_a_failed_item_the_model_sees(gw, upstream, backend):
    client = sdk(gw)
    vs_id = make_store(client)
    upstream.embeddings_hook = lambda r: error_json(503, "the embedding model is loading", type="ServiceUnavailable",
                                                    code=503)
    upstream.enqueue(search_call(["volcano"]))
    upstream.enqueue(text_stream(["I could not search the files."]))
    with httpx.Client(base_url=gw.url, timeout=60) as http:
        result = stream(http, {"model": "fake-model", "input": "volcano?", "tools": [tool(vs_id)],
                               "include": ["file_search_call.results"]})
    call = result.response["output"][0]
    assert call["status"] == "failed" and call["results"] is None and "error" not in call
    assert result.response["status"] == "completed" and result.text == "I could not search the files."
    assert "response.file_search_call.completed" not in result.types
    seen = upstream.requests[1].body["messages"][-1]["content"]
    assert seen.startswith("The search failed:") and "503" in seen


def test_the_agents_sdk_file_search_tool(gw, upstream, backend):
    from agents import Agent, FileSearchTool, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    client = sdk(gw)
    vs_id = make_store(client)
    upstream.enqueue(search_call(["Etna"]))
    upstream.enqueue(text_stream(["Etna is a volcano【1】."]))

    async def main():
        async with openai.AsyncOpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30) as aclient:
            agent = Agent(name="librarian", instructions="Answer from the files.",
                          model=OpenAIResponsesModel(model="fake-model", openai_client=aclient),
                          tools=[FileSearchTool(vector_store_ids=[vs_id], max_num_results=3,
                                                include_search_results=True)])
            return await Runner.run(agent, "What is Etna?")

    result = asyncio.run(asyncio.wait_for(main(), 60))
    assert result.final_output == "Etna is a volcano."
    calls = [i.raw_item for i in result.new_items if getattr(i.raw_item, "type", None) == "file_search_call"]
    assert calls and calls[0].results[0].filename == "volcano.md" and calls[0].status == "completed"
    request = upstream.requests[0].body
    assert [t["function"]["name"] for t in request["tools"]] == ["file_search"]


def test_two_replicas_on_one_postgresql(pg_database, upstream):
    b = backends.Backend("postgresql", pg_database)
    b.clear()
    clear(b)
    settings = make_settings(upstream_url=upstream.base_url, db=pg_database, embeddings_model=EMBEDDING_MODEL)
    with GatewayServer(settings) as one, GatewayServer(settings) as two:
        vs_id = make_store(sdk(one))
        assert sdk(two).vector_stores.search(vs_id, query="Danube").data[0].filename == "rivers.html"
        upstream.enqueue(search_call(["Danube"]))
        upstream.enqueue(text_stream(["Ten countries【1】."]))
        answer = sdk(two).responses.create(model="fake-model", input="Danube?", tools=[tool(vs_id)],
                                           include=["file_search_call.results"])
        assert answer.output[0].results[0].filename == "rivers.html"
        assert answer.output[1].content[0].annotations[0].filename == "rivers.html"
        # a file added through one replica is found through the other once ingested (by either)
        added = sdk(two).vector_stores.files.upload_and_poll(vector_store_id=vs_id,
                                                             file=("moon.txt", b"The Moon orbits the Earth."))
        assert added.status == "completed"
        deadline = time.monotonic() + 10
        while not sdk(one).vector_stores.search(vs_id, query="Moon orbits").data:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert sdk(one).vector_stores.search(vs_id, query="Moon orbits").data[0].filename == "moon.txt"


def test_earlier_searches_render_back_through_conversations_and_items_sent_back(gw, upstream, backend):
    client = sdk(gw)
    vs_id = make_store(client)
    conversation = client.conversations.create()
    upstream.enqueue(search_call(["Etna"]))
    upstream.enqueue(text_stream(["Etna erupts【1】."]))
    first = client.responses.create(model="fake-model", input="Etna?", tools=[tool(vs_id)],
                                    conversation=conversation.id)
    upstream.enqueue(text_stream(["Yes."]))
    client.responses.create(model="fake-model", input="Sure?", tools=[tool(vs_id)], conversation=conversation.id)
    seen = upstream.requests[2].body["messages"]
    assert any(m["role"] == "tool" and "【1】 volcano.md" in m["content"] for m in seen)
    # the client sends the earlier items back by value, as shown to it (results null, no include): the model
    # still reads the whole results, from the stored copy
    replay = [item.model_dump(exclude_none=False) for item in first.output]
    assert replay[0]["results"] is None
    upstream.enqueue(text_stream(["Again."]))
    client.responses.create(model="fake-model", input=[*replay, {"role": "user", "content": "and?"}],
                            tools=[tool(vs_id)])
    seen = upstream.requests[3].body["messages"]
    assert any(m["role"] == "tool" and "【1】 volcano.md" in m["content"] and "Etna" in m["content"] for m in seen)


def test_a_10000_page_pdf_fails_at_once_and_the_server_keeps_answering(gw, upstream, backend):
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(10_000):
        writer.add_blank_page(width=72, height=72)
    data = io.BytesIO()
    writer.write(data)
    client = sdk(gw)
    vs = client.vector_stores.create(name="x")
    file_id = client.files.create(file=("huge.pdf", data.getvalue()), purpose="assistants").id
    client.vector_stores.files.create(vector_store_id=vs.id, file_id=file_id)
    deadline = time.monotonic() + 60
    while True:  # the server answers all along (the PDF is read in a worker thread, and only its page count)
        assert httpx.get(f"{gw.url}/health", timeout=10).status_code == 200
        got = client.vector_stores.files.retrieve(file_id, vector_store_id=vs.id)
        if got.status != "in_progress" or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert got.status == "failed" and got.last_error.code == "invalid_file" and "10000 pages" in got.last_error.message


def test_without_a_store_the_tool_is_handled_by_hosted_tools(upstream):
    for policy in ("reject", "drop"):
        settings = make_settings(upstream_url=upstream.base_url, db="none", hosted_tools=policy)
        with GatewayServer(settings) as gw:
            client = sdk(gw)
            if policy == "reject":
                with pytest.raises(openai.BadRequestError) as err:
                    client.responses.create(model="fake-model", input="x", tools=[tool("vs_1")])
                assert err.value.body["param"] == "tools[0].type" and "store" in err.value.body["message"]
                with pytest.raises(openai.BadRequestError):
                    client.vector_stores.create(name="x")
            else:
                upstream.enqueue(text_stream(["no files"]))
                answer = client.responses.create(model="fake-model", input="x", tools=[tool("vs_1")])
                assert answer.output_text == "no files" and "tools" not in upstream.requests[-1].body


def test_in_a_background_response(gw, upstream, backend):
    client = sdk(gw)
    vs_id = make_store(client)
    upstream.enqueue(search_call(["Danube"]))
    upstream.enqueue(text_stream(["It reaches the Black Sea【1】."]))
    started = client.responses.create(model="fake-model", input="Danube?", tools=[tool(vs_id)], background=True,
                                      include=["file_search_call.results"])
    deadline = time.monotonic() + 30
    done = client.responses.retrieve(started.id, include=["file_search_call.results"])
    while done.status in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
        done = client.responses.retrieve(started.id, include=["file_search_call.results"])
    assert done.status == "completed" and done.output_text == "It reaches the Black Sea."
    assert done.output[0].results[0].filename == "rivers.html"
    assert done.output[1].content[0].annotations[0].index == len("It reaches the Black Sea")
