"""The SSE codec: the decoder gives the same frames however the stream is cut into reads (its one-frame
fast path included), and the encoder's output is what a client parses back."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_gateway.sse import DONE, SSEDecoder, encode, encode_all

# data values as upstreams send them: JSON (no raw newlines) or [DONE]; text with every kind of character
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
datas = st.one_of(texts.map(lambda t: orjson.dumps({"delta": {"content": t}}).decode()), st.just("[DONE]"))


@st.composite
def frames(draw):
    """One SSE frame as text and the (event, data) it must decode to (None when it carries nothing)."""
    event = draw(st.one_of(st.none(), st.sampled_from(["message", "ping", "content_block_delta"])))
    lines_of_data = draw(st.lists(datas, min_size=0, max_size=3))
    lines = []
    if draw(st.booleans()):
        lines.append(": keep-alive comment")
    if event is not None:
        lines.append(f"event: {event}")
    space = draw(st.booleans())
    lines += [("data: " if space else "data:") + d for d in lines_of_data]
    expected = None if not lines_of_data and event is None else (event, "\n".join(lines_of_data).encode())
    return lines, expected


@st.composite
def streams(draw):
    items = draw(st.lists(frames(), min_size=1, max_size=6))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = "".join(newline.join(lines) + newline + newline for lines, _ in items)
    data = text.encode()
    cuts = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=8))))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]
    return chunks, [e for _, e in items if e is not None]


@given(streams())
@settings(max_examples=300, deadline=None)
def test_decoder_gives_the_same_frames_however_the_stream_is_cut(case):
    chunks, expected = case
    decoder = SSEDecoder()
    got = []
    for chunk in chunks:
        got += decoder.feed(chunk)
    got += decoder.flush()
    assert got == expected


@given(datas)
def test_one_frame_per_read_takes_the_fast_path_and_the_same_answer(data):
    frame = f"data: {data}\n\n".encode()
    assert SSEDecoder().feed(frame) == [(None, data.encode())]
    # and a decoder with bytes pending from an earlier read joins them first
    decoder = SSEDecoder()
    assert decoder.feed(frame[:3]) == []
    assert decoder.feed(frame[3:]) == [(None, data.encode())]


def test_crlf_cut_between_two_reads_is_one_line_end():
    # found by the property test above: the "\r" at the end of one read and the "\n" starting the next
    # were two line ends, a blank line, so the frame ended before its data
    decoder = SSEDecoder()
    assert decoder.feed(b"event: message\r") == []
    assert decoder.feed(b"\ndata: [DONE]\r\n\r\n") == [("message", b"[DONE]")]
    assert decoder.feed(b"data: x\r\n\r") == []
    assert decoder.flush() == [(None, b"x")]


def test_carriage_return_inside_a_frame_is_a_line_break():
    assert SSEDecoder().feed(b"data: a\rdata: b\n\n") == [(None, b"a\nb")]


events = st.fixed_dictionaries({
    "type": st.sampled_from(["response.output_text.delta", "response.created", "error"]),
    "sequence_number": st.integers(0, 10**6),
    "delta": texts,
})


@given(st.lists(events, max_size=5))
def test_encoded_events_decode_back(evs):
    body = encode_all(evs) + DONE
    assert body == b"".join(encode(e) for e in evs) + DONE
    frames_ = SSEDecoder().feed(body)
    assert [(name, orjson.loads(data)) for name, data in frames_[:-1]] == [(e["type"], e) for e in evs]
    assert frames_[-1] == (None, b"[DONE]")
