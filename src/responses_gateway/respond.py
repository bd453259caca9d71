"""Starting one response, whatever carries it: route → history → tools → composer → batches of events.

HTTP (SSE or one JSON body), WebSocket frames and background jobs all start a response here; they differ
only in where the batches go. Everything that can refuse the request raises `APIError` before any event,
so a transport can still answer with a plain error.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any

from . import offload
from .compaction.history import has_compaction
from .composer import Composer
from .generation import Usage
from .logs import RESPONSE_ID
from .mcp.history import lower_mcp
from .observe import Observation
from .pipeline import OnFinal, Steps, run
from .protocol.items import normalize_input
from .protocol.request import CreateResponse, conversation_id
from .protocol.response import skeleton
from .protocol.tools import found_tools, normalize_tools
from .state import conversation_history, resolve
from .truncation import Truncating
from .upstreams.base import Batch, Call, EventStream, Upstream

if TYPE_CHECKING:  # the MCP SDK is imported only by requests with MCP tools
    from .mcp.loop import MCPLoop

# A conversation takes a response's input and output when it ends with these statuses (docs/conversations.md).
APPENDED = ("completed", "incomplete")

# (previous_response_id, this request's items, owner) → (history sent upstream, items as stored)
Resolver = Callable[[str | None, list[dict[str, Any]], str], Awaitable[tuple[list[dict[str, Any]], list[dict[str, Any]]]]]


@dataclass
class Started:
    """A response that has started: consume `batches` (each a list of events) to run it to its end."""

    request: CreateResponse
    composer: Composer
    history: list[dict[str, Any]]  # the full input sent upstream
    items: list[dict[str, Any]]  # this request's input items, with ids, as stored
    owner: str
    batches: AsyncGenerator[list[dict[str, Any]], None]
    # what runs with the final response before the terminal event (store, conversation, `then`); a job that
    # ends the response itself (a background cancel) runs it too
    on_final: OnFinal | None = None

    @property
    def final(self) -> dict[str, Any]:
        return self.composer.final


@dataclass
class Prepared:
    """A request resolved against its route and state, ready to call the upstream (or count its tokens)."""

    upstream: Upstream
    call: Call
    history: list[dict[str, Any]]
    items: list[dict[str, Any]]
    conversation: str | None
    trigger: bool = False  # the input ended with a compaction trigger (removed from `items`)
    compaction: Any = None  # compaction.step.Plan, when compaction items, a trigger or context_management
    render: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lower_mcp  # raw history → what upstreams see
    route: str = "*"  # the matching routing rule's `match`: the route's name in metrics


async def prepare(state: Any, req: CreateResponse, owner: str, resolver: Resolver | None = None) -> Prepared:
    """Route the model, resolve the history (previous response, item references, conversation) and the
    tools. Raises APIError for anything the client must fix."""
    settings, store = state.settings, state.store
    rule, upstream = state.router.rule_for(req.model)
    upstream_model = rule.route.model or req.model
    items = await offload.run(normalize_input, req.input)
    trigger = bool(items) and items[-1]["type"] == "compaction_trigger"
    if trigger:  # a request, not an item: never stored, never sent upstream
        items = items[:-1]
    if resolver is None:
        history, items = await resolve(store, req.previous_response_id, items, owner)
    else:
        history, items = await resolver(req.previous_response_id, items, owner)
    conversation = conversation_id(req.conversation)
    if conversation is not None:
        history = await conversation_history(store, conversation, owner) + history
    tools = normalize_tools(req.tools, req.tool_choice, hosted_policy=settings.hosted_tools,
                            found=found_tools(history))
    if req.truncation == "auto":
        upstream = Truncating(upstream, getattr(getattr(upstream, "route", None), "context_window", None))
    plan = None
    render = lower_mcp
    if trigger or req.context_management or has_compaction(history):
        from .compaction.step import plan_compaction  # crypto: only for requests that use compaction

        plan = await plan_compaction(state, req, history, owner, trigger)
        render = plan.render
    call = Call(req, await offload.run(render, history), tools, req.instructions, upstream_model)
    return Prepared(upstream, call, history, items, conversation, trigger, plan, render, rule.match)


async def start(state: Any, req: CreateResponse, owner: str, *, resolver: Resolver | None = None,
                then: OnFinal | None = None, generate: bool = True) -> Started:
    """`state`: the app's state (settings, router, store). `resolver` replaces the store's history lookup
    (a WebSocket connection keeps its last response in memory); `then` runs with the final response after it
    is stored and before the terminal event is sent. `generate=False` (a WebSocket warm-up) calls no model:
    the response completes at once with no output, and its id can be chained like any other."""
    settings, store = state.settings, state.store
    started = monotonic()
    prepared = await prepare(state, req, owner, resolver)
    seen = Observation(prepared.route, req.model, started)
    call, history, items, upstream = prepared.call, prepared.history, prepared.items, prepared.upstream
    include = req.include or ()
    response = skeleton(req, call.tools)
    RESPONSE_ID.set(response["id"])
    if prepared.conversation is not None:
        response["conversation"] = {"id": prepared.conversation}
    composer = Composer(
        response,
        logprobs="message.output_text.logprobs" in include,
        encrypted_reasoning="reasoning.encrypted_content" in include,
        reasoning_summary=bool(req.reasoning and (req.reasoning.summary or req.reasoning.generate_summary)
                               not in (None, "none")),
    )

    def mcp_loop(call: Call) -> MCPLoop:
        from .mcp.loop import MCPLoop  # the MCP SDK is imported only by requests with MCP tools

        return MCPLoop(call, history, upstream, allow_hosts=settings.mcp_hosts(), timeout=settings.mcp_timeout,
                       max_rounds=settings.max_tool_rounds, render=prepared.render)

    loop: Steps | None = None
    stream: EventStream | None = None
    plan = prepared.compaction
    if not generate:
        stream = NoGeneration()
    elif plan is not None and plan.summarize:
        from .compaction.step import CompactionStep

        loop = CompactionStep(plan, call, history, upstream, answer=not prepared.trigger,
                              hosted_policy=settings.hosted_tools, mcp_loop=mcp_loop if call.tools.mcp else None)
        stream = await _open(upstream, loop.summary_call, seen)
    elif call.tools.mcp:  # tools are listed inside the stream first, so every step opens inside it
        loop = mcp_loop(call)
    else:  # an UpstreamError here (an APIError) is answered with its own status, before any event
        stream = await _open(upstream, call, seen)
    save = store is not None and req.store is not False
    conversation = prepared.conversation

    async def on_final(final: dict[str, Any]) -> None:
        appended = conversation if final["status"] in APPENDED else None
        if save:  # the response and its conversation's new items: one transaction, kept or failed together
            with seen.storing():
                await store.save(composer.stored(), items, owner, conversation=appended)
        elif appended is not None:
            await store.append_conversation(appended, owner, items + composer.stored()["output"])
        if then is not None:
            await then(final)

    hook = on_final if save or conversation is not None or then is not None else None
    return Started(req, composer, history, items, owner, run(composer, stream, hook, loop, seen), hook)


async def _open(upstream: Upstream, call: Call, seen: Observation) -> EventStream:
    seen.opening()
    try:
        return await upstream.open(call)
    except BaseException as exc:  # answered before any event: the response's span ends here
        seen.abandon(exc)
        raise


class NoGeneration:
    """The upstream stream of a warm-up: nothing generated, zero tokens used."""

    async def __aiter__(self) -> AsyncGenerator[Batch, None]:
        yield [Usage()]

    async def aclose(self) -> None:
        pass
