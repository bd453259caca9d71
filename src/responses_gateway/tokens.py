"""Token estimates for when the upstream cannot count: compaction thresholds, truncation, input_tokens, and
the usage of an upstream response that reports none.

The gateway never sees the upstream's tokenizer, so it estimates from text: about four characters per token
for English prose and code with BPE tokenizers, plus a few tokens of framing per item (role markers, call
ids). The estimate errs high for short words and low for dense CJK text; callers that need exact numbers ask
the upstream (vLLM's /tokenize, Anthropic's count_tokens) and use this only as the fallback.
"""

from __future__ import annotations

from typing import Any

CHARS_PER_TOKEN = 4
ITEM_OVERHEAD = 4  # role/type markers and separators per item, as chat templates add them


def text_tokens(text: str) -> int:
    return char_tokens(len(text))


def char_tokens(chars: int) -> int:
    """Tokens of `chars` characters of text (for a count kept without the text, e.g. of a stream)."""
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _strings(value: Any) -> int:
    """Characters of every string inside a JSON value (keys of content parts excluded: they are framing)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_strings(v) for k, v in value.items() if k not in ("type", "id", "status"))
    if isinstance(value, list):
        return sum(_strings(v) for v in value)
    return 0


def item_tokens(item: dict[str, Any]) -> int:
    return ITEM_OVERHEAD + (_strings(item) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate(items: list[dict[str, Any]], instructions: str | None = None, tools: list[dict[str, Any]] | None = None) -> int:
    """Estimated input tokens of a request: its items, its instructions and its tool definitions."""
    total = sum(item_tokens(item) for item in items)
    if instructions:
        total += ITEM_OVERHEAD + text_tokens(instructions)
    if tools:
        total += sum(item_tokens(tool) for tool in tools)
    return total
