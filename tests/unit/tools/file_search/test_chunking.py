"""Chunking by tokens as OpenAI defines it: window sizes, overlaps, offsets into the text, the bounds."""

import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.file_search.chunking import (
    SEGMENT_CHARS,
    _encoding,
    chunk,
    count_tokens,
    parse_strategy,
    tokenize,
)


def test_auto_is_800_with_400_overlap_and_static_is_checked():
    auto = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}
    assert parse_strategy(None, "x") == auto and parse_strategy({"type": "auto"}, "x") == auto
    ok = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50}}
    assert parse_strategy(ok, "x") == ok
    for static, param in (({"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0}, "x.static.max_chunk_size_tokens"),
                          ({"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0}, "x.static.max_chunk_size_tokens"),
                          ({"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 51}, "x.static.chunk_overlap_tokens"),
                          ({"max_chunk_size_tokens": 100, "chunk_overlap_tokens": -1}, "x.static.chunk_overlap_tokens"),
                          ({"max_chunk_size_tokens": "100", "chunk_overlap_tokens": 0}, "x.static.max_chunk_size_tokens"),
                          ({"max_chunk_size_tokens": 100}, "x.static.chunk_overlap_tokens")):
        with pytest.raises(APIError) as err:
            parse_strategy({"type": "static", "static": static}, "x")
        assert err.value.status == 400 and err.value.param == param
    with pytest.raises(APIError) as err:
        parse_strategy({"type": "auto", "static": {}}, "x")
    assert err.value.param == "x.type"


def test_windows_step_by_size_minus_overlap_and_the_last_reaches_the_end():
    text = " ".join(f"w{i}" for i in range(1000))
    tokens = tokenize(text)
    chunks = chunk(text, 100, 40)
    assert all(c.tokens == 100 for c in chunks[:-1]) and chunks[-1].tokens <= 100
    # windows start every 60 tokens; the last is the first to reach the last token
    assert len(chunks) == 1 + -(-(len(tokens) - 100) // 60)
    for i, c in enumerate(chunks):
        assert text[c.start:c.end] == c.text
        assert tokenize(c.text) == tokens[60 * i:60 * i + c.tokens]  # exactly the window's tokens
    assert chunks[-1].end == len(text) and chunks[0].start == 0


def test_a_short_text_is_one_chunk_and_an_empty_one_none():
    assert [c.text for c in chunk("just a few words", 800, 400)] == ["just a few words"]
    assert chunk("", 800, 400) == []


def test_window_edges_inside_a_character_take_the_whole_character():
    text = "日本語のテキスト😀" * 200  # characters of several tokens each
    for c in chunk(text, 100, 50):
        assert text[c.start:c.end] == c.text and c.text  # a span of whole characters


def test_long_texts_are_tokenized_as_a_whole_would_be():
    text = ("Lorem ipsum dolor sit amet.\n" * 3000) + ("x" * (SEGMENT_CHARS + 10)) + " tail words\n\n end"
    assert len(text) > 2 * SEGMENT_CHARS
    whole = list(_encoding()._backend.encode(text))  # the tokenizer without its 1M-character guard
    assert tokenize(text) == whole
    assert count_tokens("hello world") == 2


def test_special_token_text_is_ordinary_text():
    assert count_tokens("<|endoftext|>") > 1  # never the special token, never an error
