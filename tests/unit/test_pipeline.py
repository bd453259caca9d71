"""pipeline.py alone: an in-memory EventStream that fails at every point, and a store write that fails.

Whatever happens, the batches end with exactly one terminal event, the finished response reaches `on_final`
before that event goes out, and the upstream stream (and the tool loop) are closed exactly once.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from responses_gateway import generation as g
from responses_gateway.errors import UpstreamError
from responses_gateway.pipeline import Stop, run

from .streams import FakeStream, Sink, new_composer

TERMINALS = ("response.completed", "response.incomplete", "response.failed")

STEP = [
    [g.TextDelta("Hel")],
    [g.TextDelta("lo"), g.Usage(3, 2)],
    [g.Finish("stop")],
]


class FakeLoop:
    """The Steps interface (pipeline.Steps), as tools/loop.ToolLoop implements it: `steps` upstream streams
    opened in turn (by the pipeline, on a FakeUpstream); `fail` names a hook that raises."""

    def __init__(self, steps: list[FakeStream], *, fail: str | None = None, incomplete: str | None = None):
        self.steps = list(steps)
        self.fail = fail
        self.stop_short = incomplete
        self.stop = None
        self.closed = 0
        self.calls = 0

    async def prelude(self, composer):
        if self.fail == "prelude":
            raise UpstreamError("listing tools failed", code="mcp_error")
        item, events = composer.add_item("mcp", {"id": "mcpl_1", "type": "mcp_list_tools", "server_label": "docs",
                                                 "tools": []}, [("response.mcp_list_tools.in_progress", {})])
        yield events
        yield composer.end_call(item, None, [("response.mcp_list_tools.completed", {})])

    def next_call(self, composer):
        if self.stop is not None:
            return self.stop
        self.calls += 1
        return self.calls

    async def after_step(self, composer):
        if self.fail == "after_step":
            raise RuntimeError("bug in the loop")
        if not self.steps:
            self.stop = Stop(self.stop_short)
        return
        yield

    async def aclose(self) -> None:
        self.closed += 1


class FakeUpstream:
    """Opens the loop's steps in turn; `fail_second` refuses the second opening."""

    def __init__(self, loop: FakeLoop):
        self.loop = loop
        self.opened = 0

    async def open(self, call):
        if self.loop.fail == "open_next" and self.opened == 1:
            raise UpstreamError("second step refused", status=429, code="rate_limit_exceeded")
        self.opened += 1
        return self.loop.steps.pop(0)


def drive(stream, on_final=None, loop=None, log=None):
    """Consume the pipeline as the SSE sink does; the checked stream and the order of what happened."""
    log = log if log is not None else []
    composer = new_composer()
    sink = Sink()

    async def main():
        async for events in run(composer, stream, on_final, loop, upstream=FakeUpstream(loop) if loop else None):
            sink.add(events)
            log.extend(e["type"] for e in events if e["type"] in TERMINALS)

    asyncio.run(main())
    return sink.check(), composer


def recording_store(log: list, fail: BaseException | None = None):
    saved = []

    async def on_final(final: dict) -> None:
        log.append("on_final")
        saved.append(final)
        if fail is not None:
            raise fail

    return on_final, saved


def test_clean_stream_completes_and_stores_before_the_terminal_event():
    log: list = []
    stream = FakeStream(STEP, log=log)
    on_final, saved = recording_store(log)
    result, composer = drive(stream, on_final, log=log)
    assert result.response["status"] == "completed" and result.text == "Hello"
    assert result.response["usage"]["total_tokens"] == 5
    assert log == ["aclose", "on_final", "response.completed"]
    assert saved == [composer.final]
    assert stream.closed == 1


@pytest.mark.parametrize("fail_at", range(len(STEP) + 1))
@pytest.mark.parametrize("exc,code", [
    (UpstreamError("lost mid-stream", code="upstream_error"), "upstream_error"),
    (UpstreamError("slow down", status=429, code="rate_limit_exceeded", type="rate_limit_error"),
     "rate_limit_exceeded"),
    (RuntimeError("a bug of ours"), "server_error"),
    (KeyError("missing"), "server_error"),
], ids=["upstream", "rate-limit", "runtime", "keyerror"])
def test_stream_failing_at_any_point_ends_with_one_failed_event(fail_at, exc, code):
    log: list = []
    stream = FakeStream(STEP, fail_at=fail_at, exc=exc, log=log)
    on_final, saved = recording_store(log)
    result, _ = drive(stream, on_final, log=log)
    terminal = [t for t in result.types if t in TERMINALS]
    assert terminal == ["response.failed"]
    error = result.events[-2]
    assert error["type"] == "error" and error["code"] == code
    if isinstance(exc, UpstreamError):
        assert error["message"] == exc.message and error["error"]["type"] == exc.type
    else:  # the gateway's own failure: no internals leak
        assert error["message"] == "The gateway failed while processing the response."
    assert saved[0]["status"] == "failed"
    assert log == ["on_final", "response.failed", "aclose"]  # closed once, after the terminal event
    assert stream.closed == 1


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(f"responses_gateway_{name}_total", labels) or 0.0


