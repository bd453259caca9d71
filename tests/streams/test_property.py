"""The same upstream bytes split at any chunk boundaries give the same final Response and a valid stream.

The upstream body (reasoning, text with multi-byte characters, interleaved tool calls, a custom tool call,
usage) is cut into random network writes, down to single bytes and mid-UTF-8, and replayed over real HTTP.
"""

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import stream, without_volatile
from tests.support.fake_chat import Stream, make_usage, sse_chunks

PATCH = '*** Begin Patch\n*** Add File: é.txt\n+"quoted" \\ and \u2603 snow\n*** End Patch'
DELTAS = (
    [{"reasoning_content": p} for p in ["Think", "ing ", "hard…"]]
    + [{"content": p} for p in ["Héllo", ", ", "wörld ", "👋"]]
    + [{"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": '}}]},
       {"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                        "function": {"name": "patch", "arguments": orjson.dumps({"input": PATCH}).decode()[:20]}}]},
       {"tool_calls": [{"index": 0, "function": {"arguments": '"naïve"}'}}]},
       {"tool_calls": [{"index": 1, "function": {"arguments": orjson.dumps({"input": PATCH}).decode()[20:]}}]}]
)
BODY = "".join(sse_chunks(DELTAS, finish_reason="tool_calls", usage=make_usage(12, 34))).encode()
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}},
         {"type": "custom", "name": "patch"}]
REQUEST = {"model": "m", "input": "x", "tools": TOOLS}


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % len(data) for c in cuts} - {0})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(BODY) * 4), max_size=40))
def test_any_chunking_gives_the_same_response(http, upstream, cuts):
    upstream.enqueue(Stream([BODY]))
    reference = stream(http, REQUEST)
    upstream.enqueue(Stream(split(BODY, cuts)))
    result = stream(http, REQUEST)
    assert without_volatile(result.response) == without_volatile(reference.response)
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "message", "function_call", "custom_tool_call"]
    assert out[1]["content"][0]["text"] == "Héllo, wörld 👋"
    assert out[2]["arguments"] == '{"q": "naïve"}'
    assert out[3]["input"] == PATCH
