"""The official openai Python SDK against the running gateway, unchanged."""

import typing

from openai.types.responses import ResponseStreamEvent

from tests.support.fake_chat import make_usage, reasoning_then_text, text_stream, tool_calls_stream

KNOWN_EVENTS = {
    typing.get_args(cls.model_fields["type"].annotation)[0]: cls
    for cls in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False},
    "strict": True,
}


def test_create_stream_yields_only_typed_events(client, upstream):
    upstream.enqueue(reasoning_then_text(["Think", "ing"], ["Hello", " there"], usage=make_usage(4, 6)))
    events = list(client.responses.create(model="fake-model", input="hi", stream=True))
    assert events, "no events"
    for event in events:
        assert type(event) is KNOWN_EVENTS[event.type], f"untyped event {event.type}: {type(event)}"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Hello there"


def test_stream_helper_final_response_matches_streamed_text(client, upstream):
    upstream.enqueue(text_stream(["The ", "answer ", "is ", "42."], usage=make_usage(7, 4)))
    with client.responses.stream(model="fake-model", input="question") as s:
        streamed = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        final = s.get_final_response()
    assert streamed == "The answer is 42."
    assert final.output_text == streamed
    assert final.status == "completed"
    assert final.usage.input_tokens == 7 and final.usage.output_tokens == 4


def test_function_call_round_trip_with_full_history(client, upstream):
    upstream.enqueue(tool_calls_stream([("call_w1", "get_weather", ['{"city"', ': "Paris"}'])]))
    first = client.responses.create(model="fake-model", input="Weather in Paris?", tools=[WEATHER],
                                    instructions="Be brief.")
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.arguments == '{"city": "Paris"}'

    upstream.enqueue(text_stream(["Sunny, 21°C."]))
    history = [{"role": "user", "content": "Weather in Paris?"}, call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21, "sky": "sunny"}'}]
    with client.responses.stream(model="fake-model", input=history, tools=[WEATHER],
                                 instructions="Be brief.") as s:
        final = s.get_final_response()
    assert final.output_text == "Sunny, 21°C."

    sent = upstream.requests[1].body
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_w1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp": 21, "sky": "sunny"}'},
    ]
    assert sent["tools"][0]["function"]["strict"] is True


def test_sdk_raises_typed_errors(client, upstream):
    import openai
    import pytest

    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="fake-model", input="x", temperature=5)
    assert info.value.body["param"] == "temperature"
    assert info.value.code == "decimal_above_max_value"
