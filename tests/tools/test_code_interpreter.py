"""code_interpreter end to end: the real gateway, the real sandbox (bubblewrap), the fake model scripted to run
code, and openai-python as the client.

The stream is checked against OpenAI's recordings (builtin-tool-code_interpreter-*.yaml): the same events in
the same order, `outputs` null at `added` unless include asks for them, the logs then the value. Then what
the tool promises: state kept across responses on one container, a chart returned as an image and
downloadable, an uploaded CSV analysed, tracebacks read by the model, the stored outputs rendered back
upstream even when the client strips them, container_file_citation, and the Containers API's shapes.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from responses_gateway.configure import make as make_settings
from tests.support import needs
from tests.support.code_interpreter import AUTO, OUTPUTS, answer, call_of, code_call, logs, run_code
from tests.support.fake_chat import Stream, text_stream
from tests.support.recordings import RECORDINGS_DIR, load_recording
from tests.support.schema import validate_event, validate_response
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream

needs.bubblewrap()  # skipped with what to install where it is missing; a failure in CI

RECORDING = RECORDINGS_DIR / "openai_builtin_tools" / "builtin-tool-code_interpreter-outputs-multi-stream.yaml"
CELL = "print('P1')\n1+1\nprint('P2')\n2+2\n3+3"


@pytest.fixture(scope="module")
def ci_gateway(_upstream_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("ci") / "responses.db"
    with GatewayServer(make_settings(upstream_url=_upstream_server.base_url, db=str(db),
                                code_interpreter="bubblewrap", code_interpreter_timeout=20)) as server:
        yield server


@pytest.fixture
def client(ci_gateway):
    return openai.OpenAI(base_url=f"{ci_gateway.url}/v1", api_key="k", max_retries=0, timeout=60)


def _sse(gateway, body: dict) -> str:
    with httpx.Client(timeout=60) as http:
        resp = http.post(f"{gateway.url}/v1/responses", json=body)
        assert resp.status_code == 200, resp.text
        return resp.text


def _events(raw: str) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


def _recorded_events() -> list[dict]:
    return _events(load_recording(RECORDING).sse_text)


def test_a_streamed_call_is_shaped_and_ordered_as_openai_records_it(ci_gateway, upstream):
    upstream.enqueue(code_call(CELL, pieces=5), answer("Done. The code ran."))
    raw = _sse(ci_gateway, {"model": "m", "input": "run it", "stream": True, "tools": [AUTO],
                            "include": OUTPUTS})
    check_stream(raw)
    events = _events(raw)
    ours = [e["type"] for e in events if e.get("output_index") == 0]
    theirs = [e["type"] for e in _recorded_events() if e.get("output_index") == 1]
    squash = lambda types: [t for i, t in enumerate(types) if t != types[i - 1] or "delta" not in t]  # noqa: E731
    assert squash(ours) == squash(theirs)
    added = next(e for e in events if e["type"] == "response.output_item.added")["item"]
    assert added["type"] == "code_interpreter_call" and added["code"] == "" and added["outputs"] == []
    assert added["id"].startswith("ci_") and added["container_id"].startswith("cntr_")
    assert added["status"] == "in_progress"
    code = "".join(e["delta"] for e in events if e["type"] == "response.code_interpreter_call_code.delta")
    assert code == CELL
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    recorded = next(e for e in _recorded_events() if e["type"] == "response.output_item.done"
                    and e["item"]["type"] == "code_interpreter_call")["item"]
    assert list(done) == list(recorded)  # the same fields, in the same order
    # (this recording's strings carry their newlines escaped twice: "\\n")
    assert [{**o, "logs": o["logs"].replace("\\n", "\n")} for o in recorded["outputs"]] == done["outputs"] == [
        {"type": "logs", "logs": "P1\nP2\n"}, {"type": "logs", "logs": "6"}]
    assert done["status"] == "completed" and done["code"] == CELL
    for event in events:
        validate_event(event)
    final = events[-1]["response"]
    validate_response(final)
    assert final["tools"] == [{"type": "code_interpreter", "container": {"type": "auto"}}]
    # the model was offered one freeform tool and saw the output on the next step
    offered = upstream.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered] == ["code_interpreter"]
    assert upstream.requests[1].body["messages"][-1]["content"] == "P1\nP2\n6"


def test_outputs_are_null_unless_include_asks_and_the_store_keeps_them(client, upstream, ci_gateway):
    upstream.enqueue(code_call("print('hi')\n40 + 2"), answer())
    response = client.responses.create(model="m", input="run", tools=[AUTO])
    call = call_of(response)
    assert call.outputs is None and call.status == "completed"
    again = client.responses.retrieve(response.id, include=OUTPUTS)
    assert [o.logs for o in call_of(again).outputs] == ["hi\n", "42"]
    assert call_of(client.responses.retrieve(response.id)).outputs is None
    items = httpx.get(f"{ci_gateway.url}/v1/responses/{response.id}/input_items").json()
    assert items["data"][0]["role"] == "user"


def test_streamed_without_include_the_item_has_no_outputs(ci_gateway, upstream):
    upstream.enqueue(code_call("1 + 1"), answer())
    events = _events(_sse(ci_gateway, {"model": "m", "input": "x", "stream": True, "tools": [AUTO]}))
    items = [e["item"] for e in events if e["type"] in ("response.output_item.added", "response.output_item.done")
             and e["item"]["type"] == "code_interpreter_call"]
    assert [item["outputs"] for item in items] == [None, None]
    assert events[-1]["response"]["output"][0]["outputs"] is None


def test_state_is_kept_across_responses_on_one_container(client, upstream):
    first = run_code(client, upstream, "import math\nsecret = math.factorial(5)\nsecret")
    call = call_of(first)
    assert logs(call) == "120"
    # `auto` reuses the container of the last call in the context (previous_response_id)
    second = run_code(client, upstream, "secret + 1", previous_response_id=first.id)
    assert call_of(second).container_id == call.container_id
    assert logs(call_of(second)) == "121"
    # and the container named by its id, in a response with no history
    third = run_code(client, upstream, "secret * 2", tools=[{"type": "code_interpreter",
                                                              "container": call.container_id}])
    assert logs(call_of(third)) == "240"
    # a fresh `auto` without that history gets a new container, with nothing in it
    fresh = run_code(client, upstream, "'secret' in globals()")
    assert call_of(fresh).container_id != call.container_id and logs(call_of(fresh)) == "False"


def test_a_chart_is_an_image_output_and_a_downloadable_container_file(client, upstream, ci_gateway):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')\nplt.show()"
    response = run_code(client, upstream, code)
    call = call_of(response)
    images = [o for o in call.outputs if o.type == "image"]
    assert len(images) == 1 and "non-interactive" not in logs(call)
    assert images[0].url.startswith(f"/v1/containers/{call.container_id}/files/cfile_")
    png = httpx.get(ci_gateway.url + images[0].url).content
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    files = client.containers.files.list(call.container_id).data
    (figure,) = [f for f in files if f.path.endswith(".png")]
    assert figure.source == "assistant" and figure.bytes == len(png)
    assert client.containers.files.content.retrieve(figure.id, container_id=call.container_id).content == png
    # the model is told an image was shown
    assert "image" in upstream.requests[1].body["messages"][-1]["content"]


def test_an_uploaded_csv_is_analysed(client, upstream):
    container = client.containers.create(name="analysis")
    csv = b"city,temp\nParis,21\nOslo,12\nRome,27\n"
    uploaded = client.containers.files.create(container.id, file=("weather.csv", csv, "text/csv"))
    assert (uploaded.path, uploaded.source, uploaded.bytes) == ("/mnt/data/weather.csv", "user", len(csv))
    code = ("import pandas as pd\ndf = pd.read_csv('/mnt/data/weather.csv')\n"
            "df.sort_values('temp').to_csv('/mnt/data/sorted.csv', index=False)\nfloat(round(df.temp.mean(), 2))")
    response = run_code(client, upstream, code, tools=[{"type": "code_interpreter", "container": container.id}],
                        reply="Mean 20.0; sorted: [sorted.csv](sandbox:/mnt/data/sorted.csv).")
    assert logs(call_of(response)) == "20.0"
    files = {f.path: f for f in client.containers.files.list(container.id).data}
    assert files["/mnt/data/sorted.csv"].source == "assistant"
    content = client.containers.files.content.retrieve(files["/mnt/data/sorted.csv"].id, container_id=container.id)
    assert content.content.decode().splitlines() == ["city,temp", "Oslo,12", "Paris,21", "Rome,27"]
    message = response.output[-1]
    (note,) = message.content[0].annotations
    text = message.content[0].text
    assert note.type == "container_file_citation" and note.file_id == files["/mnt/data/sorted.csv"].id
    assert (note.container_id, note.filename) == (container.id, "sorted.csv")
    assert text[note.start_index:note.end_index] == "sandbox:/mnt/data/sorted.csv"


def test_a_citation_streams_right_after_the_text_it_annotates(ci_gateway, upstream, client):
    container = client.containers.create(name="cite")
    client.containers.files.create(container.id, file=("data.txt", b"x", "text/plain"))
    upstream.enqueue(code_call("open('/mnt/data/out.txt', 'w').write('hi')"),
                     Stream(text_stream(["Here: [out](sand", "box:/mnt/da", "ta/out.txt) and ", "/mnt/data/nope.txt"])))
    raw = _sse(ci_gateway, {"model": "m", "input": "x", "stream": True,
                            "tools": [{"type": "code_interpreter", "container": container.id}]})
    check_stream(raw)
    events = _events(raw)
    kinds = [e["type"] for e in events]
    at = kinds.index("response.output_text.annotation.added")
    sent = "".join(e["delta"] for e in events[:at] if e["type"] == "response.output_text.delta")
    note = events[at]["annotation"]
    # sent with the delta that ended the path (and not a delta later)
    assert sent == "Here: [out](sandbox:/mnt/data/out.txt) and "
    assert sent[note["start_index"]:note["end_index"]] == "sandbox:/mnt/data/out.txt"
    final = events[-1]["response"]["output"][-1]["content"][0]
    assert final["text"] == "Here: [out](sandbox:/mnt/data/out.txt) and /mnt/data/nope.txt"
    assert len(final["annotations"]) == 1  # a path the container does not hold is not cited


def test_code_that_raises_is_completed_and_the_model_reads_the_traceback(client, upstream):
    response = run_code(client, upstream, "def f():\n    return 1 / 0\nf()")
    call = call_of(response)
    assert call.status == "completed"
    assert "ZeroDivisionError: division by zero" in logs(call) and '<cell ' in logs(call)
    assert "worker.py" not in logs(call)  # the worker's own frames are not the code's business
    assert "ZeroDivisionError" in upstream.requests[1].body["messages"][-1]["content"]


def test_the_stored_outputs_go_upstream_even_when_the_client_replays_the_call_without_them(client, upstream):
    first = run_code(client, upstream, "print('kept server-side')")
    call = call_of(first).model_dump()
    call["outputs"] = None  # a client that was not shown the outputs replays the item as it has it
    upstream.enqueue(answer("ok"))
    client.responses.create(model="m", tools=[AUTO], input=[
        {"role": "user", "content": "Run it."}, call, {"role": "user", "content": "And?"}])
    messages = upstream.requests[-1].body["messages"]
    assert {"role": "tool", "tool_call_id": call["id"], "content": "kept server-side"} in messages


def test_an_unknown_container_or_file_is_a_404_before_the_response_starts(client, upstream):
    for tools, param in (([{"type": "code_interpreter", "container": "cntr_" + "0" * 48}], "tools[0].container"),
                         ([{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-nope"]}}],
                          "tools[0].container.file_ids")):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="m", input="x", tools=tools)
        assert caught.value.body["param"] == param
    assert upstream.requests == []


def test_a_container_deleted_while_the_response_runs_fails_the_call_with_a_message(client, upstream):
    container = client.containers.create(name="short-lived")
    upstream.enqueue(lambda request: (client.containers.delete(container.id), code_call("1"))[1], answer())
    response = client.responses.create(model="m", input="x", tools=[{"type": "code_interpreter",
                                                                      "container": container.id}],
                                       include=OUTPUTS)
    call = call_of(response)
    assert call.status == "failed" and "not found" in logs(call)
    assert response.status == "completed"  # the model saw it and answered


def test_declarations_are_checked_at_the_request_boundary(client):
    for tools, param in (([{"type": "code_interpreter"}], "tools[0].container"),
                         ([{"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "2g"}}],
                          "tools[0].container.memory_limit"),
                         ([{"type": "code_interpreter", "container": {"type": "auto", "network_policy": {
                             "type": "allowlist", "allowed_domains": ["example.com"]}}}],
                          "tools[0].container.network_policy"),
                         ([AUTO, AUTO], "tools[1]")):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input="x", tools=tools)
        assert caught.value.body["param"] == param


def test_the_containers_api_has_openai_pythons_shapes(client):
    created = client.containers.create(name="shapes", expires_after={"anchor": "last_active_at", "minutes": 5},
                                       memory_limit="4g")
    assert created.id.startswith("cntr_") and created.object == "container" and created.status == "running"
    assert (created.name, created.memory_limit) == ("shapes", "4g")
    assert (created.expires_after.anchor, created.expires_after.minutes) == ("last_active_at", 5)
    assert created.last_active_at == created.created_at
    assert client.containers.retrieve(created.id).model_dump() == created.model_dump()
    listed = client.containers.list(name="shapes", limit=100)
    assert [c.id for c in listed.data] == [created.id]
    f = client.containers.files.create(created.id, file=("a b.txt", b"hello", "text/plain"))
    assert f.object == "container.file" and f.id.startswith("cfile_") and f.container_id == created.id
    assert client.containers.files.retrieve(f.id, container_id=created.id).model_dump() == f.model_dump()
    assert [x.id for x in client.containers.files.list(created.id).data] == [f.id]
    raw = httpx.get(f"{client.base_url}containers/{created.id}/files/{f.id}/content")
    assert raw.content == b"hello" and raw.headers["content-type"].startswith("text/plain")
    client.containers.files.delete(f.id, container_id=created.id)
    assert client.containers.files.list(created.id).data == []
    deleted = httpx.delete(f"{client.base_url}containers/{created.id}").json()
    assert deleted == {"id": created.id, "object": "container.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.containers.retrieve(created.id)
    with pytest.raises(openai.BadRequestError) as caught:
        client.containers.create(name="big", memory_limit="64g")
    assert caught.value.body["param"] == "memory_limit"


def _forbidding_bwrap(directory):
    """A stand-in for bubblewrap on a machine that forbids user namespaces: it fails as bwrap does there."""
    fake = directory / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace, likely because the kernel "
                    "does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def test_the_tool_is_refused_with_a_400_saying_why_where_the_sandbox_cannot_run(upstream, tmp_path, monkeypatch):
    from responses_gateway.tools.code_interpreter import bubblewrap, service

    fake = _forbidding_bwrap(tmp_path)
    monkeypatch.setattr(service, "make_sandbox", lambda settings, base: bubblewrap.Bubblewrap(base, bwrap=str(fake)))
    monkeypatch.setattr(service, "_probed", {})
    settings = make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"))
    with GatewayServer(settings) as gateway:
        c = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            c.responses.create(model="m", input="x", tools=[AUTO])
        assert caught.value.body["param"] == "tools[0].type"
        assert "non-privileged user namespaces" in caught.value.body["message"]
        with pytest.raises(openai.BadRequestError) as caught:
            c.containers.create(name="x")
        assert "user namespaces" in caught.value.body["message"]
        upstream.enqueue(answer("still serving"))
        assert c.responses.create(model="m", input="x").output_text == "still serving"


def test_with_code_interpreter_bubblewrap_the_gateway_does_not_start_without_it(upstream, tmp_path):
    import os
    import subprocess
    import sys

    from tests.support.backends import free_port

    _forbidding_bwrap(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "responses_gateway", "serve", "--upstream", upstream.base_url, "--port",
         str(free_port()), "--db", str(tmp_path / "r.db"), "--code-interpreter", "bubblewrap"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode != 0
    assert "the sandbox cannot run on this machine" in done.stderr and "user namespaces" in done.stderr


def test_a_csv_uploaded_through_the_files_api_is_analysed(client, upstream):
    csv = b"item,price,qty\napple,0.5,10\npear,0.8,5\nfig,2.0,3\n"
    uploaded = client.files.create(file=("sales.csv", csv, "text/csv"), purpose="user_data")
    code = ("import pandas as pd\ndf = pd.read_csv('/mnt/data/sales.csv')\n"
            "float((df.price * df.qty).sum())")
    response = run_code(client, upstream, code, tools=[{"type": "code_interpreter",
                                                        "container": {"type": "auto", "file_ids": [uploaded.id]}}])
    call = call_of(response)
    assert call.status == "completed" and logs(call) == "15.0"
    files = client.containers.files.list(call.container_id).data
    assert [(f.path, f.source, f.bytes) for f in files] == [("/mnt/data/sales.csv", "user", len(csv))]
    # and into a container made through the Containers API, by file id
    container = client.containers.create(name="by-id", file_ids=[uploaded.id])
    assert [f.path for f in client.containers.files.list(container.id).data] == ["/mnt/data/sales.csv"]
    copied = client.containers.files.create(container.id, file_id=uploaded.id)
    assert (copied.path, copied.source) == ("/mnt/data/sales.csv", "user")


def test_a_client_that_leaves_mid_call_stops_the_cell_and_the_container_keeps_its_state(client, upstream, ci_gateway):
    import time

    container = client.containers.create(name="left")
    named = [{"type": "code_interpreter", "container": container.id}]
    run_code(client, upstream, "v = 5", tools=named)
    upstream.enqueue(code_call("import time\ntime.sleep(2)\nprint('slow')\nv = 6"))
    with httpx.Client(timeout=60) as http, http.stream("POST", f"{ci_gateway.url}/v1/responses", json={
            "model": "m", "input": "x", "stream": True, "tools": named}) as resp:
        for line in resp.iter_lines():
            if "response.code_interpreter_call.interpreting" in line:
                time.sleep(0.7)  # the cell is running (sleeping): the client goes away
                break
    after = run_code(client, upstream, "v * 2", tools=named)
    assert call_of(after).status == "completed"
    assert logs(call_of(after)) == "10"  # its own result (not the abandoned cell's), and the state kept


def test_a_background_response_runs_code(client, upstream):
    import time

    upstream.enqueue(code_call("sum(range(10))"), answer("45"))
    response = client.responses.create(model="m", input="x", tools=[AUTO], background=True, include=OUTPUTS)
    deadline = time.monotonic() + 30
    while response.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.1)
        response = client.responses.retrieve(response.id, include=OUTPUTS)
    assert response.status == "completed" and logs(call_of(response)) == "45"


def test_a_websocket_turn_runs_code_and_keeps_the_container(ci_gateway, upstream):
    """WebSocket mode runs the same tool loop as HTTP: the call's events and outputs arrive as frames, and a
    second turn chained on the connection reuses the first turn's container (its state is still there)."""
    from websockets.sync.client import connect

    url = ci_gateway.url.replace("http://", "ws://", 1) + "/v1/responses"

    def turn(ws, **body) -> list[dict]:
        ws.send(json.dumps({"type": "response.create", "model": "m", "tools": [AUTO], "include": OUTPUTS, **body}))
        events = []
        while True:
            event = json.loads(ws.recv(timeout=60))
            events.append(event)
            if event["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
                return events

    with connect(url) as ws:
        upstream.enqueue(code_call("x = 41\nprint(x + 1)"), answer("It printed 42."))
        first = turn(ws, input="Run it.")
        assert first[-1]["type"] == "response.completed", first[-1]
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in first) + "data: [DONE]\n\n"
        check_stream(sse)
        types = [e["type"] for e in first]
        assert "response.code_interpreter_call.interpreting" in types
        assert "response.code_interpreter_call.completed" in types
        call = next(i for i in first[-1]["response"]["output"] if i["type"] == "code_interpreter_call")
        assert call["status"] == "completed" and call["outputs"] == [{"type": "logs", "logs": "42\n"}]

        upstream.enqueue(code_call("print(x * 2)"), answer("82."))
        second = turn(ws, input="Again.", previous_response_id=first[-1]["response"]["id"],
                      tools=[{"type": "code_interpreter", "container": call["container_id"]}])
        assert second[-1]["type"] == "response.completed", second[-1]
        again = next(i for i in second[-1]["response"]["output"] if i["type"] == "code_interpreter_call")
        assert again["container_id"] == call["container_id"]
        assert again["outputs"] == [{"type": "logs", "logs": "82\n"}]
