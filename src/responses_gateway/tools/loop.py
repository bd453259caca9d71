"""The tool loop: the upstream steps of a response whose model calls gateway-run tools.

Before the first step each tool may do what it needs (an MCP server's tools are listed, calls the client
approved are run). After each step the loop runs the calls the model made — each under its tool's deadline,
several at once when `parallel_tool_calls` allows — and the next step sees their results, rendered by the
tools' `lower` exactly as a stored history would be. The loop stops when the model answers in text or calls a
client tool (the response ends for the client to run it), and a response whose model keeps calling tools is
cut at `max_rounds` steps (`response.incomplete`, reason `max_messages`, as OpenAI names an agent loop cut
short). `max_tool_calls` counts every gateway-run call of the response; once spent, the tools are withdrawn
so the model must answer, and a call beyond it fails with a message the model sees.

Every event still comes from the one composer: the loop only asks for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any

from .. import metrics
from ..composer import Composer
from ..pipeline import Events, Stop
from ..upstreams.base import Call
from .frame import OpenItem, Runner
from .history import CLIENT_CALLS

log = logging.getLogger("responses_gateway.tools")

# Calls of one step run at once, at most: enough for a model's fan-out, bounded for the tools' sake.
MAX_PARALLEL = 8


class ToolLoop:
    """`call`: the first step's call; `history`: the raw items before this response (gateway items
    included); `render`: raw items → what upstreams see."""

    def __init__(self, call: Call, history: list[dict[str, Any]], runners: dict[str, Runner], *,
                 render: Callable[[list[dict[str, Any]]], list[dict[str, Any]]], max_rounds: int):
        self.call = call
        self.history = history
        self.runners = runners
        self.render = render
        self.max_rounds = max_rounds
        self.max_calls = call.request.max_tool_calls
        self.parallel = call.request.parallel_tool_calls is not False
        self.calls_made = 0
        self.rounds = 0
        self.step_start = 0
        self.stop: Stop | None = None

    def attach(self, composer: Composer) -> None:
        """The composer makes this response's gateway items through the runners (and their annotators)."""
        for name, runner in self.runners.items():
            composer.use(name, runner)

    # -- Steps --------------------------------------------------------------------------------------------

    async def prelude(self, composer: Composer) -> AsyncIterator[Events]:
        self.attach(composer)
        for runner in self.runners.values():
            async for events in runner.prelude(composer, self.call.tools):
                yield events
        async for events in self._run(composer, composer.take_pending()):  # calls the client approved
            yield events

    def next_call(self, composer: Composer) -> Call | Stop:
        if self.stop is not None:
            return self.stop
        if self.rounds:
            self.call.tools.unforce()  # a forced tool choice applies to the first step only
        self.step_start = len(composer.output)
        return replace(self.call, items=self.render(self.history + composer.model_output(composer.output)))

    async def after_step(self, composer: Composer) -> AsyncIterator[Events]:
        pending = composer.take_pending()
        retry = composer.take_retry()  # a call the model got wrong: it sees why and tries again
        if not pending and not retry:
            self.stop = Stop()
            return
        async for events in self._run(composer, pending):
            yield events
        if any(item["type"] in CLIENT_CALLS for item in composer.output[self.step_start:]):
            self.stop = Stop()  # the client has calls of its own to run: the response ends here
            return
        self.rounds += 1
        if self.rounds >= self.max_rounds:
            self.stop = Stop("max_messages")
            return
        if self.max_calls is not None and self.calls_made >= self.max_calls:
            self.call.tools.withdraw_gateway()

    async def aclose(self) -> None:
        for runner in self.runners.values():
            try:
                await runner.aclose()
            except Exception:  # closing must never hide the response's own outcome
                log.debug("closing a tool runner failed", exc_info=True)

    # -- running calls --------------------------------------------------------------------------------------

    async def _run(self, composer: Composer, calls: Sequence[OpenItem]) -> AsyncIterator[Events]:
        admitted: list[OpenItem] = []
        for call in calls:
            if self.max_calls is not None and self.calls_made >= self.max_calls:
                yield composer.fail_call(call, f"Not run: max_tool_calls ({self.max_calls}) was reached.")
            else:
                self.calls_made += 1
                admitted.append(call)
        if len(admitted) <= 1 or not self.parallel:
            for call in admitted:
                async for events in self._one(composer, call):
                    yield events
            return
        async for events in self._together(composer, admitted):
            yield events

    async def _one(self, composer: Composer, call: OpenItem) -> AsyncIterator[Events]:
        """One call, under its tool's deadline; a call its tool leaves open is failed, never left open."""
        runner = call.runner
        if runner is None:
            return
        timeout = runner.timeout
        try:
            async with asyncio.timeout(timeout):
                async for events in runner.run(call, composer):
                    yield events
        except TimeoutError:
            if not call.done:
                yield composer.fail_call(call, f"The tool did not finish within {timeout:g} seconds.")
        except Exception:
            log.exception("a %s call failed inside the gateway", call.item.get("type"))
            if not call.done:
                yield composer.fail_call(call, "The tool failed inside the gateway.")
        if not call.done:
            yield composer.fail_call(call, "The tool ended without a result.")
        metrics.tool_calls.labels(call.item["type"], call.item.get("status") or "completed").inc()

    async def _together(self, composer: Composer, calls: list[OpenItem]) -> AsyncIterator[Events]:
        """Several calls at once (at most MAX_PARALLEL running); each call's events stay in order."""
        queue: asyncio.Queue[Events | None] = asyncio.Queue()
        gate = asyncio.Semaphore(MAX_PARALLEL)

        async def drive(call: OpenItem) -> None:
            async with gate:
                async for events in self._one(composer, call):
                    queue.put_nowait(events)

        tasks = [asyncio.create_task(drive(call)) for call in calls]
        done = asyncio.gather(*tasks)
        done.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (events := await queue.get()) is not None:
                yield events
            await done  # a bug in drive surfaces here
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
