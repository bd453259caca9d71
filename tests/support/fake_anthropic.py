"""A fake Anthropic Messages upstream that speaks real HTTP on loopback.

It stands in for api.anthropic.com in gateway tests, so what it puts on the wire is what Anthropic sends:
`event: <type>\\ndata: <json>\\n\\n` frames with the documented payloads (`message_start` with usage,
`content_block_start` / `_delta` / `_stop`, a `ping` after the first block starts, `message_delta` with
`stop_reason` and cumulative usage, `message_stop`), `event: error` frames mid-stream, and
`{"type": "error", "error": {...}, "request_id": ...}` bodies with 4xx/5xx/529 before any stream. Like the real
API it may pad the JSON of a frame with spaces before its closing brace (`pad`). It runs its own event loop
in a background thread, like fake_chat.FakeChatUpstream, and shares its script markers. Requests that
Anthropic refuses (`request_problem`: forced tool choice with thinking, a tool-use continuation without its
thinking block, temperature above 1, whitespace-only text, unsafe tool ids...) get its 400 instead of a script.
Claude's computer-use tool (`computer_20251124`, `computer_20250124`, `computer_20241022`) is taken only with
its beta header (`anthropic-beta: computer-use-2025-01-24`...), named `computer`, with the display's size in
whole pixels (`computer_problem`); `computer_use_block` is Claude's call of it.

    with FakeAnthropic() as up:
        up.enqueue(message_stream(text_block(0, ["Hel", "lo"])))
        ...  # point AnthropicUpstream at up.url
        assert up.requests[0].body["stream"] is True
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from aiohttp import web

from .fake_chat import DROP, FakeChatUpstream, Json, RecordedRequest, Sleep, Stream, _json_response

__all__ = [
    "DROP", "Json", "Sleep", "Stream", "FakeAnthropic", "block_start", "content_delta", "block_stop",
    "dumps", "error_event", "error_json", "frame", "message_delta", "message_start", "message_stop",
    "message_stream", "ping", "redacted_block", "request_problem", "split", "text_block", "thinking_block", "tool_use_block",
    "usage", "computer_problem", "computer_use_block", "COMPUTER_TOOLS",
]

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
DEFAULT_MODEL = "claude-sonnet-4-5-20250929"


def dumps(obj: Any) -> str:
    """Compact JSON with raw non-ASCII, as Anthropic serialises."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- frames


def frame(payload: dict, pad: int = 0) -> str:
    """One SSE frame; `pad` spaces before the closing brace, as the real API sometimes sends."""
    data = dumps(payload)
    if pad:
        data = data[:-1] + " " * pad + "}"
    return f"event: {payload['type']}\ndata: {data}\n\n"


def ping() -> str:
    return 'event: ping\ndata: {"type": "ping"}\n\n'


def usage(input_tokens: int = 10, output_tokens: int = 1, cache_read: int = 0,
          cache_creation: int = 0) -> dict:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": cache_creation, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def message_start(model: str = DEFAULT_MODEL, id: str | None = None, pad: int = 0, **usage_kw: int) -> str:
    message = {
        "id": id or f"msg_01{uuid.uuid4().hex[:22]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage(**{"output_tokens": 1, **usage_kw}),
    }
    return frame({"type": "message_start", "message": message}, pad)


def block_start(index: int, block: dict, pad: int = 0) -> str:
    return frame({"type": "content_block_start", "index": index, "content_block": block}, pad)


def content_delta(index: int, delta: dict, pad: int = 0) -> str:
    return frame({"type": "content_block_delta", "index": index, "delta": delta}, pad)


def block_stop(index: int, pad: int = 0) -> str:
    return frame({"type": "content_block_stop", "index": index}, pad)


def message_delta(stop_reason: str | None = "end_turn", output_tokens: int = 5, input_tokens: int | None = None,
                  cache_read: int | None = None, cache_creation: int | None = None,
                  stop_sequence: str | None = None, pad: int = 0) -> str:
    """Usage in message_delta is cumulative; recent API versions repeat the input counts here."""
    u: dict = {}
    if input_tokens is not None:
        u["input_tokens"] = input_tokens
    if cache_creation is not None:
        u["cache_creation_input_tokens"] = cache_creation
    if cache_read is not None:
        u["cache_read_input_tokens"] = cache_read
    u["output_tokens"] = output_tokens
    return frame({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                  "usage": u}, pad)


def message_stop(pad: int = 0) -> str:
    return frame({"type": "message_stop"}, pad)


def error_event(type: str = "overloaded_error", message: str = "Overloaded") -> str:
    """The frame Anthropic writes when generation fails after the 200 headers went out."""
    return f'event: error\ndata: {{"type": "error", "error": {{"type": "{type}", "message": "{message}"}}}}\n\n'


# --------------------------------------------------------------------------- blocks


