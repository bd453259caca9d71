"""Hostile input read in a child process (isolated.py): the result as the reader gives it, a reader past its
bound killed, and one whose caller stops waiting killed at once — nothing of its work left behind."""

from __future__ import annotations

import asyncio

import pytest

from responses_gateway.isolated import Bounds, ChildFailed, run, run_async
from tests.support.fake_web import nested_page
from tests.support.leaks import readers_running

READER = "responses_gateway.tools.web_search.extract:read"
ARGS = ["text/html", "", "https://example.com/deep"]


def test_the_child_answers_what_the_reader_returns():
    page = b"<html><head><title>T</title></head><body><main><p>Hello <b>there</b></p></main></body></html>"
    assert run(READER, page, ARGS, Bounds(10, 1 << 30)) == {"url": ARGS[2], "title": "T", "text": "Hello there"}
    assert asyncio.run(run_async(READER, page, ARGS, Bounds(10, 1 << 30)))["text"] == "Hello there"


def test_a_hostile_page_is_stopped_at_its_bound():
    with pytest.raises(ChildFailed) as err:
        asyncio.run(run_async(READER, nested_page(), ARGS, Bounds(1.0, 1 << 30, "--web-extract-timeout")))
    assert err.value.reason == "time" and "--web-extract-timeout" in err.value.why
    assert readers_running() == []


def test_a_caller_that_stops_waiting_leaves_no_work_behind():
    """The tool loop cancels a call at its deadline (or with the response): the child goes with it, long
    before its own bound."""
    async def give_up() -> None:
        task = asyncio.create_task(run_async(READER, nested_page(), ARGS, Bounds(600, 1 << 30)))
        while not readers_running():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert readers_running() == []

    asyncio.run(give_up())