def test_store_write_failing_twice_fails_the_response_before_its_terminal_event():
    """A response that cannot be stored must not reach the client as completed."""
    before = counted("store_failures")
    log: list = []
    on_final, _ = recording_store(log, fail=OSError("disk full"))
    result, _ = drive(FakeStream(STEP), on_final, log=log)
    assert [t for t in result.types if t in TERMINALS] == ["response.failed"]
    assert result.events[-2]["code"] == "storage_error"
    assert log == ["on_final", "on_final", "response.failed"]
    assert counted("store_failures") == before + 2


def test_store_write_failing_once_is_retried():
    log: list = []
    calls = []

    async def flaky(final: dict) -> None:
        calls.append(final["status"])
        if len(calls) == 1:
            raise OSError("busy")

    result, _ = drive(FakeStream(STEP), flaky, log=log)
    assert result.response["status"] == "completed"
    assert calls == ["completed", "completed"]


def test_failing_store_write_after_a_failure_still_ends_with_response_failed():
    log: list = []
    on_final, _ = recording_store(log, fail=RuntimeError("store down"))
    result, _ = drive(FakeStream(STEP, fail_at=1, exc=UpstreamError("x")), on_final, log=log)
    assert [t for t in result.types if t in TERMINALS] == ["response.failed"]


def test_terminal_status_is_counted():
    before = counted("responses", status="incomplete")
    result, _ = drive(FakeStream([[g.TextDelta("cut")], [g.Finish("length")]]))
    assert result.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert counted("responses", status="incomplete") == before + 1


def test_failing_close_after_a_clean_stream_closes_once_and_ends_once():
    stream = FakeStream(STEP, close_exc=RuntimeError("release failed"))
    result, _ = drive(stream)
    assert [t for t in result.types if t in TERMINALS] == ["response.failed"]
    assert stream.closed == 1


def test_failing_close_after_a_failed_stream_does_not_escape():
    stream = FakeStream(STEP, fail_at=1, exc=UpstreamError("lost"), close_exc=RuntimeError("close failed"))
    result, _ = drive(stream)
    assert [t for t in result.types if t in TERMINALS] == ["response.failed"]
    assert stream.closed == 1


def test_client_going_away_closes_the_upstream_without_a_terminal_event():
    stream = FakeStream(STEP)
    loop = FakeLoop([])
    composer = new_composer()
    log: list = []
    on_final, _ = recording_store(log)

    async def main():
        batches = run(composer, stream, on_final)
        await anext(batches)  # response.created / in_progress
        await anext(batches)  # the first text
        await batches.aclose()  # the sink's finally, after a disconnect

    asyncio.run(main())
    assert stream.closed == 1 and log == [] and not composer.closed
    assert loop.closed == 0


def test_cancellation_while_waiting_for_the_upstream_closes_it():
    class Hanging(FakeStream):
        async def _events(self):
            yield [g.TextDelta("a")]
            await asyncio.sleep(3600)
            yield []

    stream = Hanging([])
    got: list = []

    async def main():
        async def consume():
            async for events in run(new_composer(), stream):
                got.extend(events)

        task = asyncio.create_task(consume())
        while not any(e["type"] == "response.output_text.delta" for e in got):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert stream.closed == 1
    assert not any(e["type"] in TERMINALS for e in got)


# -- with a tool loop: several upstream steps ------------------------------------------------------------


def tool_step() -> FakeStream:
    return FakeStream([[g.ToolCallStart(0, "c", "search", kind="mcp", namespace="docs"), g.Finish("tool_calls")]])


def test_loop_runs_every_step_then_completes():
    first, second = FakeStream([[g.TextDelta("step one "), g.Finish("stop")]]), FakeStream(STEP)
    loop = FakeLoop([first, second])
    result, _ = drive(None, loop=loop)
    assert result.response["status"] == "completed"
    assert result.types.count("response.output_item.added") == 3  # tool list + two messages
    assert (first.closed, second.closed, loop.closed) == (1, 1, 1)


def test_loop_stopped_short_is_incomplete():
    loop = FakeLoop([FakeStream(STEP)], incomplete="max_messages")
    result, _ = drive(None, loop=loop)
    assert result.response["status"] == "incomplete"
    assert result.response["incomplete_details"] == {"reason": "max_messages"}


@pytest.mark.parametrize("where", ["prelude", "open_next", "after_step"])
def test_loop_failing_anywhere_ends_with_one_failed_event(where):
    steps = [tool_step(), FakeStream(STEP)]
    loop = FakeLoop(steps, fail=where)
    result, _ = drive(None, loop=loop)
    assert [t for t in result.types if t in TERMINALS] == ["response.failed"]
    assert loop.closed == 1
    opened = 0 if where == "prelude" else 1
    assert [s.closed for s in steps[:opened]] == [1] * opened


def test_loop_step_failing_mid_stream_closes_that_step_and_the_loop():
    broken = FakeStream(STEP, fail_at=1, exc=UpstreamError("lost"))
    loop = FakeLoop([FakeStream([[g.TextDelta("one"), g.Finish("stop")]]), broken])
    result, _ = drive(None, loop=loop)
    assert [t for t in result.types if t in TERMINALS] == ["response.failed"]
    assert broken.closed == 1 and loop.closed == 1
