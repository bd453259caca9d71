"""api/paging.py: `limit` and `order` checked as OpenAI checks them; a page's body as OpenAI shapes lists."""

from __future__ import annotations

import pytest
from starlette.datastructures import QueryParams

from responses_gateway.api.paging import page_body, page_params
from responses_gateway.errors import APIError
from responses_gateway.store.base import Page


def test_defaults_and_bounds():
    assert page_params(QueryParams("")) == (20, "desc")
    assert page_params(QueryParams("limit=100&order=asc")) == (100, "asc")
    for bad, param in (("limit=0", "limit"), ("limit=101", "limit"), ("limit=x", "limit"), ("order=up", "order")):
        with pytest.raises(APIError) as caught:
            page_params(QueryParams(bad))
        assert caught.value.status == 400 and caught.value.param == param


def test_the_body_of_a_page():
    assert page_body(Page([{"id": "a"}, {"id": "b"}], True)) == {
        "object": "list", "data": [{"id": "a"}, {"id": "b"}], "first_id": "a", "last_id": "b", "has_more": True}
    assert page_body(Page([], False))["first_id"] is None
