"""The OpenAI Agents SDK for Python (`openai-agents`), on its Responses API model, against the gateway.

The agent talks to the gateway through `OpenAIResponsesModel` and an `AsyncOpenAI` client whose base URL is
the gateway; the gateway talks to the fake Chat Completions upstream, scripted per test.
"""

from __future__ import annotations

import asyncio
import json

import openai

from tests.support import needs

needs.python_package("agents", "pip install openai-agents (in the `test` extra)")

from agents import (  # noqa: E402
    Agent,
    OpenAIResponsesModel,
    RunContextWrapper,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ReasoningItem, ToolCallItem, ToolCallOutputItem  # noqa: E402

from tests.support.fake_chat import (  # noqa: E402
    make_usage,
    reasoning_then_text,
    sse_chunks,
    text_stream,
    tool_calls_stream,
)

set_tracing_disabled(True)


def _run(gateway, make_coro, tools=(), timeout: float = 60):
    """Build an agent on the gateway and run `make_coro(agent)` in a fresh event loop.

    The HTTP client is made and closed inside that loop, so no connection outlives it.
    """

    async def main():
        async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0,
                                      timeout=30) as client:
            agent = Agent(
                name="assistant",
                instructions="You are a helpful assistant.",
                model=OpenAIResponsesModel(model="fake-model", openai_client=client),
                tools=list(tools),
            )
            return await asyncio.wait_for(make_coro(agent), timeout)

    return asyncio.run(main())


# --------------------------------------------------------------------------- (a) plain text


def test_run_plain_text(gateway, upstream):
    upstream.enqueue(text_stream(["Hello ", "from ", "the gateway."], usage=make_usage(12, 4)))
    result = _run(gateway, lambda agent: Runner.run(agent, "Say hello."))
    assert result.final_output == "Hello from the gateway."
    (response,) = result.raw_responses
    assert response.usage.input_tokens == 12 and response.usage.output_tokens == 4
    assert response.usage.total_tokens == 16
    assert response.response_id and response.response_id.startswith("resp_")
    (sent,) = upstream.requests
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Say hello."},
    ]


# --------------------------------------------------------------------------- (b) a function tool


def _weather_tool(calls: list):
    @function_tool
    def get_weather(ctx: RunContextWrapper, city: str, unit: str = "celsius") -> str:
        """Get the current weather for a city.

        Args:
            city: The city name.
            unit: celsius or fahrenheit.
        """
        calls.append({"city": city, "unit": unit})
        return f"Sunny, 21 degrees {unit} in {city}"

    return get_weather


def _enqueue_tool_then_text(upstream) -> None:
    upstream.enqueue(
        tool_calls_stream([("call_a1", "get_weather", ['{"city": ', '"Paris", "unit": "celsius"}'])],
                          usage=make_usage(30, 8)),
        text_stream(["It is sunny", " in Paris."], usage=make_usage(50, 6)),
    )


