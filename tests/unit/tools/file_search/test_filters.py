"""Attribute filters: every comparison and compound, types never mixed, missing attributes, bad filters."""

import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.file_search.filters import MAX_DEPTH, matches, parse_filters

ATTRS = {"year": 2020, "kind": "recipe", "public": True, "score": 4.5}


@pytest.mark.parametrize("node, expected", [
    ({"type": "eq", "key": "kind", "value": "recipe"}, True),
    ({"type": "eq", "key": "year", "value": 2020.0}, True),
    ({"type": "eq", "key": "year", "value": "2020"}, False),  # a string is not a number
    ({"type": "eq", "key": "public", "value": 1}, False),  # a boolean is not a number
    ({"type": "eq", "key": "public", "value": True}, True),
    ({"type": "ne", "key": "kind", "value": "poem"}, True),
    ({"type": "ne", "key": "missing", "value": "x"}, True),
    ({"type": "gt", "key": "year", "value": 2019}, True),
    ({"type": "gte", "key": "score", "value": 4.5}, True),
    ({"type": "lt", "key": "year", "value": 2020}, False),
    ({"type": "lte", "key": "kind", "value": "recipf"}, True),  # strings compare as strings
    ({"type": "gt", "key": "kind", "value": 1}, False),
    ({"type": "gt", "key": "missing", "value": 1}, False),
    ({"type": "in", "key": "kind", "value": ["poem", "recipe"]}, True),
    ({"type": "in", "key": "year", "value": ["2020"]}, False),
    ({"type": "nin", "key": "kind", "value": ["poem"]}, True),
    ({"type": "nin", "key": "missing", "value": ["poem"]}, True),
    ({"type": "and", "filters": [{"type": "eq", "key": "kind", "value": "recipe"},
                                 {"type": "gt", "key": "year", "value": 2021}]}, False),
    ({"type": "or", "filters": [{"type": "eq", "key": "kind", "value": "poem"},
                                {"type": "gt", "key": "year", "value": 2000}]}, True),
])
def test_comparisons(node, expected):
    assert matches(parse_filters(node, "filters"), ATTRS) is expected


def test_no_filter_matches_everything_and_no_attributes_are_empty():
    assert matches(None, None)
    assert not matches({"type": "eq", "key": "k", "value": 1}, None)


def test_bad_filters_name_the_field_and_are_bounded():
    deep = {"type": "eq", "key": "k", "value": 1}
    for _ in range(MAX_DEPTH):
        deep = {"type": "and", "filters": [deep]}
    wide = {"type": "or", "filters": [{"type": "eq", "key": "k", "value": i} for i in range(200)]}
    for bad, param in (([], "f"), ({"type": "eq", "key": "", "value": 1}, "f.key"),
                       ({"type": "eq", "key": "k", "value": {"x": 1}}, "f.value"),
                       ({"type": "in", "key": "k", "value": [True]}, "f.value"),
                       ({"type": "lt", "key": "k", "value": False}, "f.value"),
                       ({"type": "and", "filters": []}, "f.filters"),
                       ({"type": "or", "filters": [{"type": "xor"}]}, "f.filters[0].type"),
                       ({"type": "eq", "key": "k", "value": 1, "extra": 1}, "f"),
                       (deep, None), (wide, None)):
        with pytest.raises(APIError) as err:
            parse_filters(bad, "f")
        assert err.value.status == 400
        if param is not None:
            assert err.value.param == param
