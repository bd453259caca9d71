"""client/events.py: an event's fields read as attributes and items; an absent field is an AttributeError, a
malformed object reads as empty."""

from __future__ import annotations

import pytest

from responses_gateway.client.events import Event, obj


def test_fields_read_as_attributes_and_items():
    event = Event("response.output_text.delta", {"delta": "hi", "output_index": 0})
    assert (event.delta, event["output_index"], event.get("missing", 7)) == ("hi", 0, 7)
    assert event.known and not event.synthesized
    with pytest.raises(AttributeError):
        _ = event.item_id
    with pytest.raises(AttributeError):
        _ = event.__nothing__


def test_a_malformed_object_reads_as_an_empty_one():
    assert obj([1]) == {} and obj(None) == {} and obj({"a": 1}) == {"a": 1}
