"""LangChain and pydantic-ai over an Anthropic route with a reasoning model: a tool call, then the answer.

Their second turn replays the reasoning item the way each client keeps it (by id, without the signed thinking
block), and Anthropic rejects a tool-use continuation whose assistant turn does not start with a thinking
block. The fake Anthropic here enforces exactly that rule, as the real API does.
"""

from __future__ import annotations

import pytest

from responses_gateway.config import Settings
from responses_gateway.upstreams.anthropic import AnthropicUpstream
from responses_gateway.upstreams.base import Route
from tests.support.fake_anthropic import (
    FakeAnthropic,
    RecordedRequest,
    Stream,
    error_json,
    message_stream,
    text_block,
    thinking_block,
    tool_use_block,
)
from tests.support.server import GatewayServer

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/Vw=="
THINKING_REPLAY = "anthropic thinking-block replay"


def anthropic_answer(request: RecordedRequest):
    """Think, then call get_weather; after the tool's result, think and answer. Rejects what Anthropic rejects."""
    body = request.body or {}
    assistant = [m for m in body.get("messages", []) if m["role"] == "assistant"]
    if body.get("thinking", {}).get("type") == "enabled" and assistant:
        first = assistant[-1]["content"][0]["type"] if assistant[-1]["content"] else None
        if first not in ("thinking", "redacted_thinking"):
            return error_json(400, "invalid_request_error",
                              f"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                              f"`{first}`. When `thinking` is enabled, a final `assistant` message must start with "
                              "a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
                              "blocks).")
    if not assistant:
        return Stream(message_stream(thinking_block(0, ["I need ", "the weather."], SIGNATURE),
                                     tool_use_block(1, "toolu_01W", "get_weather", ['{"location"', ': "Paris"}']),
                                     stop_reason="tool_use"))
    return Stream(message_stream(thinking_block(0, ["It is warm."], SIGNATURE), text_block(1, ["It is 21."])))


@pytest.fixture(scope="module")
def anthropic_gateway(tmp_path_factory):
    with FakeAnthropic() as fake:
        fake.default = anthropic_answer
        upstream = AnthropicUpstream(Route(kind="anthropic", base_url=fake.url, api_key="k", max_tokens=8192))
        db = tmp_path_factory.mktemp("clients-anthropic") / "responses.db"
        with GatewayServer(Settings(db=str(db)), upstream=upstream) as server:
            yield server


def get_weather(location: str) -> str:
    """Get the weather for a location."""
    return f"21 degrees in {location}"


@pytest.mark.xfail(strict=True, reason=THINKING_REPLAY)
def test_langchain_second_turn_with_reasoning(anthropic_gateway):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="claude-sonnet-4-5", base_url=f"{anthropic_gateway.url}/v1", api_key="k",
                     use_responses_api=True, reasoning={"effort": "medium"}, max_retries=0)
    weather = tool(get_weather)
    asked = llm.bind_tools([weather]).invoke("Weather in Paris?")
    assert asked.tool_calls[0]["args"] == {"location": "Paris"}
    answer = llm.bind_tools([weather]).invoke(
        [HumanMessage("Weather in Paris?"), asked, ToolMessage("21 degrees", tool_call_id=asked.tool_calls[0]["id"])])
    assert answer.text == "It is 21."


@pytest.mark.xfail(strict=True, reason=THINKING_REPLAY)
def test_pydantic_ai_second_turn_with_reasoning(anthropic_gateway):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel, OpenAIResponsesModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel("claude-sonnet-4-5", provider=OpenAIProvider(
        base_url=f"{anthropic_gateway.url}/v1", api_key="k"))
    agent = Agent(model, tools=[get_weather])
    result = agent.run_sync("Weather in Paris?",
                            model_settings=OpenAIResponsesModelSettings(openai_reasoning_effort="medium"))
    assert result.output == "It is 21."
