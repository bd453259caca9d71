"""door.py alone: admission (in flight, per-key concurrency and rate) and the request bounds, without a server.
The same door serves every transport (tests/edge/test_front_door.py drives it through each)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from responses_gateway.door import Door, Limits
from responses_gateway.errors import APIError, RateLimited
from responses_gateway.protocol.request import parse_request


def admit_all(door: Door, owners: list[str]) -> list[object]:
    """Admit one request per owner, in order: a ticket, or the RateLimited that refused it."""

    async def main() -> list[object]:
        out: list[object] = []
        for owner in owners:
            try:
                out.append(await door.admit(owner))
            except RateLimited as exc:
                out.append(exc)
        return out

    return asyncio.run(main())


def test_the_in_flight_cap_refuses_beyond_it_and_a_released_place_is_free_again():
    door = Door(Limits(max_in_flight=2))
    first, second, third = admit_all(door, ["a", "b", "c"])
    assert isinstance(third, RateLimited) and third.reason == "in_flight" and third.status == 429
    asyncio.run(first.release())
    asyncio.run(first.release())  # once only
    assert door.in_flight == 1
    (again,) = admit_all(door, ["c"])
    assert not isinstance(again, RateLimited)


def test_a_key_at_its_concurrency_cap_is_refused_while_another_key_is_not():
    door = Door(Limits(key_max_in_flight=1))
    a1, a2, b1 = admit_all(door, ["a", "a", "b"])
    assert isinstance(a2, RateLimited) and a2.reason == "key_concurrency"
    assert not isinstance(b1, RateLimited)
    asyncio.run(a1.release())
    assert door.by_key == {"b": 1}


def test_a_key_rate_allows_a_minutes_burst_then_says_when_to_come_back():
    door = Door(Limits(key_requests_per_minute=3))
    results = admit_all(door, ["a"] * 4 + ["b"])
    assert [isinstance(r, RateLimited) for r in results] == [False, False, False, True, False]
    refused = results[3]
    assert refused.reason == "key_rate"
    assert 1 <= int(refused.headers()["retry-after"]) <= 20  # a token every 20 s


def test_the_size_and_item_bounds():
    door = Door(Limits(max_body_bytes=10, max_input_items=2, max_json_depth=3))
    with pytest.raises(APIError) as big:
        door.check_size(11)
    assert (big.value.status, big.value.code) == (413, "request_too_large")
    three = parse_request(orjson.dumps({"model": "m", "input": [{"role": "user", "content": x} for x in "abc"]}))
    with pytest.raises(APIError) as many:
        door.check_request(three)
    assert (many.value.status, many.value.param, many.value.code) == (400, "input", "array_above_max_length")
    trigger = parse_request(orjson.dumps({"model": "m", "input": [{"role": "user", "content": "a"},
                                                                 {"role": "user", "content": "b"},
                                                                 {"type": "compaction_trigger"}]}))
    door.check_request(trigger)  # compact's own trigger is a request, not an item
    with pytest.raises(APIError) as deep:
        door.scan(b'{"a": [[[[1]]]]}')
    assert deep.value.status == 400
