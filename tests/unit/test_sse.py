"""sse.py alone: the encoder's exact bytes and the decoder under every chunking an upstream can produce."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_gateway.sse import DONE, SSEDecoder, encode, encode_all

EVENTS = [
    {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "output": []}},
    {"type": "response.output_text.delta", "sequence_number": 1, "delta": "line one\nline two é ✓"},
    {"type": "response.completed", "sequence_number": 2, "response": {"id": "resp_1", "status": "completed"}},
]

# One body in every shape the decoder promises to read: several frames, an event name, a comment,
# multi-line data, a field without a space after the colon, a [DONE] marker.
BODY_LF = (
    b": keep-alive comment\n\n"
    b"event: first\ndata: {\"a\": 1}\n\n"
    b"data: {\"b\":\n"
    b"data: 2}\n\n"
    b"event:second\ndata:no-space\n\n"
    b"data: [DONE]\n\n"
)
FRAMES = [
    ("first", b'{"a": 1}'),
    (None, b'{"b":\n2}'),
    ("second", b"no-space"),
    (None, b"[DONE]"),
]


def decode_chunks(chunks: list[bytes]) -> list[tuple[str | None, bytes]]:
    decoder = SSEDecoder()
    frames = []
    for chunk in chunks:
        frames += decoder.feed(chunk)
    return frames + decoder.flush()


# -- encoder ---------------------------------------------------------------------------------------------


def test_encode_writes_event_line_then_one_json_data_line():
    event = EVENTS[1]
    assert encode(event) == b"event: response.output_text.delta\ndata: " + orjson.dumps(event) + b"\n\n"
    # the newline inside the text is escaped by JSON: the frame has exactly one data line
    assert encode(event).count(b"\n") == 3


def test_encode_all_is_the_concatenation():
    assert encode_all(EVENTS) == b"".join(encode(e) for e in EVENTS)
    assert encode_all([]) == b""


def test_done_marker_is_a_bare_data_frame():
    assert DONE == b"data: [DONE]\n\n"
    assert decode_chunks([DONE]) == [(None, b"[DONE]")]


def test_round_trip_through_the_decoder():
    frames = decode_chunks([encode_all(EVENTS) + DONE])
    assert [name for name, _ in frames] == [e["type"] for e in EVENTS] + [None]
    assert [orjson.loads(data) for _, data in frames[:-1]] == EVENTS


# -- decoder: chunking -----------------------------------------------------------------------------------


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_whole_body_with_every_line_ending(ending):
    body = BODY_LF.replace(b"\n", ending)
    assert decode_chunks([body]) == FRAMES


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_split_in_two_at_every_byte_offset(ending):
    body = BODY_LF.replace(b"\n", ending)
    for cut in range(len(body) + 1):
        assert decode_chunks([body[:cut], body[cut:]]) == FRAMES, f"split at byte {cut}: {body[:cut]!r}"


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_one_byte_at_a_time(ending):
    body = BODY_LF.replace(b"\n", ending)
    assert decode_chunks([body[i:i + 1] for i in range(len(body))]) == FRAMES


def test_crlf_split_between_cr_and_lf_does_not_end_the_frame():
    """`\\r` at the end of one read and `\\n` at the start of the next are one line end, not two."""
    decoder = SSEDecoder()
    assert decoder.feed(b"event: named\r") == []
    assert decoder.feed(b"\ndata: x\r\n\r\n") == [("named", b"x")]


def test_frames_are_returned_as_soon_as_their_blank_line_arrives():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\n\ndata: 2\n") == [(None, b"1")]
    assert decoder.feed(b"\n") == [(None, b"2")]
    assert decoder.flush() == []


def test_utf8_split_inside_a_character():
    data = '{"delta": "é✓😀"}'.encode()
    body = b"data: " + data + b"\n\n"
    for cut in range(len(body) + 1):
        assert decode_chunks([body[:cut], body[cut:]]) == [(None, data)]


# -- decoder: fields -------------------------------------------------------------------------------------


def test_multi_line_data_joined_with_newlines():
    assert decode_chunks([b"data: a\ndata:\ndata: c\n\n"]) == [(None, b"a\n\nc")]


def test_only_one_space_after_the_colon_is_removed():
    assert decode_chunks([b"data:  two spaces\n\n"]) == [(None, b" two spaces")]


def test_field_without_colon_is_an_empty_value():
    assert decode_chunks([b"data\ndata: x\n\n"]) == [(None, b"\nx")]


def test_comments_and_unknown_fields_are_ignored():
    body = b": comment\nid: 7\nretry: 1000\nevent: e\n: another\ndata: x\n\n"
    assert decode_chunks([body]) == [("e", b"x")]


def test_frame_of_only_comments_yields_nothing():
    assert decode_chunks([b": ping\n\n: ping\n\n"]) == []


def test_event_without_data_is_reported_with_empty_data():
    """Kept rather than dropped: adapters decide (Anthropic's `ping` is skipped by name)."""
    assert decode_chunks([b"event: ping\n\n"]) == [("ping", b"")]


def test_blank_lines_between_frames_are_harmless():
    assert decode_chunks([b"\n\n\ndata: 1\n\n\n\n\ndata: 2\n\n"]) == [(None, b"1"), (None, b"2")]


# -- decoder: end of input -------------------------------------------------------------------------------


@pytest.mark.parametrize("tail", [b"", b"\n", b"\r\n", b"\r"])
def test_flush_returns_an_unterminated_last_frame(tail):
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\n\nevent: last\ndata: 2" + tail) == [(None, b"1")]
    assert decoder.flush() == [("last", b"2")]
    assert decoder.flush() == []


def test_flush_of_nothing_or_whitespace_is_empty():
    assert SSEDecoder().flush() == []
    decoder = SSEDecoder()
    decoder.feed(b"\n")
    assert decoder.flush() == []


# -- properties: any chunking of any frames --------------------------------------------------------------------

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
