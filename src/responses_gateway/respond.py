"""Starting one response, whatever carries it: route → history → tools → composer → batches of events.

HTTP (SSE or one JSON body), WebSocket frames and background jobs all start a response here; they differ
only in where the batches go. Everything that can refuse the request raises `APIError` before any event,
so a transport can still answer with a plain error.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from time import monotonic
from typing import Any

from . import offload
from .compaction.history import has_compaction
from .composer import Composer
from .generation import Usage
from .logs import RESPONSE_ID
from .observe import Observation
from .pipeline import OnFinal, Started, Steps, run
from .protocol.items import normalize_input
from .protocol.request import CreateResponse, check_include, conversation_id
from .protocol.response import skeleton
from .protocol.tools import Declared, Tool, ToolSet, found_tools, normalize_tools
from .route import Route
from .services import Services
from .state import conversation_history, resolve
from .tap import watched
from .tools.frame import Context, Kit, Lowering, Runner, ToolServices
from .tools.history import keeps_apart, lower_tools, shown_item, stored_item
from .tools.kits import order_of
from .tools.loop import ToolLoop
from .truncation import Truncating
from .upstreams.base import Batch, Call, EventStream, Upstream
from .upstreams.text_calls import TextCallsUpstream

# A conversation takes a response's input and output when it ends with these statuses (docs/conversations.md).
APPENDED = ("completed", "incomplete")

# (previous_response_id, this request's items, owner) → (history sent upstream, items as stored)
Resolver = Callable[[str | None, list[dict[str, Any]], str], Awaitable[tuple[list[dict[str, Any]], list[dict[str, Any]]]]]


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
    render: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lower_tools  # raw history → what upstreams see
    route: str = "*"  # the matching routing rule's `match`: the route's name in metrics
    upstream_route: Route | None = None  # the route itself (its settings: tools such as computer use read them)


async def prepare(services: Services, req: CreateResponse, owner: str, resolver: Resolver | None = None) -> Prepared:
    """Check the request's bounds (door.py), route the model, resolve the history (previous response, item
    references, conversation) and the tools. Raises APIError for anything the client must fix."""
    services.door.check_request(req)
    settings, store, toolbox = services.settings, services.store, services.toolbox
    check_include(req.include or (), toolbox.includes)
    rule, upstream = services.router.rule_for(req.model)
    upstream_model = rule.route.model or req.model
    items = await offload.run(normalize_input, req.input, toolbox) if offload.is_large() \
        else normalize_input(req.input, toolbox)
    trigger = bool(items) and items[-1]["type"] == "compaction_trigger"
    if trigger:  # a request, not an item: never stored, never sent upstream
        items = items[:-1]
    if resolver is None:
        history, items = await resolve(store, req.previous_response_id, items, owner, toolbox)
    else:
        history, items = await resolver(req.previous_response_id, items, owner)
    conversation = conversation_id(req.conversation)
    if conversation is not None:
        history = await conversation_history(store, conversation, owner, toolbox) + history
    tools = normalize_tools(req.tools, req.tool_choice, hosted_policy=settings.hosted_tools,
                            found=found_tools(history), toolbox=toolbox)
    await preflight(tools.gateway, services.tools, owner, history)
    if req.truncation == "auto":
        upstream = Truncating(upstream, getattr(getattr(upstream, "route", None), "context_window", None))
    plan = None
    lowering = Lowering(rule.route, settings, upstream_model, tuple(tools.gateway))
    spoken = fit_tools(tools, lowering, history) if tools.gateway else None
    if spoken is not None:  # a tool the model calls in text: told in the instructions, read out of the answer
        upstream = TextCallsUpstream(upstream, spoken)
    render: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = partial(lower_tools, lowering=lowering)
    if trigger or req.context_management or has_compaction(history):
        from .compaction.step import plan_compaction  # crypto: only for requests that use compaction

        plan = await plan_compaction(services, req, history, owner, trigger, lowering)
        render = plan.render
    call = Call(req, await offload.run(render, history) if offload.is_large() else render(history), tools,
                req.instructions, upstream_model)
    return Prepared(upstream, call, history, items, conversation, trigger, plan, render, rule.match, rule.route)


async def start(services: Services, req: CreateResponse, owner: str, *, resolver: Resolver | None = None,
                then: OnFinal | None = None, generate: bool = True) -> Started:
    """`services`: the app's (settings, router, store, ...). `resolver` replaces the store's history lookup
    (a WebSocket connection keeps its last response in memory); `then` runs with the final response after it
    is stored and before the terminal event is sent. `generate=False` (a WebSocket warm-up) calls no model:
    the response completes at once with no output, and its id can be chained like any other."""
    settings, store = services.settings, services.store
    started = monotonic()
    prepared = await prepare(services, req, owner, resolver)
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

    declared = call.tools.gateway
    if declared:
        wanted = frozenset(include)
        composer.show(lambda item: shown_item(item, wanted))
        if keeps_apart(by_kit(declared)):
            composer.keep(stored_item)

    def tool_loop(call: Call) -> ToolLoop:
        runners = start_runners(declared, services.tools, owner, req, history, frozenset(include), seen,
                                prepared.upstream_route)
        return ToolLoop(call, history, runners, render=prepared.render, max_rounds=settings.max_tool_rounds)

    loop: Steps | None = None
    stream: EventStream | None = None
    plan = prepared.compaction
    if not generate:
        stream = NoGeneration()
    elif plan is not None and plan.summarize:
        from .compaction.step import CompactionStep

        loop = CompactionStep(plan, call, history, answer=not prepared.trigger, hosted_policy=settings.hosted_tools,
                              toolbox=services.toolbox, tool_loop=tool_loop if declared else None)
        stream = await _open(upstream, loop.summary_call, seen)
    elif declared:
        loop = tool_loop(call)
        if all(d.functions for d in declared):  # nothing to list first: the first step opens before any event
            stream = await _open(upstream, call, seen)
    else:  # an UpstreamError here (an APIError) is answered with its own status, before any event
        stream = await _open(upstream, call, seen)
    save = store is not None and req.store is not False
    conversation = prepared.conversation

    async def on_final(final: dict[str, Any]) -> None:
        appended = conversation if store is not None and final["status"] in APPENDED else None
        if save and store is not None:  # the response and its conversation's new items: one transaction
            with seen.storing():
                await store.save(composer.stored(), items, owner, conversation=appended)
        elif appended is not None and store is not None:
            await store.append_conversation(appended, owner, items + composer.stored()["output"])
        if then is not None:
            await then(final)

    hook = on_final if save or conversation is not None or then is not None else None
    batches = watched(composer.response, owner, run(composer, stream, hook, loop, seen, upstream))  # (tap.py)
    return Started(req, composer, history, items, owner, batches, hook, seen)


async def preflight(declared: list[Declared], tools: ToolServices, owner: str,
                    history: list[dict[str, Any]]) -> None:
    """Each gateway-run kit's checks before any event: against the request's whole input (its `admit`), then
    against its service (its `preflight`)."""
    if not declared:  # most requests: no gateway-run tool
        return
    for kit, group in by_kit(declared).items():
        if kit.admit is not None:
            kit.admit(group, history, tools.service(kit))
        if kit.preflight is not None:
            await kit.preflight(group, tools.service(kit), owner)


def fit_tools(tools: ToolSet, lowering: Lowering, history: list[dict[str, Any]]) -> Tool | None:
    """The gateway-run tools offered in the route's terms (a kit's `fit`), before the first step; the one the
    model calls in text, if one is (its `text_calls`)."""
    spoken = None
    for declared in tools.gateway:
        fit = declared.kit.fit if isinstance(declared.kit, Kit) else None
        if fit is not None:
            for old, new in zip(declared.functions, fit(declared, lowering, history), strict=True):
                tools.refit(old, new)
                spoken = new if new.text_calls is not None else spoken
    return spoken


def start_runners(declared: list[Declared], tools: ToolServices, owner: str, req: CreateResponse,
                  history: list[dict[str, Any]], include: frozenset[str], seen: Observation | None,
                  route: Route | None) -> dict[str, Runner]:
    """One runner per kit among the declared tools (a kit gets all its declarations), each given its own
    service."""
    return {kit.name: kit.start(group, Context(tools.service(kit), owner, req, history, include, seen, route))
            for kit, group in by_kit(declared).items()}


def by_kit(declared: list[Declared]) -> dict[Kit[Any, Any], list[Declared]]:
    """The declarations grouped by kit, in the order of the registry (tools/kits.py): the order in which their
    annotators see the answer's text."""
    groups: dict[Kit[Any, Any], list[Declared]] = {}
    for one in declared:
        kit = one.kit
        assert isinstance(kit, Kit)  # a declaration's kit is one of the registry's (tools/kits.py)
        groups.setdefault(kit, []).append(one)
    return {kit: groups[kit] for kit in sorted(groups, key=order_of)}


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
