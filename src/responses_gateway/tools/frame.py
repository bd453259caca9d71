"""The frame every gateway-run tool is built on: what a tool declares, and what it does in one response.

A gateway-run tool (MCP, file_search, web_search, code_interpreter, ...) is a `Kit` registered in
`tools/kits.py`: pure functions for the request boundary (parse the declaration, echo it, normalize its
items when a client sends them back, show them to a client according to `include[]`, render them to the model
on later turns), and `start`, which makes a `Runner` for one response.

A Runner never builds Responses events itself: it says what its item looks like and which events of its own
it wants (a `Spec`: the event's type and its own fields), and the composer adds ids, `output_index`,
`sequence_number` and the pairing. The tool loop (`tools/loop.py`) asks it to run the calls the model made,
between upstream steps, with a deadline; what the model sees of a call on the next step is what `Kit.lower`
makes of the finished item, so a replayed history renders exactly as the live one did.

Cost: a response without gateway-run tools never touches any of this. A tool's `delta` runs per argument
delta of its own calls only; an `Annotator` sees the output text of responses that declared its tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..composer import Composer, OpenItem
    from ..generation import ToolCallStart
    from ..observe import Observation
    from ..protocol.request import CreateResponse
    from ..protocol.tools import Tool, ToolSet
    from ..services import Services

Event = dict[str, Any]
Events = list[Event]
Spec = tuple[str, dict[str, Any]]
"""An event a tool asks the composer for: its type, and the fields of its own (`delta`, `code`, ...)."""

Item = dict[str, Any]


@dataclass(frozen=True)
class Declared:
    """One tool of a request's `tools` that the gateway runs, parsed by its kit.

    `config` is the kit's own typed view of the declaration (e.g. the MCP server, the vector store ids);
    `functions` what the model is offered for it from the start (an MCP server's come later, once listed).
    """

    kit: Kit
    where: str  # its place in the request, e.g. "tools[2]", for errors
    config: Any
    functions: tuple[Tool, ...] = ()


@dataclass(frozen=True)
class Context:
    """What a runner may use, for one response. `services` is the app's (store, settings, ...)."""

    services: Services
    owner: str
    request: CreateResponse
    history: list[Item]  # the items before this response, raw (gateway items as stored)
    include: frozenset[str] = frozenset()
    seen: Observation | None = None


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

    def prelude(self, composer: Composer, tools: ToolSet) -> AsyncIterator[Events]:
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

    def run(self, call: OpenItem, composer: Composer) -> AsyncIterator[Events]:
        """Execute the call: progress events, then `composer.end_call(...)`. Cancelled if the response
        ends (client gone, drain, deadline); the loop fails a call that `run` left open."""
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


@dataclass(frozen=True)
class Kit:
    """A tool type the gateway runs: its declarations, its items, and how to start it.

    Everything but `start` is pure and cheap (it runs at the request boundary and on stored history);
    `start` may import what the tool needs (the MCP SDK, a sandbox).
    """

    name: str  # e.g. "file_search"; metrics and logs use it
    types: tuple[str, ...]  # declaration `type`s it serves (aliases included, e.g. web_search_preview)
    item_types: tuple[str, ...]  # output item types it makes
    parse: Callable[[dict[str, Any], str], Declared]  # a declaration → Declared; raises APIError (400)
    echo: Callable[[Declared], dict[str, Any]]  # as the response's `tools` shows it (never secrets)
    normalize: Callable[[dict[str, Any], str], Item]  # an item of its types sent back as input
    lower: Callable[[Item], tuple[Item, Item] | None]  # an item as upstreams see it: a call and its output
    start: Callable[[Sequence[Declared], Context], Runner]
    shown: Callable[[Item, frozenset[str]], Item] = lambda item, include: item  # the client's copy
    includes: tuple[str, ...] = ()  # the include[] values it honours
    # None when the deployment can run it; else how to enable it (logged when a request's tool is dropped)
    unavailable: Callable[[Services], str | None] = lambda services: None
    # Optional: a check across all of a request's declarations of this kit (e.g. unique MCP server labels),
    # raising APIError; and a pass over a whole history before `lower` (e.g. MCP's declined approvals).
    check: Callable[[Sequence[Declared]], None] | None = None
    rewrite: Callable[[list[Item]], list[Item]] | None = None
    # Optional: an async check against the deployment before the response starts (services, owner), raising
    # APIError — e.g. file_search's vector stores must be the caller's (a 404 rather than a failed call).
    preflight: Callable[[Sequence[Declared], Services, str], Awaitable[None]] | None = None