def _check_tool_requests(upstream) -> None:
    assert len(upstream.requests) == 2
    first, second = (r.body for r in upstream.requests)
    (offered,) = first["tools"]
    assert offered["type"] == "function" and offered["function"]["name"] == "get_weather"
    assert offered["function"]["parameters"]["required"] == ["city", "unit"]
    assert set(offered["function"]["parameters"]["properties"]) == {"city", "unit"}

    messages = second["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assistant, tool_msg = messages[2], messages[3]
    (call,) = assistant["tool_calls"]
    assert call["id"] == "call_a1" and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    assert tool_msg == {"role": "tool", "tool_call_id": "call_a1",
                        "content": "Sunny, 21 degrees celsius in Paris"}


def test_run_function_tool(gateway, upstream):
    calls: list[dict] = []
    _enqueue_tool_then_text(upstream)
    result = _run(gateway, lambda agent: Runner.run(agent, "What is the weather in Paris?"),
                  tools=[_weather_tool(calls)])

    assert result.final_output == "It is sunny in Paris."
    assert calls == [{"city": "Paris", "unit": "celsius"}]
    call_items = [i for i in result.new_items if isinstance(i, ToolCallItem)]
    output_items = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert [(i.raw_item.call_id, i.raw_item.name) for i in call_items] == [("call_a1", "get_weather")]
    assert [i.output for i in output_items] == ["Sunny, 21 degrees celsius in Paris"]
    assert len(result.raw_responses) == 2
    _check_tool_requests(upstream)


# --------------------------------------------------------------------------- (c) streaming


async def _stream(agent: Agent, prompt: str):
    result = Runner.run_streamed(agent, prompt)
    raw_types: list[str] = []
    deltas: list[str] = []
    item_events: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event":
            raw_types.append(event.data.type)
            if event.data.type == "response.output_text.delta":
                deltas.append(event.data.delta)
        elif event.type == "run_item_stream_event":
            item_events.append(event.name)
    return result, raw_types, deltas, item_events


def test_run_streamed_text(gateway, upstream):
    upstream.enqueue(text_stream(["Stream", "ing ", "works", "."], usage=make_usage(9, 4)))
    result, raw_types, deltas, item_events = _run(gateway, lambda agent: _stream(agent, "Stream something."))

    assert result.is_complete
    assert deltas == ["Stream", "ing ", "works", "."]
    assert "".join(deltas) == result.final_output == "Streaming works."
    assert raw_types[:2] == ["response.created", "response.in_progress"]
    assert raw_types[-1] == "response.completed"
    assert "message_output_created" in item_events
    (response,) = result.raw_responses
    assert response.usage.output_tokens == 4
    assert upstream.requests[0].body["stream"] is True


def test_run_streamed_function_tool(gateway, upstream):
    calls: list[dict] = []
    _enqueue_tool_then_text(upstream)
    result, raw_types, deltas, item_events = _run(
        gateway, lambda agent: _stream(agent, "What is the weather in Paris?"), tools=[_weather_tool(calls)])

    assert calls == [{"city": "Paris", "unit": "celsius"}]
    assert "".join(deltas) == result.final_output == "It is sunny in Paris."
    assert "response.function_call_arguments.delta" in raw_types
    assert raw_types.count("response.completed") == 2
    assert item_events.index("tool_called") < item_events.index("tool_output") \
        < item_events.index("message_output_created")
    _check_tool_requests(upstream)


# --------------------------------------------------------------------------- reasoning


def test_run_streamed_reasoning_then_tool(gateway, upstream):
    """Reasoning reaches the agent as a ReasoningItem, and goes back to the upstream on the next turn."""

    @function_tool
    def get_time() -> str:
        """The current time."""
        return "noon"

    call = {"index": 0, "id": "call_t1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    upstream.enqueue(
        sse_chunks([{"reasoning_content": "Need the "}, {"reasoning_content": "time."}, {"tool_calls": [call]}],
                   finish_reason="tool_calls", usage=make_usage(10, 6, reasoning_tokens=3)),
        reasoning_then_text(["Got it."], ["It is ", "noon."], usage=make_usage(20, 5, reasoning_tokens=2)),
    )
    result, raw_types, deltas, item_events = _run(
        gateway, lambda agent: _stream(agent, "What time is it?"), tools=[get_time])

    assert "".join(deltas) == result.final_output == "It is noon."
    assert "response.reasoning_text.delta" in raw_types
    reasoning = [i for i in result.new_items if isinstance(i, ReasoningItem)]
    assert [[c.text for c in i.raw_item.content] for i in reasoning] == [["Need the time."], ["Got it."]]
    assert item_events.count("reasoning_item_created") == 2
    assert [r.usage.output_tokens_details.reasoning_tokens for r in result.raw_responses] == [3, 2]

    second = upstream.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assistant = second[2]
    assert assistant["tool_calls"][0]["id"] == "call_t1"
    # The reasoning the agent sent back is passed on with its tool call (in whichever field the adapter uses).
    assert "Need the time." in json.dumps(assistant)
    assert second[3] == {"role": "tool", "tool_call_id": "call_t1", "content": "noon"}
