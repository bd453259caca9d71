"""The neutral generation events: the small vocabulary every upstream adapter speaks to the composer.

Adapters know one upstream protocol each; the composer knows only these. Plain classes with __slots__
because one is made per upstream token.
"""

from __future__ import annotations

from typing import Any, Literal

ToolKind = Literal["function", "custom", "tool_search", "computer"]
"""How a tool is offered to the model: a JSON-arguments function, a freeform-input custom tool, or a
client-run tool_search."""


class TextDelta:
    __slots__ = ("text", "logprobs")

    def __init__(self, text: str, logprobs: list[Any] | None = None):
        self.text = text
        self.logprobs = logprobs


class RefusalDelta:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class ReasoningDelta:
    """Raw reasoning text. `signature` carries an opaque upstream token (e.g. Anthropic's) to round-trip."""

    __slots__ = ("text", "signature")

    def __init__(self, text: str, signature: str | None = None):
        self.text = text
        self.signature = signature


class ToolCallStart:
    """A tool call begins. `key` identifies it among interleaved calls (the upstream's index).

    `kind` is the shape the model was offered: "function", "custom" (freeform input) or "tool_search";
    `name`/`namespace` are the client's names, already mapped back from whatever the adapter offered the
    upstream; `runner` names the gateway-run tool (tools/kits.py) that runs the call, None for the client's.
    """

    __slots__ = ("key", "call_id", "name", "kind", "namespace", "runner")

    def __init__(self, key: int | str, call_id: str, name: str, kind: ToolKind = "function",
                 namespace: str | None = None, runner: str | None = None):
        self.key = key
        self.call_id = call_id
        self.name = name
        self.kind = kind
        self.namespace = namespace
        self.runner = runner


class ToolCallDelta:
    __slots__ = ("key", "text")

    def __init__(self, key: int | str, text: str):
        self.key = key
        self.text = text


class ItemEnd:
    """The upstream's current message or reasoning item ends here: what follows starts a new item, even of
    the same kind (two reasoning items must not merge: each carries its own encrypted content)."""

    __slots__ = ()


class Usage:
    __slots__ = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cache_write_tokens")

    def __init__(self, input_tokens: int = 0, output_tokens: int = 0, cached_tokens: int = 0,
                 reasoning_tokens: int = 0, cache_write_tokens: int = 0):
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cached_tokens = cached_tokens
        self.reasoning_tokens = reasoning_tokens
        self.cache_write_tokens = cache_write_tokens


class Finish:
    """The upstream step ended. reason: "stop" | "tool_calls" | "length" | "content_filter"."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


GenerationEvent = (TextDelta | RefusalDelta | ReasoningDelta | ToolCallStart | ToolCallDelta | ItemEnd | Usage
                   | Finish)

Batch = list[GenerationEvent]
"""The generation events of one upstream read."""
