"""The frame every gateway-run tool is built on: its whole life, from start-up to one response's calls.

A gateway-run tool (MCP, file_search, web_search, code_interpreter, ...) is one package under `tools/` whose
`Kit` is registered in `tools/kits.py`. The kit says:

- what the tool is at the request boundary: pure functions to parse its declaration, echo it, normalize its
  items when a client sends them back, show them according to `include[]`, and render them to the model on
  later turns (`lower`);
- its settings group (`settings`: a dataclass of `settings.setting` fields, declared once in its package);
- its service (`serve`): what one process keeps for it (clients, caches, background tasks), made at start-up
  from its settings and the store, or `Unavailable` with how to enable it; closed at shutdown;
- its HTTP API (`routes`), mounted by the app;
- `start`, which makes a `Runner` for one response, given its service in a typed `Context`.

A Runner never builds Responses events: it says what its item looks like and which events of its own it wants
(a `Spec`: the event's type and its own fields), and the composer — through the small `Calls` interface a
runner is given — adds ids, `output_index`, `sequence_number` and the pairing. The tool loop
(`tools/loop.py`) asks it to run the calls the model made, between upstream steps, with a deadline; what the
model sees of a call on the next step is what `Kit.lower` makes of the finished item, so a replayed history
renders exactly as the live one did.

This module sits low (docs/architecture.md, "Layers"): it imports foundation, `protocol/` and `store/` only,
so a tool's package can build on it without reaching the composer, the services or the app.

Cost: a response without gateway-run tools never touches any of this. A tool's `delta` runs per argument
delta of its own calls only; an `Annotator` sees the output text of responses that declared its tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from ..protocol.tools import Declared, Tool, ToolSet

if TYPE_CHECKING:  # types only: importing a kit stays cheap
    from starlette.routing import BaseRoute

    from ..config import Settings
    from ..generation import ToolCallStart
    from ..observe import Observation
    from ..protocol.request import CreateResponse
    from ..route import Route
    from ..store import Store

__all__ = ["Annotator", "Calls", "Context", "Declared", "Event", "Events", "Item", "Kit", "Lowering", "NO_ROUTE", "OpenItem", "Runner",
           "Described", "Service", "Spec", "Start", "Tool", "ToolServices", "Unavailable", "WholeCalls"]

Event = dict[str, Any]
Events = list[Event]
Spec = tuple[str, dict[str, Any]]
"""An event a tool asks the composer for: its type, and the fields of its own (`delta`, `code`, ...)."""

Item = dict[str, Any]

S = TypeVar("S")  # a kit's settings group
T = TypeVar("T")  # a kit's service


class OpenItem:
    """An output item while it is open: its dict (as in the final output) and the buffer of its current part.

    The composer keeps every open item so; gateway-run tools see the items of their calls as this: `item` (the
    dict to fill in), `id`, `index`, `arguments` (the model's arguments so far), `scratch` (a slot of the
    tool's own, e.g. a decoder) and `done` (its `output_item.done` went out)."""

    __slots__ = ("kind", "item", "index", "id", "part", "buf", "logprobs", "signature", "runner", "scratch",
                 "annotations", "sent", "done")

    def __init__(self, kind: str, item: dict[str, Any], index: int, runner: Runner | None = None):
        self.kind = kind
        self.item = item
        self.index = index
        self.id = item["id"]
        self.part: str | None = None  # type of the open content part
        self.buf: list[str] = []
        self.logprobs: list[Any] | None = None
        self.signature: str | None = None
        self.runner = runner  # the gateway-run tool that makes this item, if any
        self.scratch: Any = None
        self.annotations: list[dict[str, Any]] = []  # of the open output_text part (with annotators)
        self.sent = 0  # characters of the open output_text part sent (with annotators)
        self.done = False  # its output_item.done went out (gateway-run items)

    @property
    def arguments(self) -> str:
        return "".join(self.buf)


class Calls(Protocol):
    """All a runner gets of the composer (composer.py implements it, in tools/calls.py): events about its
    own items, numbered and ordered by the composer."""

    def call_events(self, call: OpenItem, specs: Sequence[Spec]) -> Events:
        """Events about an open item (`response.web_search_call.searching`, ...)."""
        ...

    def end_call(self, call: OpenItem, status: str | None, specs: Sequence[Spec] = ()) -> Events:
        """The item is finished: its `status` (None: the item type has none), its own events, then
        `response.output_item.done`."""
        ...

    def fail_call(self, call: OpenItem, message: str) -> Events:
        """The call did not run or did not finish: closed as its tool says a failure looks (`Runner.failed`)."""
        ...

    def add_item(self, name: str, item: Item, specs: Sequence[Spec] = (), *,
                 run: bool = False) -> tuple[OpenItem, Events]:
        """An item the tool adds without the model asking (an MCP tool listing, a call the client approved):
        `output_item.added`, then `specs`; it stays open until `end_call`. With `run`, the tool loop runs it
        like a call the model made."""
        ...


class Annotator(Protocol):
    """Citations, added while the answer streams. It sees every piece of output text of the response's
    assistant messages (`at`: characters already sent in this content part) and returns the text to send
    now and the annotations that became complete, their indexes in the text as sent. It may hold back text
    (a citation marker being written) but never changes text once returned: the deltas always add up to
    the final text."""

    def feed(self, text: str, at: int) -> tuple[str, list[dict[str, Any]]]: ...

    def flush(self, at: int) -> tuple[str, list[dict[str, Any]]]:
        """The content part ends: what is held back, and the annotations that completes."""
        ...


class Runner(Protocol):
    """One kit's tools in one response (every declaration of that kit in the request)."""

    timeout: float  # seconds one call may run before the loop fails it

    def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        """Before the first upstream step: e.g. list an MCP server's tools (and `tools.offer` them)."""
        ...

    def item(self, start: ToolCallStart) -> Item:
        """The output item for a call the model starts, as `response.output_item.added` shows it."""
        ...

    def added(self, call: OpenItem) -> list[Spec]:
        """Events right after `output_item.added` (e.g. `response.web_search_call.in_progress`)."""
        ...

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        """A piece of the call's arguments as the model writes it (`call.arguments` has it already)."""
        ...

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        """The arguments are whole: events to send, and whether to run the call (True: it stays open and
        `run` ends it; False: the composer closes it now, as it stands — e.g. an approval request)."""
        ...

    def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        """Execute the call: progress events, then `calls.end_call(...)`. Cancelled if the response ends
        (client gone, drain, deadline); the loop fails a call that `run` left open."""
        ...

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        """The call did not run or did not finish (`message` says why): fill the item's error fields; its
        status (None: its item type has none) and the events to send before `output_item.done`."""
        ...

    def annotator(self) -> Annotator | None:
        """Citations for this response's answer text, if the tool makes any."""
        ...

    async def aclose(self) -> None:
        """The response is over: release connections, sessions, ..."""
        ...


@runtime_checkable
class WholeCalls(Protocol):
    """A runner whose calls the client sees only whole (OpenAI streams a `computer_call` as `output_item.added`
    with its action, then `.done`: no argument events). The composer shows nothing while the model writes the
    call; once the arguments are whole, `finished` gives the item as the client sees it — or, for a call the
    model got wrong, the call and its output as the model is to see them on its next step: the client sees
    nothing of that attempt, and the model tries again (within the response's tool rounds)."""

    def finished(self, call: OpenItem) -> Item | tuple[Item, Item]: ...


# -- a tool's life in one process -----------------------------------------------------------------------

class Service(Protocol):
    """What a kit's `serve` makes: closed once, at shutdown (in the reverse order of the kits)."""

    async def aclose(self) -> None: ...


@runtime_checkable
class Described(Protocol):
    """A service that says in a few words how it runs, for the start-up block (e.g. web_search's providers)."""

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Unavailable:
    """A tool this process cannot run. `why` says how to enable it: the start-up block prints it, and a
    request declaring the tool meets it through `--hosted-tools` (dropped, with a log line once, or a 400).
    `refuse`: the deployment asked for the tool but it cannot run here (a sandbox this machine lacks): a
    request declaring it is refused with a 400 saying why, never silently dropped."""

    why: str
    refuse: bool = False


@dataclass(frozen=True)
class Start(Generic[S]):
    """What a tool's service is made from: the deployment's core settings (upstream, `public_url`,
    `lease_timeout`, ...), its own settings group, and the store (None with `--db none`)."""

    settings: Settings
    group: S
    store: Store | None


@dataclass(frozen=True)
class Lowering:
    """What a history is rendered for: the route the request goes to and the model name sent to it (a tool may
    lower its items in the route's terms: computer use's coordinate profile, Claude's computer tool, a
    Responses upstream that runs the tool itself), the deployment's settings (a tool's own group: how many
    screenshots the model keeps) and the request's declarations of gateway-run tools (the display a computer
    tool names). Empty: no route known."""

    route: Route | None = None
    settings: Settings | None = None
    model: str = ""
    declared: tuple[Declared, ...] = ()


NO_ROUTE = Lowering()  # a history rendered with no route in view (tests; tools that only read items)


@dataclass(frozen=True)
class Context(Generic[T]):
    """What a runner may use, for one response: its kit's service (typed; a runner only starts where the
    service runs), the caller's owner id, the request, the items before this response (raw, gateway items
    as stored), the request's `include[]`, its observation (timings, trace) and its route."""

    service: T
    owner: str
    request: CreateResponse
    history: list[Item]
    include: frozenset[str] = frozenset()
    seen: Observation | None = None
    route: Route | None = None


class ToolServices:
    """The tools of one process at run time: each kit's running service, or why it does not run.

    `services.tools` (services.py) is one of these; runners are handed their own service, route handlers
    ask for it by kit (`api/request.running`). Kits without a `serve` run with no service (None)."""

    def __init__(self, running: Mapping[str, Any] | None = None,
                 unavailable: Mapping[str, Unavailable] | None = None):
        self.running: dict[str, Any] = dict(running or {})
        self.unavailable: dict[str, Unavailable] = dict(unavailable or {})

    def service(self, kit: Kit[Any, T]) -> T | None:
        """The kit's service in this process, or None (it does not run here, or it needs none)."""
        return cast("T | None", self.running.get(kit.name))

    def named(self, name: str, kind: type[T]) -> T | None:
        """The service of the kit named `name`, if it runs here and is a `kind` (a tool's own HTTP handlers
        ask so: they know their tool's name and service, not its kit)."""
        found = self.running.get(name)
        return found if isinstance(found, kind) else None

    def why(self, name: str) -> Unavailable | None:
        """Why the kit named `name` does not run in this process, or None when it does."""
        return self.unavailable.get(name)


def _shown(item: Item, include: frozenset[str]) -> Item:
    return item


@dataclass(frozen=True, eq=False)
class Kit(Generic[S, T]):
    """A tool type the gateway runs: its declarations, its items, its settings, its service, its HTTP API,
    and how to start it in one response.

    Everything but `serve` and `start` is pure and cheap (it runs at the request boundary and on stored
    history). Kits compare by identity (one per tool)."""

    name: str  # e.g. "file_search"; metrics and logs use it
    types: tuple[str, ...]  # declaration `type`s it serves (aliases included, e.g. web_search_preview)
    item_types: tuple[str, ...]  # output item types it makes
    parse: Callable[[dict[str, Any], str], Declared]  # a declaration → Declared; raises APIError (400)
    echo: Callable[[Declared], dict[str, Any]]  # as the response's `tools` shows it (never secrets)
    normalize: Callable[[dict[str, Any], str], Item]  # an item of its types sent back as input
    # an item as upstreams see it: a call and its output (either may be None: a call whose output is an item of
    # its own, as a client-run tool's), or None (nothing)
    lower: Callable[[Item], tuple[Item | None, Item | None] | None]
    start: Callable[[Sequence[Declared], Context[T]], Runner]
    shown: Callable[[Item, frozenset[str]], Item] = _shown  # the client's copy of an item, given include[]
    includes: tuple[str, ...] = ()  # the include[] values it honours
    # Its settings group (a dataclass of `settings.setting` fields), its service made from them at start-up,
    # and its HTTP API. A kit without `serve` needs no service (its runner's context has None).
    settings: type[S] | None = None
    serve: Callable[[Start[S]], Awaitable[T | Unavailable]] | None = None
    routes: Sequence[BaseRoute] = ()
    # Optional: a check across all of a request's declarations of this kit (e.g. unique MCP server labels),
    # raising APIError; and a pass over a whole history before `lower`, for the route and settings it is
    # rendered for (e.g. MCP's declined approvals; computer use's screenshots and coordinates).
    check: Callable[[Sequence[Declared]], None] | None = None
    rewrite: Callable[[list[Item], Lowering], list[Item]] | None = None
    # Optional: an async check against its service before the response starts (the declarations, the
    # service, the caller's owner id), raising APIError — e.g. file_search's vector stores must be the
    # caller's (a 404 rather than a failed call).
    preflight: Callable[[Sequence[Declared], T, str], Awaitable[None]] | None = None
    # Optional: its own expired rows removed from the store by `responses-gateway db purge`, said in words
    # ("3 expired vector stores"); while serving, its service sweeps them itself.
    purge: Callable[[Store], Awaitable[str]] | None = None
    # Optional: a check of the declarations against the request's whole input, history included, given its
    # service, raising APIError before any event (image_generation: a mask needs an image to apply to;
    # computer use: a screenshot within the size limit, safety checks acknowledged).
    admit: Callable[[Sequence[Declared], Sequence[Item], T], None] | None = None
    # Optional: an item as the store keeps it, a large part kept elsewhere in the store (image_generation keeps
    # its image in the files store, so history reads stay small); and the reverse for a client reading stored
    # items (GET, input_items, a conversation's items), given the store and the caller's owner id.
    stored: Callable[[Item], Item] | None = None
    restore: Callable[[list[Item], Store, str], Awaitable[None]] | None = None
    # Optional: the functions a declaration offers, in the terms of the route its request goes to (`Lowering`:
    # the route, the model, the settings), given the history before the response — one for each of its
    # `functions`, replacing it before the first step (computer use: the function the route's model was
    # trained with and its frame, Claude's own versioned tool). Without it, `functions` as parsed.
    fit: Callable[[Declared, Lowering, Sequence[Item]], tuple[Tool, ...]] | None = None
