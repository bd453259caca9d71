"""Images in the store, on SQLite and PostgreSQL alike: a finished image is kept in the files store (its bytes
beside the SQLite file, or in PostgreSQL's file parts), the stored item keeps its file id, and every read a client
makes puts `result` back — a response, its input items, a conversation's items — even on a gateway that no longer
has an images server. Later turns edit the kept image whichever way the history arrives: previous_response_id,
a conversation, or the item replayed by id alone."""

from __future__ import annotations

import base64
import json

import httpx
import openai

from tests.support import backends, pngs
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream
from tests.support.fake_images import color_of

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway
DRAW = {"type": "image_generation"}


def draw(prompt: str, edit: str | None = None) -> list[str]:
    args = {"prompt": prompt} | ({"edit": edit} if edit else {})
    return tool_calls_stream([("call_ig", "image_generation", [json.dumps(args)])], usage=make_usage(10, 5))


def result_of(item: dict) -> bytes:
    return base64.b64decode(item["result"])


def test_kept_in_the_files_store_edited_later_and_read_back_whole(backend, start_gateway, upstream, images):
    gw = start_gateway(image_generation_url=images.base_url)
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    upstream.enqueue(draw("a red door"), text_stream(["A door."]))
    first = client.responses.create(model="m", input="Draw a door.", tools=[DRAW])
    drawn = first.output[0].model_dump(exclude_unset=True)
    (row,) = backend.query("SELECT body FROM items WHERE id = ?", drawn["id"])
    kept = json.loads(row[0])
    assert kept["result"] is None and kept["result_file_id"]
    (parts,) = backend.query("SELECT bytes FROM rg_files WHERE id = ?", kept["result_file_id"])
    assert parts[0] == len(result_of(drawn))

    # a later turn by previous_response_id edits it: the image is read back from the files store
    upstream.enqueue(draw("paint it green", edit="latest"), text_stream(["Green."]))
    second = client.responses.create(model="m", input="Green, please.", previous_response_id=first.id, tools=[DRAW])
    assert second.output[0].status == "completed"
    (asked,) = images.requests("/edits")
    assert asked.files[0].data == result_of(drawn)

    # the item replayed by id alone (OpenAI's manual state): the stored copy, its image edited
    upstream.enqueue(draw("now at night", edit=drawn["id"]), text_stream(["Night."]))
    third = client.responses.create(model="m", tools=[DRAW], input=[
        {"type": "image_generation_call", "id": drawn["id"]},
        {"role": "user", "content": "Make the door at night."}])
    assert third.output[0].status == "completed"
    assert images.requests("/edits")[-1].files[0].data == result_of(drawn)
    http = httpx.Client(base_url=gw.url, timeout=30)
    listed = http.get(f"/v1/responses/{third.id}/input_items").json()["data"]
    replayed = next(i for i in listed if i["type"] == "image_generation_call")
    assert replayed["result"] == drawn["result"] and "result_file_id" not in replayed
    http.close()

    # a gateway on the same store without an images server reads it back whole
    other = start_gateway()
    with httpx.Client(base_url=other.url, timeout=30) as http:
        got = http.get(f"/v1/responses/{first.id}").json()
        assert got["output"][0]["result"] == drawn["result"]
        assert got["output"][0] == drawn


def test_in_a_conversation(backend, start_gateway, upstream, images):
    gw = start_gateway(image_generation_url=images.base_url)
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        upstream.enqueue(draw("a yellow kite"), text_stream(["A kite."]))
        first = http.post("/v1/responses", json={"model": "m", "input": "Draw a kite.", "tools": [DRAW],
                                                  "conversation": conversation}).json()
        upstream.enqueue(draw("add a tail", edit="latest"), text_stream(["Tail added."]))
        second = http.post("/v1/responses", json={"model": "m", "input": "Add a tail.", "tools": [DRAW],
                                                   "conversation": conversation}).json()
        assert second["output"][0]["status"] == "completed" and second["output"][0]["action"] == "edit"
        (asked,) = images.requests("/edits")
        assert asked.files[0].data == result_of(first["output"][0])
        assert pngs.read(result_of(second["output"][0])).at(0, 0) == color_of("a yellow kite")
        items = http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()["data"]
        calls = [i for i in items if i["type"] == "image_generation_call"]
        assert [c["result"] for c in calls] == [first["output"][0]["result"], second["output"][0]["result"]]
        assert all("result_file_id" not in c and "edited" not in c for c in calls)
        one = http.get(f"/v1/conversations/{conversation}/items/{calls[0]['id']}").json()
        assert one == calls[0]


def test_a_files_store_that_refuses_loses_nothing(backend, start_gateway, upstream, images):
    """The image cannot be kept apart (the files table refuses it): the call still completes, and the response is
    stored with the image inline, whole."""
    gw = start_gateway(image_generation_url=images.base_url)
    with backend.refusing("rg_files"), httpx.Client(base_url=gw.url, timeout=30) as http:
        upstream.enqueue(draw("a stubborn owl"), text_stream(["An owl."]))
        done = http.post("/v1/responses", json={"model": "m", "input": "Draw an owl.", "tools": [DRAW]}).json()
    call = done["output"][0]
    assert call["status"] == "completed" and pngs.read(result_of(call)).at(0, 0) == color_of("a stubborn owl")
    (row,) = backend.query("SELECT body FROM items WHERE id = ?", call["id"])
    stored = json.loads(row[0])
    assert stored["result"] == call["result"] and "result_file_id" not in stored
    assert not any(call["id"] in body for (body,) in backend.query("SELECT body FROM rg_files"))
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        assert http.get(f"/v1/responses/{done['id']}").json()["output"][0] == call
