"""The Chat Completions chunk parser on its own: the one-token fast path gives what the general path gives, and
chunks that are not JSON objects fail the response with an error that says so."""

from __future__ import annotations

import orjson

from responses_gateway import generation as g
from responses_gateway.protocol.request import parse_request
from responses_gateway.protocol.tools import normalize_tools
from responses_gateway.upstreams.base import Call
from responses_gateway.upstreams.chat_completions import ChunkParser


def parser(**request: object) -> ChunkParser:
    req = parse_request(orjson.dumps({"model": "m", "input": "hi", **request}))
    return ChunkParser(Call(req, [], normalize_tools(req.tools, req.tool_choice), None, "m"))


def chunk(delta: dict[str, object], **choice: object) -> tuple[None, bytes]:
    return None, orjson.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, **choice}]})


def test_one_token_chunks_and_mixed_chunks_give_the_same_events():
    p = parser()
    batch = p.frames([chunk({"content": "Hel"}), chunk({"role": "assistant", "content": "lo"}),
                      chunk({"content": ""}), chunk({"content": "!"}, finish_reason="stop")])
    assert [(type(e), getattr(e, "text", None)) for e in batch] == [
        (g.TextDelta, "Hel"), (g.TextDelta, "lo"), (g.TextDelta, "!"), (g.Finish, None)]
    assert p.produced == 6 and p.finish == "stop" and p.error is None


def test_a_chunk_that_is_not_json_fails_the_stream():
    p = parser()
    batch = p.frames([chunk({"content": "a"}), (None, b"{not json"), chunk({"content": "b"})])
    assert [e.text for e in batch] == ["a"]  # what came before the bad chunk is still delivered
    assert p.error is not None and "a chunk that is not JSON" in p.error.message


def test_a_chunk_that_is_not_an_object_fails_the_stream():
    p = parser()
    p.frames([(None, b"[1, 2]")])
    assert p.error is not None and "a chunk that is not a JSON object" in p.error.message
