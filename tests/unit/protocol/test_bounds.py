"""A large body is parsed and encoded in pieces (protocol/bounds.py, protocol/request.py, upstreams/http.py):
the pieces must give exactly what one parse or one encoding of the whole gives, errors included."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_gateway.errors import APIError
from responses_gateway.protocol.bounds import Bounds, check_body, loads
from responses_gateway.protocol.request import parse_request, request_from
from responses_gateway.upstreams.http import _encode_large

BOUNDS = Bounds()

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=8),
                    st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                               max_size=3), max_leaves=8)
messages = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]),
                                  "content": st.text(max_size=20)})
elements = st.one_of(messages, messages, st.dictionaries(st.text(max_size=5), values, max_size=3), values)
spaces = st.sampled_from(["", " ", "\n", " \r\n\t"])


def _outcome(fn):
    try:
        req = fn()
    except APIError as exc:
        return ("error", exc.status, exc.message, exc.param, exc.code)
    return ("ok", req.model_dump())


def _body(items: list, gap: str, extra: dict) -> bytes:
    """A body with `items` as its input, `gap` around every separator (as a client's encoder may write)."""
    inner = f"{gap},{gap}".encode().join(orjson.dumps(item) for item in items)
    rest = orjson.dumps({"model": "m", **extra})
    return rest[:-1] + f',{gap}"input"{gap}:{gap}[{gap}'.encode() + inner + f"{gap}]{gap}}}".encode()


@settings(max_examples=300, deadline=None)
@given(st.lists(elements, max_size=6), spaces,
       st.sampled_from([{}, {"temperature": 3}, {"store": "no"}, {"instructions": "x", "stream": True}]))
def test_parsing_in_pieces_gives_what_the_whole_parse_gives(items, gap, extra):
    raw = _body(items, gap, extra)
    layout = check_body(raw, BOUNDS)
    assert layout is not None and len(layout.items) == sum(not isinstance(i, (bool, int, float)) and i is not None
                                                          for i in items)
    assert _outcome(lambda: parse_request(raw, layout)) == _outcome(lambda: parse_request(raw))
    assert loads(raw, layout) == orjson.loads(raw)
    gathered = bytearray(raw)  # how the HTTP body arrives (api/responses.py)
    assert _outcome(lambda: parse_request(gathered, check_body(gathered, BOUNDS))) == _outcome(lambda: parse_request(raw))


@pytest.mark.parametrize("raw", [
    b'{"model": "m", "input": [{"role": "user", "content": "a"} {"role": "user", "content": "b"}]}',  # no comma
    b'{"model": "m", "input": [{"role": "user", "content": "a"},, {"role": "user", "content": "b"}]}',
    b'{"model": "m", "input": [{"role": "user", "content": "a"}, 5]}',  # a bare number between the pieces
    b'{"model": "m", "input": [{"role": "user", "content": "a"},]}',  # a trailing comma
    b'{"model": "m", "input": [{"a": "\xff"}]}',  # not UTF-8
    b'{"model": 5, "input": [{"role": "user", "content": "a"}, "text"]}',  # two errors: the first is reported
])
def test_bodies_the_pieces_cannot_vouch_for_get_the_whole_parse(raw):
    layout = check_body(raw, BOUNDS)
    assert _outcome(lambda: parse_request(raw, layout)) == _outcome(lambda: parse_request(raw))
    assert _outcome(lambda: parse_request(raw))[0] == "error"


def test_input_given_twice_is_parsed_whole_and_the_last_wins():
    raw = b'{"model": "m", "input": [{"role": "user", "content": "a"}], "input": []}'
    assert check_body(raw, BOUNDS) is None
    assert parse_request(raw).input == []


def test_a_websocket_frame_with_a_long_input_validates_as_a_body():
    items = [{"role": "user", "content": f"m{i}"} for i in range(500)]
    assert request_from({"model": "m", "input": items}).model_dump() == \
        parse_request(orjson.dumps({"model": "m", "input": items})).model_dump()
    for fields in ({"model": "m", "input": items, "temperature": 3}, {"input": items}):
        assert _outcome(lambda f=fields: request_from(f)) == _outcome(lambda f=fields: parse_request(orjson.dumps(f)))


@given(st.dictionaries(st.text(max_size=6), values, max_size=5))
def test_a_large_upstream_body_encodes_to_the_same_json(body):
    encoded = _encode_large(body)
    assert isinstance(encoded, io.BytesIO)
    assert orjson.loads(encoded.read()) == body


@pytest.mark.parametrize("text", ["[" * 5000, '\\"' + "{" * 100 + '"', "a\\" * 70 + "[" * 100, '"' * 65 + "]" * 99])
def test_brackets_and_quotes_inside_strings_of_any_length_are_text(text):
    """Long strings are skipped with bytes.find: an escaped quote must not end them, an escaped backslash
    before a quote must."""
    raw = orjson.dumps({"model": "m", "input": [{"role": "user", "content": text}, text], "instructions": text})
    layout = check_body(raw, Bounds(max_depth=4, max_containers=4))  # would be refused if any bracket counted
    assert layout is not None and [orjson.loads(raw[a:b]) for a, b in layout.items] == \
        [{"role": "user", "content": text}, text]


def _scan_outcome(fn):
    try:
        fn()
    except APIError as exc:
        return ("error", exc.status, exc.message, exc.param, exc.code)
    return ("ok",)


@settings(max_examples=300, deadline=None)
@given(st.lists(elements, max_size=6), st.integers(1, 6), st.integers(1, 12),
       st.sampled_from([b"", b', "n": 18446744073709551616', b', "n": -9223372036854775809', b', "n": "' + b"1" * 25
                        + b'"', b', "n": 10000000000000000000.5', b', "n": 18446744073709551615']))
def test_the_front_doors_shortcut_refuses_exactly_what_the_full_scan_refuses(items, depth, containers, extra):
    """Door.scan skips the token-by-token scan of a small body that plainly keeps the bounds: whenever it
    does, the full scan finds nothing to refuse either."""
    from responses_gateway.door import Door, Limits
    from responses_gateway.protocol.bounds import plainly_within

    raw = _body(items, "", {})[:-1] + extra + b"}"
    bounds = Bounds(max_depth=depth, max_containers=containers)
    door = Door(Limits(max_json_depth=depth, max_json_containers=containers))
    if plainly_within(raw, bounds):
        assert _scan_outcome(lambda: check_body(raw, bounds)) == ("ok",)
    assert _scan_outcome(lambda: door.scan(raw)) == _scan_outcome(lambda: check_body(raw, bounds))


@pytest.mark.parametrize(("raw", "plain"), [
    (b'{"model": "m", "input": "hi"}', True),
    (b'{"model": "m", "n": 18446744073709551615}', False),  # 20 digits: the full scan decides (it fits)
    (b'{"model": "m", "n": "1234567890123456789012"}', False),  # digits in a string: looked at, not refused
    (b'{"model": "m", "n": 123456789012345678}', True),
    (b'{"a": [[[[1]]]]}', False),  # 5 brackets, depth 4 allowed
])
def test_what_counts_as_plainly_within_the_bounds(raw, plain):
    from responses_gateway.protocol.bounds import plainly_within

    assert plainly_within(raw, Bounds(max_depth=4, max_containers=10)) is plain
