"""Compaction inside a response: the upstream writes a summary, the composer emits it as one sealed item.

respond.start chooses between two uses of the same step:
- trigger: the input ends with `{"type": "compaction_trigger"}` (Codex's remote compaction, and
  POST /v1/responses/compact): the response is exactly one `compaction` output item, then `response.completed`.
- threshold: `context_management: [{"type": "compaction", "compact_threshold": N}]` and the rendered input is
  estimated above N tokens: the compaction item first, then the answer written from the compacted history,
  in the same stream.

The summary step offers the request's tools with tool choice "none" (some upstreams refuse a history with tool
calls but no tools); the composer captures its text and streams nothing of it. An upstream error, a stream
cut short, a refusal or an empty summary fails the response with its one terminal event — never a compaction
item.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..composer import Composer
from ..errors import APIError, UpstreamError
from ..pipeline import Events, Stop
from ..protocol.request import CreateResponse, compact_threshold
from ..protocol.tools import Toolbox, found_tools, normalize_tools
from ..tokens import estimate
from ..tools.frame import NO_ROUTE, Lowering
from ..tools.history import lower_tools
from ..upstreams.base import Call
from . import keys
from .history import has_compaction, lower_compaction, misplaced_trigger, sealed
from .keys import Keyring

if TYPE_CHECKING:
    from ..services import Services
    from ..tools.loop import ToolLoop

log = logging.getLogger("responses_gateway.compaction")

SUMMARY_PROMPT = """\
The conversation above is about to be replaced by a summary, because the context window is filling up. Write \
that summary now, for yourself: the conversation will continue from it alone, together with the user's \
most recent messages.

Cover, in this order:
1. The user's goal and every requirement, constraint or preference they stated.
2. What has been done so far: decisions, changes made (files, commands, tools called) and the results that \
matter, including errors and how they were resolved.
3. The current state of the work, and anything left unfinished or in progress.
4. The next steps, and open questions.

Keep names, file paths, identifiers, numbers and exact error messages verbatim. Leave out pleasantries and \
anything no longer relevant. Reply with the summary only; do not call tools and do not address the user."""


class Plan:
    """Compaction for one request: the sealed items it carries, opened, and whether it summarises first."""

    def __init__(self, ring: Keyring | None, owner: str, summaries: dict[str, str], summarize: bool,
                 lowering: Lowering = NO_ROUTE):
        self.lowering = lowering  # the route and settings the history is rendered for (tools/frame.py)
        self.ring = ring
        self.owner = owner
        self.summaries = summaries  # sealed content → summary, for every compaction item in play
        self.summarize = summarize

    def render(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Raw items → what upstreams see (compaction items and gateway-run tools' items lowered)."""
        return lower_tools(lower_compaction(items, self.summaries), self.lowering)


async def plan_compaction(services: Services, req: CreateResponse, history: list[dict[str, Any]], owner: str,
                          trigger: bool, lowering: Lowering = NO_ROUTE) -> Plan:
    """Raises APIError (400) before any event for a misplaced trigger or an item that does not open."""
    problem = misplaced_trigger(history)
    if problem is not None:
        raise problem
    if trigger and not history:
        raise APIError(400, "There is nothing to compact: the input is empty.", param="input", code="invalid_value")
    ring = None
    summaries: dict[str, str] = {}
    if has_compaction(history):
        ring = await keyring(services)
        for i, item in enumerate(history):
            content = sealed(item)
            if content is not None and content not in summaries:
                summaries[content] = ring.open(content, owner, f"input[{i}]")
    result = Plan(ring, owner, summaries, trigger, lowering)
    threshold = compact_threshold(req)
    if not trigger and threshold is not None:
        result.summarize = estimate(result.render(history), req.instructions, req.tools) > threshold
    if result.summarize and result.ring is None:
        result.ring = await keyring(services)
    return result


def summary_call(call: Call, history: list[dict[str, Any]], plan_: Plan, hosted_policy: str,
                 toolbox: Toolbox) -> Call:
    """The step that writes the summary: the history so far, then the request to summarise it."""
    req = call.request.model_copy(update={
        "tool_choice": "none", "text": None, "include": None, "top_logprobs": None, "max_output_tokens": None,
        "max_tool_calls": None, "parallel_tool_calls": None,
    })
    tools = normalize_tools(req.tools, "none", hosted_policy=hosted_policy, found=found_tools(history),
                            toolbox=toolbox)
    ask = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": SUMMARY_PROMPT}]}
    return Call(req, [*plan_.render(history), ask], tools, call.instructions, call.model)


class CompactionStep:
    """The pipeline's Steps (as tools/loop.ToolLoop): summary first, then — threshold use only — the
    answer, itself run by a tool loop when the request has gateway-run tools."""

    def __init__(self, plan_: Plan, call: Call, history: list[dict[str, Any]], *, answer: bool, hosted_policy: str,
                 toolbox: Toolbox, tool_loop: Callable[[Call], ToolLoop] | None = None):
        self.plan = plan_
        self.call = call  # the answer step's call
        self.history = history
        self.answer = answer
        self.tool_loop = tool_loop
        self.summary_call = summary_call(call, history, plan_, hosted_policy, toolbox)
        self.inner: ToolLoop | None = None  # the tool loop running the answer
        self.summarised = False
        self.stop: Stop | None = None

    async def prelude(self, composer: Composer) -> AsyncIterator[Events]:
        composer.capture()
        return
        yield

    def next_call(self, composer: Composer) -> Call | Stop:
        if self.stop is not None:
            return self.stop
        if self.inner is not None:
            return self.inner.next_call(composer)
        return self.call

    async def after_step(self, composer: Composer) -> AsyncIterator[Events]:
        if self.summarised:
            if self.inner is None:
                self.stop = Stop()
                return
            async for events in self.inner.after_step(composer):
                yield events
            return
        self.summarised = True
        summary = "".join(composer.captured or ())
        reason = composer.finish_reason
        if reason is None:
            raise UpstreamError("The upstream ended the stream before the summary was finished.")
        if reason == "content_filter":
            raise UpstreamError("The upstream refused to write the summary (content filter).")
        if not summary.strip():
            raise UpstreamError("The upstream wrote an empty summary; nothing was compacted.")
        if reason == "length":
            log.warning("response %s: the summary reached the output token limit and may be cut short",
                        composer.response["id"])
        if self.plan.ring is None:  # plan_compaction gives every summarising plan a keyring
            raise RuntimeError("compaction planned without a keyring")
        content = self.plan.ring.seal(summary, self.plan.owner)
        self.plan.summaries[content] = summary
        yield composer.compaction(content)
        if not self.answer:
            self.stop = Stop()
            return
        self.call = replace(self.call, items=self.plan.render([*self.history, *composer.output]))
        if self.tool_loop is not None:
            self.inner = self.tool_loop(self.call)
            async for events in self.inner.prelude(composer):
                yield events

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()


async def keyring(services: Services) -> Keyring:
    """The app's keyring, made on first use (requests without compaction never pay for it)."""
    ring = services.keyring
    if ring is None:
        configured = services.settings.compaction_keys()
        if not configured:
            fresh = secrets.token_urlsafe(32)
            if services.store is not None:
                configured = [await services.store.secret(keys.STORE_NAME, fresh)]
            else:
                log.warning("no --compaction-key and no store: compaction items open only in this process")
                configured = [fresh]
        ring = services.keyring = Keyring(configured)
    return ring
