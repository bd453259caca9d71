"""The official OpenAI Node SDK (`openai` on npm, `client.responses`) against the gateway over a Chat
Completions route: text, the streaming helper, a function call and its chained answer, retrieve and delete.

The script (tests/e2e/openai-node/responses.mjs) runs the steps in order; the upstream is scripted to match.
"""

from __future__ import annotations

import json

from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream
from tests.support.node import require_node_packages, run_node_script


def test_openai_node_sdk_conversation(gateway, upstream):
    node = require_node_packages("openai-node", "openai")
    upstream.enqueue(
        text_stream(["Hel", "lo!"]),
        text_stream(["one, ", "two, ", "three"], usage=make_usage(9, 3)),
        tool_calls_stream([("call_w1", "get_weather", ['{"location":', '"Paris"}'])]),
        text_stream(["It is 21", " degrees."]),
    )
    out, detail = run_node_script(node, "openai-node", "responses.mjs",
                                  ["--base-url", f"{gateway.url}/v1", "--model", "fake-model"], timeout=90)

    assert out["text"]["status"] == "completed" and out["text"]["outputText"] == "Hello!", detail
    stream = out["stream"]
    assert stream["deltas"] == ["one, ", "two, ", "three"], detail
    assert (stream["first"], stream["last"]) == ("response.created", "response.completed")
    assert stream["outputText"] == "one, two, three"
    assert stream["usage"]["input_tokens"] == 9 and stream["usage"]["output_tokens"] == 3
    assert out["tool"]["name"] == "get_weather" and out["tool"]["arguments"] == {"location": "Paris"}
    assert out["chain"]["previousResponseId"] == out["tool"]["id"]
    assert out["chain"]["outputText"] == "It is 21 degrees."
    assert out["stored"]["retrievedText"] == "It is 21 degrees."
    assert out["stored"]["afterDelete"] == {"name": "NotFoundError", "status": 404}

    # the chained turn reached the model with the whole history: question, call, its output
    messages = upstream.requests[3].body["messages"]
    assert messages[0] == {"role": "user", "content": "Weather in Paris?"}
    assert messages[1]["tool_calls"][0]["id"] == out["tool"]["callId"]
    assert messages[2]["role"] == "tool" and json.loads(messages[2]["content"]) == {"temperature": 21}
