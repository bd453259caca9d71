"""MCP tools run by the gateway: a real MCP server (mcp SDK) on loopback, the real gateway, the openai SDK.

Every stream goes through the stream checker and the spec schemas (tests.helpers.stream).
"""

import json
import sqlite3

import openai
import pytest

from responses_gateway.configure import make as make_settings
from tests import helpers
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream
from tests.support.server import GatewayServer

SECRET = "Bearer mcp-secret-token-42"
stream = helpers.stream  # checker, spec schemas and the openai SDK's own models on every event


@pytest.fixture(scope="module")
def mcp_gateway(_upstream_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("mcp") / "db.sqlite"
    settings = make_settings(upstream_url=_upstream_server.base_url, db=str(db), mcp_allow_hosts="127.0.0.1",
                        mcp_timeout=3.0, max_tool_rounds=3)
    with GatewayServer(settings) as gw:
        gw.db = db
        yield gw


@pytest.fixture
def http(mcp_gateway):
    import httpx

    with httpx.Client(base_url=mcp_gateway.url, timeout=30) as client:
        yield client


def mcp_tool(server, **extra):
    return {"type": "mcp", "server_label": "calc", "server_url": server.url, "require_approval": "never",
            "headers": {"X-Trace": "t1"}, "authorization": SECRET.split()[1], **extra}


def call(name, args, call_id="call_1", index=0):
    return (call_id, f"calc__{name}", [json.dumps(args)])


def test_list_call_answer(http, upstream, mcp_server):
    upstream.enqueue(tool_calls_stream([call("add", {"a": 2, "b": 40})], usage=make_usage(10, 5)))
    upstream.enqueue(text_stream(["The sum is ", "42."], usage=make_usage(20, 4)))
    result = stream(http, {"model": "m", "input": "2+40?", "tools": [mcp_tool(mcp_server)]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["mcp_list_tools", "mcp_call", "message"]
    listed = {t["name"] for t in out[0]["tools"]}
    assert {"add", "echo", "slow", "explode"} <= listed
    assert out[1]["status"] == "completed" and out[1]["output"] == "42" and out[1]["error"] is None
    assert (out[1]["server_label"], out[1]["name"], json.loads(out[1]["arguments"])) == ("calc", "add",
                                                                                         {"a": 2, "b": 40})
    assert result.text == "The sum is 42."
    assert result.response["usage"]["input_tokens"] == 30  # both steps
    types = result.types
    assert types.index("response.mcp_list_tools.in_progress") < types.index("response.mcp_list_tools.completed")
    assert types.index("response.mcp_call.in_progress") < types.index("response.mcp_call_arguments.done") \
        < types.index("response.mcp_call.completed")
    # what the model saw on its second step: its call and the result, as a plain tool round trip
    second = upstream.requests[1].body
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "calc__add"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": out[1]["id"], "content": "42"}
    offered = {t["function"]["name"] for t in upstream.requests[0].body["tools"]}
    assert {"calc__add", "calc__echo"} <= offered


def test_through_the_openai_sdk(mcp_gateway, upstream, mcp_server):
    client = openai.OpenAI(base_url=f"{mcp_gateway.url}/v1", api_key="x", max_retries=0)
    upstream.enqueue(tool_calls_stream([call("echo", {"text": "hi"})]))
    upstream.enqueue(text_stream(["It said hi."]))
    with client.responses.stream(model="m", input="echo hi", tools=[mcp_tool(mcp_server)]) as s:
        events = list(s)
        final = s.get_final_response()
    assert final.output_text == "It said hi."
    assert [o.type for o in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert final.output[1].output == "hi"
    assert any(e.type == "response.mcp_call.completed" for e in events)


def test_two_calls_in_one_step(http, upstream, mcp_server):
    upstream.enqueue(tool_calls_stream([call("add", {"a": 1, "b": 1}, "c1"), call("echo", {"text": "x"}, "c2")]))
    upstream.enqueue(text_stream(["2 and x"]))
    result = stream(http, {"model": "m", "input": "both", "tools": [mcp_tool(mcp_server)]})
    calls = [i for i in result.response["output"] if i["type"] == "mcp_call"]
    assert [(c["name"], c["output"]) for c in calls] == [("add", "2"), ("echo", "x")]
    tool_messages = [m for m in upstream.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["2", "x"]


def test_mcp_and_client_function_in_one_request(http, upstream, mcp_server):
    fn = {"type": "function", "name": "local_fn", "parameters": {"type": "object", "properties": {}}}
    upstream.enqueue(tool_calls_stream([call("add", {"a": 1, "b": 2}, "c1"), ("c2", "local_fn", ["{}"])]))
    result = stream(http, {"model": "m", "input": "x", "tools": [mcp_tool(mcp_server), fn]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["mcp_list_tools", "mcp_call", "function_call"]
    assert out[1]["output"] == "3"
    assert len(upstream.requests) == 1  # the client runs its function before the model goes on
    # the client's next turn carries the MCP result to the model
    upstream.enqueue(text_stream(["done"]))
    stream(http, {"model": "m", "previous_response_id": result.response["id"], "tools": [mcp_tool(mcp_server), fn],
                  "input": [{"type": "function_call_output", "call_id": "c2", "output": "ok"}]})
    roles = [m["role"] for m in upstream.requests[1].body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool"]
    assert upstream.requests[1].body["messages"][1]["tool_calls"][0]["function"]["name"] == "calc__add"


def test_approval_then_approve(http, upstream, mcp_server):
    before = mcp_server.calls["add"]
    tool = mcp_tool(mcp_server, require_approval="always")
    upstream.enqueue(tool_calls_stream([call("add", {"a": 5, "b": 5})]))
    first = stream(http, {"model": "m", "input": "5+5", "tools": [tool]})
    out = first.response["output"]
    assert [i["type"] for i in out] == ["mcp_list_tools", "mcp_approval_request"]
    request = out[1]
    assert (request["name"], json.loads(request["arguments"])) == ("add", {"a": 5, "b": 5})
    assert mcp_server.calls["add"] == before  # nothing ran

    upstream.enqueue(text_stream(["Ten."]))
    second = stream(http, {"model": "m", "previous_response_id": first.response["id"], "tools": [tool],
                           "input": [{"type": "mcp_approval_response", "approve": True,
                                      "approval_request_id": request["id"]}]})
    out2 = second.response["output"]
    assert [i["type"] for i in out2] == ["mcp_call", "message"]  # the stored tool list is reused
    assert out2[0]["approval_request_id"] == request["id"] and out2[0]["output"] == "10"
    assert mcp_server.calls["add"] == before + 1
    assert second.text == "Ten."
    messages = upstream.requests[1].body["messages"]
    assert messages[-1] == {"role": "tool", "tool_call_id": out2[0]["id"], "content": "10"}


def test_approval_declined(http, upstream, mcp_server):
    tool = mcp_tool(mcp_server, require_approval={"always": {"tool_names": ["add"]}})
    upstream.enqueue(tool_calls_stream([call("add", {"a": 1, "b": 1})]))
    first = stream(http, {"model": "m", "input": "1+1", "tools": [tool]})
    request = first.response["output"][-1]
    upstream.enqueue(text_stream(["OK, I won't."]))
    second = stream(http, {"model": "m", "previous_response_id": first.response["id"], "tools": [tool],
                           "input": [{"type": "mcp_approval_response", "approve": False,
                                      "approval_request_id": request["id"]}]})
    assert [i["type"] for i in second.response["output"]] == ["message"]
    assert upstream.requests[1].body["messages"][-1]["content"] == "The user declined to run this tool call."


def test_never_for_some_tools(http, upstream, mcp_server):
    tool = mcp_tool(mcp_server, require_approval={"never": {"tool_names": ["echo"]}})
    upstream.enqueue(tool_calls_stream([call("echo", {"text": "free"})]))
    upstream.enqueue(text_stream(["free"]))
    result = stream(http, {"model": "m", "input": "x", "tools": [tool]})
    assert [i["type"] for i in result.response["output"]] == ["mcp_list_tools", "mcp_call", "message"]


def test_two_servers_in_one_request(http, upstream, mcp_server):
    second = {**mcp_tool(mcp_server), "server_label": "calc2", "allowed_tools": ["echo"]}
    upstream.enqueue(tool_calls_stream([call("add", {"a": 1, "b": 2}, "c1"),
                                        ("c2", "calc2__echo", [json.dumps({"text": "two"})])]))
    upstream.enqueue(text_stream(["3 and two"]))
    result = stream(http, {"model": "m", "input": "x", "tools": [mcp_tool(mcp_server), second]})
    out = result.response["output"]
    assert [(i["type"], i["server_label"]) for i in out[:4]] == [
        ("mcp_list_tools", "calc"), ("mcp_list_tools", "calc2"), ("mcp_call", "calc"), ("mcp_call", "calc2")]
    assert [i.get("output") for i in out[2:4]] == ["3", "two"]
    assert [t["name"] for t in out[1]["tools"]] == ["echo"]


def test_server_unreachable(http, upstream):
    upstream.enqueue(text_stream(["I could not reach the tools."]))
    tool = {"type": "mcp", "server_label": "gone", "server_url": "http://127.0.0.1:9/mcp", "require_approval": "never"}
    result = stream(http, {"model": "m", "input": "x", "tools": [tool]})
    (listing, message) = result.response["output"]
    assert listing["type"] == "mcp_list_tools" and listing["error"]
    assert "response.mcp_list_tools.failed" in result.types
    assert result.terminal["type"] == "response.completed"
    assert "tools" not in upstream.requests[0].body


def test_loopback_refused_without_allow_list(upstream, mcp_server, tmp_path):
    import httpx

    settings = make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "db"))
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        upstream.enqueue(text_stream(["no tools"]))
        result = stream(client, {"model": "m", "input": "x", "tools": [mcp_tool(mcp_server)]})
    error = result.response["output"][0]["error"]
    assert "loopback" in error or "not allowed" in error or "refus" in error


def test_tool_error_and_timeout(http, upstream, mcp_server):
    upstream.enqueue(tool_calls_stream([call("explode", {}, "c1"), call("slow", {"seconds": 5}, "c2")]))
    upstream.enqueue(text_stream(["Both failed."]))
    result = stream(http, {"model": "m", "input": "x", "tools": [mcp_tool(mcp_server)]})
    calls = [i for i in result.response["output"] if i["type"] == "mcp_call"]
    assert [c["status"] for c in calls] == ["failed", "failed"]
    assert calls[0]["error"]["type"] == "mcp_tool_execution_error"
    assert "kaboom" in calls[0]["error"]["content"][0]["text"]
    assert calls[1]["error"]["type"] == "mcp_protocol_error" and "timed out" in calls[1]["error"]["message"]
    assert result.types.count("response.mcp_call.failed") == 2
    tool_messages = [m["content"] for m in upstream.requests[1].body["messages"] if m["role"] == "tool"]
    assert tool_messages[0].startswith("Error: ") and "timed out" in tool_messages[1]


def test_allowed_tools_hide_the_rest(http, upstream, mcp_server):
    upstream.enqueue(text_stream(["ok"]))
    result = stream(http, {"model": "m", "input": "x", "tools": [mcp_tool(mcp_server, allowed_tools=["echo"])]})
    assert [t["name"] for t in result.response["output"][0]["tools"]] == ["echo"]
    assert [t["function"]["name"] for t in upstream.requests[0].body["tools"]] == ["calc__echo"]


def test_max_tool_calls(http, upstream, mcp_server):
    upstream.enqueue(tool_calls_stream([call("add", {"a": 1, "b": 1}, "c1"), call("add", {"a": 2, "b": 2}, "c2")]))
    upstream.enqueue(text_stream(["Only one ran."]))
    result = stream(http, {"model": "m", "input": "x", "tools": [mcp_tool(mcp_server)], "max_tool_calls": 1})
    calls = [i for i in result.response["output"] if i["type"] == "mcp_call"]
    assert [c["status"] for c in calls] == ["completed", "failed"]
    assert "max_tool_calls" in calls[1]["error"]["message"]
    assert "tools" not in upstream.requests[1].body  # spent: the model must answer now
    assert result.response["max_tool_calls"] == 1


def test_round_cap_stops_a_runaway_loop(http, upstream, mcp_server):
    for i in range(3):
        upstream.enqueue(tool_calls_stream([call("echo", {"text": str(i)}, f"c{i}")]))
    result = stream(http, {"model": "m", "input": "loop", "tools": [mcp_tool(mcp_server)]})
    assert result.terminal["type"] == "response.incomplete"
    assert result.response["incomplete_details"] == {"reason": "max_messages"}
    assert len(upstream.requests) == 3


def test_headers_and_authorization_are_used_but_never_kept(http, mcp_gateway, upstream, mcp_server):
    upstream.enqueue(tool_calls_stream([call("whoami", {})]))
    upstream.enqueue(text_stream(["ok"]))
    result = stream(http, {"model": "m", "input": "who", "tools": [mcp_tool(mcp_server)]})
    whoami = result.response["output"][1]
    assert whoami["output"] == SECRET  # forwarded to the server...
    rid = result.response["id"]
    echoed = result.response["tools"][0]
    assert "authorization" not in echoed and "headers" not in echoed
    stored = http.get(f"/v1/responses/{rid}").text
    listed = http.get(f"/v1/responses/{rid}/input_items").text
    assert "mcp-secret-token-42" not in listed and "X-Trace" not in stored
    with sqlite3.connect(mcp_gateway.db) as db:
        rows = db.execute("SELECT body FROM responses UNION ALL SELECT body FROM items").fetchall()
    # ...but only the tool's own output (which echoes it, by design of this test tool) holds the token
    for (body,) in rows:
        assert '"authorization"' not in body and "X-Trace" not in body


IMPORTS_MCP_ONLY_WHEN_RUN = '''
import sys
from starlette.testclient import TestClient
from responses_gateway.app import create_app
from responses_gateway.configure import make as make_settings

def post(http, **body):
    return http.post("/v1/responses", json={"model": "demo", "input": "hi", **body})

with TestClient(create_app(make_settings(db="none"))) as http:
    assert post(http, stream=True).status_code == 200
    assert post(http, tools=[{"type": "function", "name": "f"}]).status_code == 200
    bad = post(http, tools=[{"type": "mcp", "server_label": "s"}])  # parsed and refused without the SDK
    assert bad.status_code == 400 and "server_url" in bad.json()["error"]["message"], bad.text
    print("mcp" in sys.modules)
    ran = post(http, tools=[{"type": "mcp", "server_label": "s", "server_url": "http://127.0.0.1:9/mcp"}])
    assert ran.status_code == 200 and ran.json()["output"][0]["type"] == "mcp_list_tools", ran.text
    print("mcp" in sys.modules)
'''


def test_the_mcp_sdk_is_imported_only_by_requests_that_run_mcp_tools():
    """The SDK costs ~25 MiB of RSS per worker: requests without MCP tools (and the parsing of a declaration)
    must not import it; a request that runs MCP tools does."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", IMPORTS_MCP_ONLY_WHEN_RUN], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
