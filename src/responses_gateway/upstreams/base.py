"""What every upstream adapter offers the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from ..protocol.request import CreateResponse
from ..protocol.tools import ToolSet


@dataclass
class Call:
    """One generation step as adapters see it: the request, the full input history, the tools offered."""

    request: CreateResponse
    items: list[dict]
    tools: ToolSet
    instructions: str | None = None

    @property
    def want_logprobs(self) -> bool:
        return "message.output_text.logprobs" in (self.request.include or ())


class EventStream(Protocol):
    """Batches of generation events, one batch per upstream read; `aclose` releases the connection."""

    def __aiter__(self) -> AsyncIterator[list]: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    label: str

    async def open(self, call: Call) -> EventStream:
        """Start a generation. Raises UpstreamError (before any event) if the upstream refuses it."""
        ...

    async def list_models(self) -> list[dict]: ...

    async def close(self) -> None: ...
