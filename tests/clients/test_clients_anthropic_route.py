"""LangChain and pydantic-ai over an Anthropic route with a reasoning model: a tool call, then the answer.

Their second turn replays the reasoning item the way each client keeps it (by id, without the signed thinking
block), and Anthropic rejects a tool-use continuation whose assistant turn does not start with a thinking
block. The fake Anthropic enforces that rule (and the others Anthropic has), as the real API does: the gateway
brings the stored thinking back, or leaves thinking off for that call.
"""

from __future__ import annotations

import pytest

from responses_gateway.config import Settings
from responses_gateway.route import Route
from responses_gateway.upstreams.anthropic import AnthropicUpstream
from tests.support import needs
from tests.support.fake_anthropic import (
    FakeAnthropic,
    RecordedRequest,
    Stream,
    message_stream,
    text_block,
    thinking_block,
    tool_use_block,
)
from tests.support.server import GatewayServer

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/Vw=="


def anthropic_answer(request: RecordedRequest):
    """Call get_weather; after the tool's result, answer. Thinks first when thinking is on, as Claude does.
    (FakeAnthropic answers 400 to what Anthropic refuses before this script runs.)"""
    body = request.body or {}
    thinks = (body.get("thinking") or {}).get("type") == "enabled"
    if not any(m["role"] == "assistant" for m in body["messages"]):
        return Stream(message_stream(*([thinking_block(0, ["I need ", "the weather."], SIGNATURE)] if thinks else []),
                                     tool_use_block(int(thinks), "toolu_01W", "get_weather",
                                                    ['{"location"', ': "Paris"}']),
                                     stop_reason="tool_use"))
    return Stream(message_stream(*([thinking_block(0, ["It is warm."], SIGNATURE)] if thinks else []),
                                 text_block(int(thinks), ["It is 21."])))


@pytest.fixture(scope="module")
def _fake():
    with FakeAnthropic() as fake:
        fake.default = anthropic_answer
        yield fake


@pytest.fixture
def fake(_fake):
    _fake.reset()
    return _fake


@pytest.fixture(scope="module")
def anthropic_gateway(_fake, tmp_path_factory):
    upstream = AnthropicUpstream(Route(kind="anthropic", base_url=_fake.url, api_key="k", max_tokens=8192))
    db = tmp_path_factory.mktemp("clients-anthropic") / "responses.db"
    with GatewayServer(Settings(db=str(db)), upstream=upstream) as server:
        yield server


def get_weather(location: str) -> str:
    """Get the weather for a location."""
    return f"21 degrees in {location}"


def test_langchain_second_turn_with_reasoning(anthropic_gateway, fake):
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


def test_pydantic_ai_second_turn_with_reasoning(anthropic_gateway, fake):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel, OpenAIResponsesModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel("claude-sonnet-4-5", provider=OpenAIProvider(
        base_url=f"{anthropic_gateway.url}/v1", api_key="k"))
    agent = Agent(model, tools=[get_weather])
    result = agent.run_sync("Weather in Paris?",
                            model_settings=OpenAIResponsesModelSettings(openai_reasoning_effort="medium"))
    assert result.output == "It is 21."


def _agents_run(gateway, model_settings):
    """The Agents SDK (stateless: it sends the whole history each turn) asking for the weather with get_weather."""
    import asyncio

    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    async def main():
        async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as client:
            agent = Agent(name="assistant", instructions="Be brief.", tools=[function_tool(get_weather)],
                          model=OpenAIResponsesModel(model="claude-sonnet-4-5", openai_client=client),
                          model_settings=model_settings)
            return await Runner.run(agent, "Weather in Paris?")

    return asyncio.run(main())


def test_agents_sdk_reasoning_with_required_tool_choice(anthropic_gateway, fake):
    """Anthropic refuses thinking with a forced tool choice: the forced call goes without thinking."""
    needs.python_package("agents")
    from agents import ModelSettings
    from openai.types.shared import Reasoning

    result = _agents_run(anthropic_gateway, ModelSettings(reasoning=Reasoning(effort="medium"),
                                                          tool_choice="required"))
    assert result.final_output == "It is 21."
    first, second = (r.body for r in fake.requests)
    assert first["tool_choice"] == {"type": "any"} and "thinking" not in first
    # the SDK lets the model choose after a forced call; the turn being continued has no thinking, so none
    assert "thinking" not in second


def test_agents_sdk_two_turn_stateless_replays_the_signed_thinking(anthropic_gateway, fake):
    """The SDK sends its reasoning item back by id alone; the gateway's stored copy has the signed block."""
    needs.python_package("agents")
    from agents import ModelSettings
    from openai.types.shared import Reasoning

    result = _agents_run(anthropic_gateway, ModelSettings(reasoning=Reasoning(effort="medium")))
    assert result.final_output == "It is 21."
    sent = fake.requests[1].body
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert sent["messages"][1]["content"][0] == {"type": "thinking", "thinking": "I need the weather.",
                                                 "signature": SIGNATURE}
