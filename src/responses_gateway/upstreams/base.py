"""What every upstream adapter offers the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from .. import generation as g
from ..errors import UpstreamError
from ..protocol.request import CreateResponse
from ..protocol.tools import ToolSet
from ..route import Route as Route  # re-exported: the adapters take their route from here
from ..route import RouteKind as RouteKind
from ..tokens import char_tokens, estimate


@dataclass
class Call:
    """One generation step as adapters see it: the request, the full input history, the tools offered."""

    request: CreateResponse
    items: list[dict[str, Any]]
    tools: ToolSet
    instructions: str | None = None
    model: str = ""  # the upstream's name for the model

    def __post_init__(self) -> None:
        if not self.model:
            self.model = self.request.model

    @property
    def want_logprobs(self) -> bool:
        return "message.output_text.logprobs" in (self.request.include or ())

    def estimated_usage(self, produced_chars: int, reasoning_chars: int) -> g.Usage:
        """For an upstream that reports no usage (clients such as Codex and LlamaIndex need one): the
        documented estimate of tokens.py, input from this step's items, instructions and tools, output from
        the characters of text and tool input (`produced_chars`) and of reasoning that the step produced."""
        reasoning = char_tokens(reasoning_chars)
        return g.Usage(estimate(self.items, self.instructions, self.request.tools),
                       char_tokens(produced_chars) + reasoning, 0, reasoning)


Batch = g.Batch  # the generation events of one upstream read


class FrameParser(Protocol):
    """An adapter's reader of SSE frames: frames in, a batch of generation events out; a failure is kept in
    `error` and raised once the events before it were delivered."""

    error: UpstreamError | None

    def frames(self, frames: list[tuple[str | None, bytes]]) -> Batch: ...


class EventStream(Protocol):
    """Batches of generation events, one batch per upstream read; `aclose` releases the connection."""

    def __aiter__(self) -> AsyncIterator[Batch]: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    """An adapter: one upstream protocol spoken to one upstream (docs/adapters.md)."""

    label: str  # who it is, for logs and route listings

    async def open(self, call: Call) -> EventStream:
        """Start a generation. Raises UpstreamError (before any event) if the upstream refuses it."""
        ...

    async def list_models(self) -> list[dict[str, Any]]:
        """The upstream's models as OpenAI lists them (`{"id", "object": "model", "created", "owned_by"}`)."""
        ...

    async def close(self) -> None:
        """Release the connections (at shutdown)."""
        ...


class TokenCounter(Protocol):
    """What an adapter may offer besides: the upstream's exact count of a call's input tokens, for
    `POST /v1/responses/input_tokens` and `truncation: "auto"` (None: the caller falls back to its estimate)."""

    async def count_tokens(self, call: Call) -> int | None: ...
