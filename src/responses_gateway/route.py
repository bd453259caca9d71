"""One upstream as configured: where it is, how to talk to it, its deadlines and per-upstream policies.

Data only, importing nothing of the gateway: the settings (config.py) make the one route of `--upstream`,
the routing file (routing.py) makes one per rule, and each adapter (upstreams/) reads its own. Kept apart
from the adapters' protocol (upstreams/base.py) so that config and the adapters do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RouteKind = Literal["chat_completions", "anthropic", "responses", "demo"]
"""The upstream protocols, one adapter each (`upstreams/registry.py` maps a kind to its adapter)."""

# How reasoning from earlier turns is sent back to a Chat Completions upstream:
# "reasoning_content" (vLLM, SGLang, DeepSeek-style templates), "reasoning" (newer vLLM), or "drop".
ReasoningHistory = Literal["reasoning_content", "reasoning", "drop"]
# The field that carries max_output_tokens upstream: "max_tokens" (every local server) or
# "max_completion_tokens" (OpenAI's reasoning models reject max_tokens).
MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
# Computer use on a vision model (tools/computer/profiles.py, docs/computer-use.md): the coordinates its actions
# use — pixels of the screenshot as the model saw it (after its processor's resize), or 0..1000 / 0..999 of its
# width and height — and the function it is offered: the gateway's `computer`, the `computer_use` function
# Qwen's models were trained with, or UI-TARS's own action language in text (no tool calling). A named profile presets them for a model family; a route may override each.
ComputerCoordinates = Literal["pixels", "normalized_1000", "normalized_999"]
ComputerFunction = Literal["computer", "computer_use", "ui-tars"]
COMPUTER_PROFILES = ("pixels", "ui-tars-1.5", "qwen2.5-vl", "opencua", "holo", "qwen3-vl", "glm-4.5v")


@dataclass(frozen=True)
class Route:
    """One upstream: where it is, how to talk to it, and the per-upstream policies."""

    kind: RouteKind
    base_url: str = ""
    api_key: str | None = None
    model: str | None = None  # the model name sent upstream; None sends the request's
    max_tokens: int | None = None  # used when the request sets no max_output_tokens (Anthropic needs one)
    # How reasoning from earlier turns goes back. chat_completions: on the assistant message under this field
    # name, or not at all ("drop"). responses: "drop" leaves out reasoning that only has text (its own
    # encrypted reasoning always goes back). anthropic ignores it: only Anthropic-signed thinking can go back.
    reasoning_history: ReasoningHistory = "reasoning_content"
    max_tokens_field: MaxTokensField = "max_tokens"  # chat_completions: the field for max_output_tokens
    # Deadlines, seconds (docs/routing.md): connecting; the upstream's answer (its headers); the longest silence
    # between two reads of the stream (a reasoning model may think for minutes); the whole call.
    connect_timeout: float = 30.0
    first_byte_timeout: float | None = 300.0
    read_timeout: float | None = 600.0
    total_timeout: float | None = 3600.0
    context_window: int | None = None  # tokens; lets truncation "auto" fit the input before calling
    # computer use (tools/computer/): this route's coordinate profile, a name of COMPUTER_PROFILES (None: the
    # --computer-profile default), and what the route changes of it: the coordinates, the model's input resize
    # (smart_resize's pixel bounds), the function offered
    computer_profile: str | None = None
    computer_coordinates: ComputerCoordinates | None = None
    computer_max_pixels: int | None = None
    computer_min_pixels: int | None = None
    computer_function: ComputerFunction | None = None
