"""upstreams/custom_input.py alone: the raw input of a custom tool, decoded from `{"input": "..."}` as it streams."""

from __future__ import annotations

import json

import pytest

from responses_gateway.upstreams.custom_input import CustomInputDecoder

# Arguments as models write them: every JSON escape, non-ASCII text, a surrogate pair, odd whitespace.
INPUTS = [
    "ls -la",
    'print("hi")\n\tx = 1\\2',
    "*** Begin Patch\n*** Update File: a.py\n-é\n+✓ 😀\n*** End Patch",
    "",
    "/path/with/slashes and \b\f\r controls",
]


def encodings(text: str) -> list[str]:
    """The same value written several ways: compact, spaced, ASCII-escaped (\\uXXXX, surrogate pairs), `\\/`."""
    return [
        json.dumps({"input": text}, ensure_ascii=False, separators=(",", ":")),
        json.dumps({"input": text}, ensure_ascii=True),
        "  {\n  \"input\" :  " + json.dumps(text).replace("/", "\\/") + "\n}",
    ]


def decode(chunks: list[str]) -> str:
    decoder = CustomInputDecoder()
    streamed = "".join(decoder.feed(c) for c in chunks)
    return streamed + decoder.finish()


CASES = [(text, raw) for text in INPUTS for raw in encodings(text)]


@pytest.mark.parametrize("text,raw", CASES)
def test_whole_arguments(text, raw):
    assert decode([raw]) == text


@pytest.mark.parametrize("text,raw", CASES)
def test_split_in_two_at_every_offset(text, raw):
    for cut in range(len(raw) + 1):
        assert decode([raw[:cut], raw[cut:]]) == text, f"split at {cut}: {raw[:cut]!r} | {raw[cut:]!r}"


@pytest.mark.parametrize("text,raw", CASES)
def test_one_character_at_a_time(text, raw):
    assert decode(list(raw)) == text


def test_text_streams_before_the_arguments_are_complete():
    decoder = CustomInputDecoder()
    assert decoder.feed('{"input": "ab') == "ab"
    assert decoder.feed("c\\") == "c"  # the escape waits for its second character
    assert decoder.feed('n') == "\n"
    assert decoder.feed('\\u00') == ""
    assert decoder.feed('e9"}') == "é"
    assert decoder.finish() == ""


def test_surrogate_pair_split_between_its_halves():
    decoder = CustomInputDecoder()
    assert decoder.feed('{"input": "\\ud83d') == ""
    assert decoder.feed('\\ude00!"}') == "😀!"


def test_nothing_after_the_closing_quote_is_streamed():
    assert decode(['{"input": "a", "extra": "b"}']) == "a"


@pytest.mark.parametrize("raw,expected", [
    ("just raw text", "just raw text"),  # a model that dropped the JSON wrapper
    ('"a json string"', "a json string"),
    ('{"command": "ls"}', '{"command": "ls"}'),  # another shape: passed on as written
    ('{"input": 5}', '{"input": 5}'),
    ("[1, 2]", "[1, 2]"),
])
def test_other_shapes_arrive_whole_at_the_end(raw, expected):
    for cut in range(len(raw) + 1):
        decoder = CustomInputDecoder()
        assert decoder.feed(raw[:cut]) + decoder.feed(raw[cut:]) == ""
        assert decoder.finish() == expected


def test_empty_input_is_empty():
    decoder = CustomInputDecoder()
    assert decoder.feed('{"input": ""}') == ""
    assert decoder.finish() == ""


@pytest.mark.parametrize("raw,expected", [
    ('{"input": "\\ud83d"}', "\ufffd"),  # lone high surrogate, at the end
    ('{"input": "\\ud83dA"}', "\ufffdA"),
    ('{"input": "\\ud83d\\u0041"}', "\ufffdA"),  # followed by an escape that is no low surrogate
    ('{"input": "\\ude00x"}', "\ufffdx"),  # lone low surrogate
    ('{"input": "\\uZZZZ"}', "\ufffdZZZZ"),  # not hex
    ('{"input": "\\u+123"}', "\ufffd+123"),  # int() would take it
    ('{"input": "\\u12"}', "\ufffd12"),  # cut short by the closing quote
])
def test_invalid_unicode_escapes_become_replacement_characters(raw, expected):
    """Invalid JSON from a model must not crash the stream, nor yield text that cannot be encoded."""
    for cut in range(len(raw) + 1):
        assert decode([raw[:cut], raw[cut:]]) == expected, f"split at {cut}"
