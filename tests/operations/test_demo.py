"""The demo model (`serve` with no upstream): what a newcomer tries in the README's first minute — chaining
with `previous_response_id` and conversations — visibly works, `input_tokens` counts the whole input, and the
tools a request declares are called as a real model would call them: the call items and events of each kind,
an answer from the result, and the citations of a search (issue 35). The README's first run is run as written."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from responses_gateway.configure import make as make_settings
from tests import helpers
from tests.support import needs, snippets
from tests.support.server import GatewayServer

README = Path(__file__).resolve().parents[2] / "README.md"
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def gateway(_fake_web, tmp_path_factory):
    """The demo behind a gateway that runs every tool: a store (file_search), a search provider (the fake web),
    MCP servers on loopback, and the code interpreter where bubblewrap runs. (conftest's `client` and `http`
    reach this one.)"""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    settings = make_settings(upstream_url="demo", db=str(db), web_search=f"searxng={_fake_web.url}/searxng",
                             web_fetch_allow_hosts=_fake_web.host, mcp_allow_hosts="127.0.0.1")
    with GatewayServer(settings) as server:
        yield server


def test_demo_answers_from_the_whole_history(client):
    first = client.responses.create(model="demo", input="My name is Ada.")
    second = client.responses.create(model="demo", input="What is my name?", previous_response_id=first.id)
    assert "What is my name?" in second.output_text and "My name is Ada." in second.output_text
    assert "My name is Ada." not in second.output_text.split("You said:")[1].split("Earlier")[0]
    counted = client.responses.input_tokens.count(model="demo", input="What is my name?",
                                                  previous_response_id=first.id)
    assert second.usage.input_tokens == counted.input_tokens > first.usage.input_tokens


def test_demo_answers_from_a_conversation(client):
    conversation = client.conversations.create(items=[{"role": "user", "content": "I like tea."}])
    answer = client.responses.create(model="demo", input="And you?", conversation=conversation.id)
    assert "And you?" in answer.output_text and "I like tea." in answer.output_text


def test_the_readme_first_run_as_written(gateway):
    """Each block of the README's "First run", with the gateway's address put in, prints what its comments say."""
    blocks = [b for b in snippets.blocks(README) if b.section == "First run" and b.lang == "python"]
    assert len(blocks) == 2
    printed = []
    for block in blocks:
        code = snippets.localize(block.code, {"http://127.0.0.1:8080": gateway.url})
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{block.where(README)}\n{done.stderr}"
        printed += done.stdout.splitlines()
    assert printed[0].startswith("[demo] ") and printed[0].endswith(
        "You said: What is my name? Earlier you said: “My name is Ada.”")
    assert int(printed[1]) > 0
    assert printed[2:] == ['function_call get_weather {"city":"Paris"}', "[demo] get_weather returned: 18°C"]


# --------------------------------------------------------------------------- tools, as a model calls them


def test_a_function_is_called_streamed_then_answered_from_its_output(http):
    asked = helpers.stream(http, {"model": "demo", "input": "What is the weather in Paris?", "tools": [WEATHER]})
    out = asked.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "function_call"]
    assert (out[1]["name"], out[1]["arguments"]) == ("get_weather", '{"city":"Paris"}')
    deltas = [e["delta"] for e in asked.events if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and "".join(deltas) == out[1]["arguments"]  # streamed in pieces, as models do
    assert "response.function_call_arguments.done" in asked.types
    answered = helpers.stream(http, {"model": "demo", "tools": [WEATHER], "previous_response_id": asked.response["id"],
                                     "input": [{"type": "function_call_output", "call_id": out[1]["call_id"],
                                                "output": "18°C and sunny"}]})
    assert answered.text == "[demo] get_weather returned: 18°C and sunny"


def test_a_clients_tool_that_does_not_fit_is_not_called(client):
    said = client.responses.create(model="demo", input="Write a haiku.", tools=[WEATHER])
    assert [i.type for i in said.output] == ["reasoning", "message"] and "Write a haiku." in said.output_text


def test_file_search_is_called_and_its_passage_cited(client, http):
    policy = client.files.create(file=("policy.txt", b"Refunds are accepted within 30 days of delivery."),
                                 purpose="assistants")
    store = client.vector_stores.create(name="policies", file_ids=[policy.id])
    for _ in range(300):
        if client.vector_stores.retrieve(store.id).status != "in_progress":
            break
        time.sleep(0.1)
    result = helpers.stream(http, {"model": "demo", "input": "How long do I have to get a refund?",
                                   "tools": [{"type": "file_search", "vector_store_ids": [store.id]}],
                                   "include": ["file_search_call.results"]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "file_search_call", "reasoning", "message"]
    assert out[1]["queries"] == ["How long do I have to get a refund"] and out[1]["results"][0]["file_id"] == policy.id
    for kind in ("in_progress", "searching", "completed"):
        assert f"response.file_search_call.{kind}" in result.types
    assert result.text == "[demo] file_search found in policy.txt: “Refunds are accepted within 30 days of delivery.”"
    (added,) = [e["annotation"] for e in result.events if e["type"] == "response.output_text.annotation.added"]
    assert added == {"type": "file_citation", "file_id": policy.id, "filename": "policy.txt",
                     "index": len(result.text)}
    assert out[3]["content"][0]["annotations"] == [added]


def test_web_search_is_called_and_the_page_cited(http, web):
    article = web.page("article")
    result = helpers.stream(http, {"model": "demo", "input": "What did the Fed decide?",
                                   "tools": [{"type": "web_search"}]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "web_search_call", "reasoning", "message"]
    assert out[1]["action"]["type"] == "search" and out[1]["action"]["query"] == "What did the Fed decide"
    assert web.seen("/searxng/search")[0].query["q"] == "What did the Fed decide"
    for kind in ("in_progress", "searching", "completed"):
        assert f"response.web_search_call.{kind}" in result.types
    title = "Interest rates & the Fed – Example News"
    assert result.text == f"[demo] web_search found “{title}” ([127.0.0.1]({article}))."
    (added,) = [e["annotation"] for e in result.events if e["type"] == "response.output_text.annotation.added"]
    assert (added["type"], added["url"], added["title"]) == ("url_citation", article, title)
    assert result.text[added["start_index"]:added["end_index"]] == f"([127.0.0.1]({article}))"


def test_code_interpreter_runs_the_arithmetic_of_the_question(http):
    needs.bubblewrap()
    result = helpers.stream(http, {"model": "demo", "input": "What is 2**100?", "include":
                                   ["code_interpreter_call.outputs"],
                                   "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "code_interpreter_call", "reasoning", "message"]
    assert out[1]["code"] == "print(2**100)\n" and out[1]["outputs"] == [
        {"type": "logs", "logs": f"{2**100}\n"}]
    code = [e["delta"] for e in result.events if e["type"] == "response.code_interpreter_call_code.delta"]
    assert "".join(code) == out[1]["code"]
    assert f"{2**100}" in result.text


def test_an_mcp_tool_is_listed_called_with_the_questions_numbers_and_answered(http, mcp_server):
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url, "require_approval": "never"}
    result = helpers.stream(http, {"model": "demo", "input": "Add 2 and 40", "tools": [tool]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["mcp_list_tools", "reasoning", "mcp_call", "reasoning", "message"]
    assert (out[2]["name"], out[2]["arguments"], out[2]["output"]) == ("add", '{"a":2,"b":40}', "42")
    assert "response.mcp_call_arguments.delta" in result.types and "response.mcp_call.completed" in result.types
    assert result.text == "[demo] add returned: 42"


def test_an_mcp_call_waits_for_approval_as_with_a_model(client, mcp_server):
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url}
    asked = client.responses.create(model="demo", input="Echo the text 'hi there'", tools=[tool])
    request = asked.output[-1]
    assert (request.type, request.name) == ("mcp_approval_request", "echo")
    approved = client.responses.create(model="demo", tools=[tool], previous_response_id=asked.id, input=[
        {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}])
    call = next(i for i in approved.output if i.type == "mcp_call")
    assert call.output and approved.output_text == f"[demo] echo returned: {call.output}"
