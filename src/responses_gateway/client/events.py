"""What the reader yields (`Event`) and what it knows of the Responses stream's event types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TERMINAL = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}
LIFECYCLE = ("response.created", "response.in_progress", "response.queued")

# Text streams: event prefix -> (item type, list of the item the part is in, part type, text field of .done).
TEXT = {
    "response.output_text": ("message", "content", "output_text", "text"),
    "response.refusal": ("message", "content", "refusal", "refusal"),
    "response.reasoning_text": ("reasoning", "content", "reasoning_text", "text"),
    "response.reasoning": ("reasoning", "content", "reasoning_text", "text"),  # Open Responses' name
    "response.reasoning_summary_text": ("reasoning", "summary", "summary_text", "text"),
}
# The prefix used when a text event of a part type has to be synthesized.
TEXT_PREFIX = {"output_text": "response.output_text", "refusal": "response.refusal",
               "reasoning_text": "response.reasoning_text", "summary_text": "response.reasoning_summary_text"}
# Streamed tool input: event prefix -> (item type, field of the item and of the .done event).
ARGS = {
    "response.function_call_arguments": ("function_call", "arguments"),
    "response.custom_tool_call_input": ("custom_tool_call", "input"),
}
ARG_FIELD = {kind: name for kind, name in ARGS.values()}
ARGS_PREFIX = {kind: prefix for prefix, (kind, _) in ARGS.items()}
# Part events: type -> (list of the item, added|done). vLLM has used `reasoning_part` for reasoning_text parts.
PART_EVENTS = {
    "response.content_part.added": ("content", "added"),
    "response.content_part.done": ("content", "done"),
    "response.reasoning_part.added": ("content", "added"),
    "response.reasoning_part.done": ("content", "done"),
    "response.reasoning_summary_part.added": ("summary", "added"),
    "response.reasoning_summary_part.done": ("summary", "done"),
}
INDEX_FIELD = {"content": "content_index", "summary": "summary_index"}
PART_ADDED = {"content": "response.content_part.added", "summary": "response.reasoning_summary_part.added"}
PART_DONE = {"content": "response.content_part.done", "summary": "response.reasoning_summary_part.done"}
STATUS_TYPES = ("message", "function_call", "custom_tool_call")


def obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one: a malformed field reads as an absent one."""
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Event:
    """One event of the stream. `data` is the event's JSON object; its fields read as attributes too.

    `known` is False for event types the reader does not understand (they change nothing);
    `synthesized` is True for events the reader made up because the stream lacked them.
    """

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    synthesized: bool = False
    known: bool = True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "data":
            raise AttributeError(name)
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)
