"""docs/architecture.md: its example gateway-run tool — a kit with a settings group, a service and an HTTP API —
registered and run as written behind a real gateway."""

import re
import types
from pathlib import Path

import httpx
import openai
import pytest

from responses_gateway import configure
from responses_gateway.configure import make as make_settings
from responses_gateway.tools import kits
from tests.support.fake_chat import Stream, text_stream, tool_calls_stream
from tests.support.server import GatewayServer

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _example_module() -> types.ModuleType:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    source = next(b for b in blocks if "class WordCount" in b)
    module = types.ModuleType("word_count")
    exec(compile(source, str(DOC), "exec"), module.__dict__)
    return module


@pytest.fixture
def word_count_gateway(upstream, tmp_path):
    kits.register(_example_module().KIT)
    try:
        settings = make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"), word_count_max_chars=30)
        with GatewayServer(settings) as gateway:
            yield gateway
    finally:
        kits.unregister("word_count")


def test_the_documented_tool_runs_between_upstream_steps(word_count_gateway, upstream):
    upstream.enqueue(Stream(tool_calls_stream([("call_1", "word_count", ['{"text": "one two', ' three"}'])])),
                     Stream(text_stream(["That is ", "three words."])))
    client = openai.OpenAI(base_url=f"{word_count_gateway.url}/v1", api_key="unused", max_retries=0)
    response = client.responses.create(model="m", input="How many words in 'one two three'?",
                                       tools=[{"type": "word_count"}])
    assert response.status == "completed"
    call, message = response.output
    assert (call.type, call.status, call.count, call.text) == ("word_count_call", "completed", 3, "one two three")
    assert response.output_text == "That is three words."
    assert [t.type for t in response.tools] == ["word_count"]
    offered = upstream.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered] == ["word_count"]
    second = upstream.requests[1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": call.id, "content": "3"}

    # the next turn renders the stored call the same way
    upstream.enqueue(Stream(text_stream(["Yes."])))
    client.responses.create(model="m", input="Sure?", previous_response_id=response.id, tools=[{"type": "word_count"}])
    assert {"role": "tool", "tool_call_id": call.id, "content": "3"} in upstream.requests[2].body["messages"]

    # its service counted, and its own HTTP API says so
    assert httpx.get(f"{word_count_gateway.url}/v1/word_count/stats").json() == {"words": 3}


def test_the_documented_tool_has_its_setting_flag_and_service(word_count_gateway, upstream):
    """`--word-count-max-chars` (here 30) is the service's bound: a longer text is a failed call the model sees."""
    assert "--word-count-max-chars" in configure.readme_tables()  # a flag, a variable and a README row
    upstream.enqueue(Stream(tool_calls_stream([("call_1", "word_count", ['{"text": "' + "word " * 10 + '"}'])])),
                     Stream(text_stream(["Too long."])))
    client = openai.OpenAI(base_url=f"{word_count_gateway.url}/v1", api_key="unused", max_retries=0)
    response = client.responses.create(model="m", input="count", tools=[{"type": "word_count"}])
    call = response.output[0]
    assert (call.type, call.status) == ("word_count_call", "failed")
    assert "longer than 30 characters" in upstream.requests[1].body["messages"][-1]["content"]


def test_the_documented_tool_refuses_options_with_a_400(word_count_gateway):
    client = openai.OpenAI(base_url=f"{word_count_gateway.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="x", tools=[{"type": "word_count", "depth": 2}])
    assert caught.value.body["param"] == "tools[0]"
