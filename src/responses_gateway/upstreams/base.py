"""What every upstream adapter offers the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from .. import generation as g
from ..errors import UpstreamError
from ..protocol.request import CreateResponse
from ..protocol.tools import ToolSet
from ..tokens import char_tokens, estimate


@dataclass(frozen=True)
class Route:
    """One upstream: where it is, how to talk to it, and the per-upstream policies."""

    kind: str  # "chat_completions" | "anthropic" | "responses" | "demo"
    base_url: str = ""
    api_key: str | None = None
    model: str | None = None  # the model name sent upstream; None sends the request's
    max_tokens: int | None = None  # used when the request sets no max_output_tokens (Anthropic needs one)
    reasoning_history: str = "reasoning_content"  # chat_completions: how earlier reasoning goes back
    max_tokens_field: str = "max_tokens"  # chat_completions: max_tokens | max_completion_tokens
    # Deadlines, seconds (docs/routing.md): connecting; the upstream's answer (its headers); the longest silence
    # between two reads of the stream (a reasoning model may think for minutes); the whole call.
    connect_timeout: float = 30.0
    first_byte_timeout: float | None = 300.0
    read_timeout: float | None = 600.0
    total_timeout: float | None = 3600.0
    context_window: int | None = None  # tokens; lets truncation "auto" fit the input before calling


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


Batch = list[Any]  # the generation events (generation.py) of one upstream read


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
    label: str

    async def open(self, call: Call) -> EventStream:
        """Start a generation. Raises UpstreamError (before any event) if the upstream refuses it."""
        ...

    async def list_models(self) -> list[dict[str, Any]]: ...

    async def close(self) -> None: ...