def text_block(index: int, pieces: Iterable[str], pad: int = 0) -> list[str]:
    return [
        block_start(index, {"type": "text", "text": ""}, pad),
        *(content_delta(index, {"type": "text_delta", "text": p}, pad) for p in pieces),
        block_stop(index, pad),
    ]


def thinking_block(index: int, pieces: Iterable[str], signature: str | None, pad: int = 0) -> list[str]:
    """Thinking streams as thinking_delta; its signature comes in one signature_delta just before the stop."""
    frames = [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}, pad),
        *(content_delta(index, {"type": "thinking_delta", "thinking": p}, pad) for p in pieces),
    ]
    if signature is not None:
        frames.append(content_delta(index, {"type": "signature_delta", "signature": signature}, pad))
    frames.append(block_stop(index, pad))
    return frames


def redacted_block(index: int, data: str) -> list[str]:
    """Redacted thinking arrives whole in content_block_start: no deltas."""
    return [block_start(index, {"type": "redacted_thinking", "data": data}), block_stop(index)]


def tool_use_block(index: int, id: str, name: str, fragments: Iterable[str], pad: int = 0) -> list[str]:
    """A tool call: input `{}` at the start, then the input JSON in input_json_delta fragments (the first one
    empty, as the API sends it)."""
    return [
        block_start(index, {"type": "tool_use", "id": id, "name": name, "input": {}}, pad),
        content_delta(index, {"type": "input_json_delta", "partial_json": ""}),
        *(content_delta(index, {"type": "input_json_delta", "partial_json": f}, pad) for f in fragments),
        block_stop(index, pad),
    ]


def computer_use_block(index: int, id: str, action: dict) -> list[str]:
    """Claude calling its computer tool: a tool_use block named `computer` whose input is the action."""
    text = dumps(action)
    return tool_use_block(index, id, "computer", [text[:7], text[7:]])


def message_stream(*blocks: Sequence[str], stop_reason: str | None = "end_turn", input_tokens: int = 10,
                   output_tokens: int = 5, cache_read: int = 0, cache_creation: int = 0,
                   model: str = DEFAULT_MODEL, stop: bool = True, pad: int = 0) -> list[str]:
    """A whole stream as the API sends it: message_start, the blocks (a ping after the first block starts),
    message_delta (`stop_reason=None` leaves it out), message_stop (`stop=False` leaves it out)."""
    frames = [message_start(model, input_tokens=input_tokens, cache_read=cache_read,
                            cache_creation=cache_creation, pad=pad)]
    for i, block in enumerate(blocks):
        frames.extend(block[:1])
        if i == 0:
            frames.append(ping())
        frames.extend(block[1:])
    if not blocks:
        frames.append(ping())
    if stop_reason is not None:
        frames.append(message_delta(stop_reason, output_tokens, input_tokens=input_tokens, cache_read=cache_read,
                                    cache_creation=cache_creation, pad=pad))
    if stop:
        frames.append(message_stop(pad))
    return frames


def split(frames: Sequence[str], size: int) -> list[bytes]:
    """The same bytes cut into pieces of `size` (frames and UTF-8 characters split anywhere)."""
    data = "".join(frames).encode()
    return [data[i:i + size] for i in range(0, len(data), size)]


def error_json(status: int, type: str, message: str) -> Json:
    """An error answer before any stream, as Anthropic sends it."""
    body = {"type": "error", "error": {"type": type, "message": message},
            "request_id": f"req_011{uuid.uuid4().hex[:21]}"}
    return Json(body, status=status)


# --------------------------------------------------------------------------- request validation

TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def request_problem(body: Any) -> str | None:
    """What Anthropic answers 400 `invalid_request_error` to in a Messages request (the rules the gateway
    must keep), with Anthropic's wording; None for a request it accepts."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "messages: Field required"
    messages = body["messages"]
    if not messages:
        return "messages: at least one message is required"
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    temperature = body.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        return "temperature: Input should be less than or equal to 1"
    if thinking and temperature is not None and temperature != 1:
        return ("`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at "
                "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
    top_p = body.get("top_p")
    if thinking and top_p is not None and not 0.95 <= top_p <= 1:
        # (the documented rule: "When thinking is enabled, you can set top_p to values between 1 and 0.95")
        return ("`top_p` must be between 0.95 and 1 when thinking is enabled. Please consult our documentation at "
                "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
    if thinking and (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return "Thinking may not be enabled when `tool_choice` forces tool use."
    for i, message in enumerate(messages):
        content = message.get("content")
        if not content:
            return f"messages.{i}: all messages must have non-empty content except for the optional final " \
                   "assistant message"
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if block.get("type") == "text" and not block.get("text", "").strip():
                return f"messages.{i}.content.{j}.text: text content blocks must contain non-whitespace text"
            for key in ("id", "tool_use_id"):
                if block.get("type") in ("tool_use", "tool_result") and key in block \
                        and not TOOL_ID.match(block[key]):
                    return (f"messages.{i}.content.{j}.{block['type']}.{key}: String should match pattern "
                            "'^[a-zA-Z0-9_-]+$'")
    last = messages[-1]
    if thinking and len(messages) > 1 and last["role"] == "user" and isinstance(last["content"], list) \
            and any(b.get("type") == "tool_result" for b in last["content"]):
        first = messages[-2]["content"][0].get("type") if isinstance(messages[-2]["content"], list) else "text"
        if first not in ("thinking", "redacted_thinking"):
            return (f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                    f"found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a "
                    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
                    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
                    "disable `thinking`.")
    return None


# Claude's computer-use tool versions and the beta header each needs (Anthropic's tool reference)
COMPUTER_TOOLS = {"computer_20251124": "computer-use-2025-11-24", "computer_20250124": "computer-use-2025-01-24",
                  "computer_20241022": "computer-use-2024-10-22"}


def computer_problem(body: Any, headers: dict[str, str]) -> str | None:
    """What Anthropic answers 400 to in a request offering its computer tool, or None: a version without its
    beta header is an unknown tool type; the tool is named `computer`, with a display size in pixels."""
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    for i, tool in enumerate(body.get("tools") or () if isinstance(body, dict) else ()):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if not isinstance(kind, str) or not kind.startswith("computer"):
            continue
        if kind not in COMPUTER_TOOLS or COMPUTER_TOOLS[kind] not in betas:
            return (f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of the expected tags: "
                    "'bash_20250124', 'custom', 'text_editor_20250124', 'text_editor_20250728', "
                    "'web_search_20250305'")
        if tool.get("name") != "computer":
            return f"tools.{i}.{kind}.name: Input should be 'computer'"
        for key in ("display_width_px", "display_height_px"):
            value = tool.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                return f"tools.{i}.{kind}.{key}: Input should be a valid integer"
    return None


# --------------------------------------------------------------------------- server


class FakeAnthropic(FakeChatUpstream):
    """The fake Messages server (see the module docstring): the fake Chat Completions server's machinery,
    answering `POST /v1/messages` with Anthropic's headers and its paginated `GET /v1/models`."""

    POST_PATH = "/v1/messages"
    COUNT_PATH = "/v1/messages/count_tokens"
    COUNT_FIELDS = {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"}

    def __init__(self, models: Sequence[str] = (DEFAULT_MODEL, "claude-haiku-4-5-20251001")) -> None:
        super().__init__(models)
        self._model_requests: list[RecordedRequest] = []

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The GET /v1/models requests received."""
        with self._lock:
            return list(self._model_requests)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._model_requests.clear()

    def _stream_headers(self) -> dict[str, str]:
        return {"cache-control": "no-cache", "request-id": f"req_011{uuid.uuid4().hex[:21]}"}

    def _no_script(self) -> Json:
        return error_json(500, "api_error", "fake anthropic: no script queued")

    async def _play(self, request: web.Request) -> web.StreamResponse:
        """Refuse what Anthropic refuses (`request_problem`), recorded but without using a script."""
        recorded = await self._record(request)
        try:
            problem = request_problem(recorded.body) or computer_problem(recorded.body, recorded.headers)
        except (AttributeError, TypeError, KeyError):
            problem = "messages: Input should be a valid list of messages"
        if problem is None:
            return await super()._play(request)
        with self._lock:
            self._requests.append(recorded)
        return _json_response(error_json(400, "invalid_request_error", problem))

    async def _count(self, request: web.Request) -> web.Response:
        """`POST /v1/messages/count_tokens`: `{"input_tokens"}`; extra fields are refused, as Anthropic does."""
        recorded = await self._record(request)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        extra = sorted(set(body) - self.COUNT_FIELDS)
        if extra or "model" not in body or not isinstance(body.get("messages"), list):
            reason = f"{extra[0]}: Extra inputs are not permitted" if extra else "messages: Field required"
            return _json_response(error_json(400, "invalid_request_error", reason))
        with self._lock:
            self.counted.append(recorded)
        return _json_response(Json({"input_tokens": self.fake_token_count(body)}))

    async def _models(self, request: web.Request) -> web.Response:
        """Anthropic's paginated list: `limit` (default 20), `after_id`, `has_more`, `first_id`/`last_id`."""
        recorded = await self._record(request)
        with self._lock:
            self._model_requests.append(recorded)
        limit = int(request.query.get("limit", "20"))
        after = request.query.get("after_id")
        start = self.models.index(after) + 1 if after in self.models else 0
        page = self.models[start:start + limit]
        data = [{"type": "model", "id": m, "display_name": m.replace("-", " ").title(),
                 "created_at": "2025-09-29T00:00:00Z"} for m in page]
        body = {"data": data, "has_more": start + limit < len(self.models),
                "first_id": page[0] if page else None, "last_id": page[-1] if page else None}
        return _json_response(Json(body))


