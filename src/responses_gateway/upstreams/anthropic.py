"""The Anthropic Messages adapter: a Responses request → `POST /v1/messages`, its stream → generation events.

Speaks Anthropic's documented stream: `message_start` (input and cache usage), `content_block_start` /
`content_block_delta` / `content_block_stop` for text, thinking, redacted_thinking and tool_use blocks
(`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`), `message_delta` (stop_reason,
cumulative usage), `message_stop`, `ping`, and `error` events; and its HTTP errors before the stream
(`{"type": "error", "error": {"type", "message"}}`, 529 when overloaded).

Thinking becomes reasoning whose signature rides on `ReasoningDelta.signature`; the composer seals it into
`encrypted_content`, and anthropic_messages.py turns it back into the blocks Anthropic sent (how several
blocks and redacted thinking are encoded is described there).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

import orjson

from .. import generation as g
from .. import offload
from ..errors import UpstreamError, upstream_status_error
from ..ids import new_id
from .anthropic_messages import REDACTED, build_body, computer_beta, continued
from .base import Batch, Call, Route
from .custom_input import CustomInputDecoder
from .http import BodyStream, HTTPUpstream
from .wire import json_object

log = logging.getLogger("responses_gateway.upstream")

API_VERSION = "2023-06-01"

STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
        "model_context_window_exceeded": "length", "refusal": "content_filter", "pause_turn": "stop"}

CONTEXT_MESSAGES = ("prompt is too long", "context window", "context length", "context limit",
                    "maximum context")


class AnthropicUpstream(HTTPUpstream):
    def __init__(self, route: Route):
        super().__init__(route)
        root = self.base[:-3] if self.base.endswith("/v1") else self.base
        self.api = f"{root}/v1"
        self.label = f"{root} (anthropic messages)"
        self.headers = {"content-type": "application/json", "accept": "text/event-stream",
                        "anthropic-version": API_VERSION}
        if route.api_key:
            self.headers["x-api-key"] = route.api_key

    async def list_models(self) -> list[dict[str, Any]]:
        """Anthropic's model list (every page), in OpenAI's model shape."""
        out: list[dict[str, Any]] = []
        params = {"limit": "1000"}
        for _ in range(50):
            page = await self.get_json(f"{self.api}/models", upstream_http_error, params)
            data = page.get("data") or []
            out.extend(_model(m) for m in data if isinstance(m, dict) and "id" in m)
            if not (page.get("has_more") and page.get("last_id")):
                break
            params = {"limit": "1000", "after_id": page["last_id"]}
        return out

    async def open(self, call: Call) -> MessagesStream:
        body = await offload.run(build_body, call, self.route)
        beta = computer_beta(body)
        headers = None
        if beta is not None:  # beside any beta the route already sends
            given = self.headers.get("anthropic-beta")
            headers = {**self.headers, "anthropic-beta": f"{given},{beta}" if given else beta}
        resp = await self.post(f"{self.api}/messages", body, call.request.model, upstream_http_error, headers)
        return MessagesStream(resp, call, self.route)

    async def count_tokens(self, call: Call) -> int | None:
        """Anthropic's exact count (`/v1/messages/count_tokens`), or None to fall back to the estimate."""
        body = {k: v for k, v in build_body(call, self.route).items()
                if k in ("model", "messages", "system", "tools", "tool_choice", "thinking")}
        found = await self.post_json(f"{self.api}/messages/count_tokens", body)
        count = found.get("input_tokens") if found else None
        return count if isinstance(count, int) else None


def _model(m: dict[str, Any]) -> dict[str, Any]:
    created = 0
    stamp = m.get("created_at")
    if isinstance(stamp, str):
        try:
            created = int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
        except ValueError:
            created = 0
    return {"id": m["id"], "object": "model", "created": created, "owned_by": "anthropic"}


def upstream_http_error(status: int, raw: bytes, model: str | None) -> UpstreamError:
    """An Anthropic error answer (before any stream) as the error OpenAI would give."""
    kind, message = _error_fields(raw)
    return upstream_status_error(status, message, model, code="request_too_large" if status == 413 else None,
                                 model_missing=kind in ("not_found_error", None) and "model" in message.lower(),
                                 context_phrases=CONTEXT_MESSAGES)


def _error_fields(raw: bytes) -> tuple[str | None, str]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, raw.decode(errors="replace").strip()[:500] or "no details"
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(err, dict):
        kind = err.get("type")
        return (kind if isinstance(kind, str) else None), str(err.get("message") or obj)[:2000]
    return None, str(err)[:2000]


class MessagesStream(BodyStream):
    def _events(self) -> AsyncGenerator[Batch, None]:
        self.parser = EventParser(self.call)
        if self.resp.content_type == "application/json":  # a server that ignored `stream: true`
            return self._whole()
        return self.read_sse(self.parser, self._ended)

    async def _whole(self) -> AsyncGenerator[Batch, None]:
        yield message_events(json_object(await self.read_whole(), "an event"), self.parser)

    def _ended(self) -> Batch:
        if not self.parser.stopped:
            raise UpstreamError("The upstream model server ended the stream before message_stop.")
        return []


class _Block:
    """An open content block: what it is and what it needs until its content_block_stop."""

    __slots__ = ("kind", "prefix", "signed", "decoder", "streamed", "input")

    def __init__(self, kind: str, prefix: str = ""):
        self.kind = kind
        self.prefix = prefix  # thinking: the signature-segment prefix (continuing a reasoning item)
        self.signed = False
        self.decoder: CustomInputDecoder | None = None
        self.streamed = False  # tool_use: some input_json_delta text arrived
        self.input = None  # tool_use: the input object of content_block_start


class EventParser:
    """Anthropic stream events → generation events. One JSON decode per event, nothing else per token."""

    def __init__(self, call: Call):
        self.tools = call.tools.by_wire_name
        self.blocks: dict[Any, _Block] = {}  # content block index (as the upstream sent it) -> _Block
        # Thinking blocks with no text or tool call between them end up in one reasoning item: `run` is
        # whether one is open, `run_chars` the length of its text so far (see anthropic_messages.py).
        self.run = False
        self.run_chars = 0
        self.input_tokens = 0
        self.cache_read = 0
        self.cache_creation = 0
        self.output_tokens = 0
        self.usage_seen = False
        self.finish: str | None = None
        self.stopped = False
        self.error: UpstreamError | None = None  # raised once the events before it are delivered

    def frames(self, frames: list[Any]) -> list[Any]:
        batch: list[Any] = []
        if self.stopped:
            return batch  # nothing after message_stop counts
        try:
            for event, data in frames:
                if not data and event == "ping":
                    continue
                self.event(json_object(data, "an event"), event, batch)
                if self.stopped:
                    break
        except UpstreamError as exc:
            self.error = exc
        return batch

    def event(self, obj: dict[str, Any], name: str | None, batch: list[Any]) -> None:
        kind = obj.get("type") or name
        if kind == "content_block_delta":
            self._delta(obj, batch)
        elif kind == "content_block_start":
            self._start(obj, batch)
        elif kind == "content_block_stop":
            index: Any = obj.get("index")
            block = self.blocks.pop(index, None)
            if block is not None and block.kind == "tool_use":
                self._end_tool(index, block, batch)
        elif kind == "message_start":
            self._usage((obj.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            self._usage(obj.get("usage"))
            stop = (obj.get("delta") or {}).get("stop_reason")
            if stop:
                self._end_tools(batch)
                if stop not in STOP:
                    log.info("unknown stop_reason %r treated as end_turn", stop)
                self.finish = STOP.get(stop, "stop")
                batch.append(g.Finish(self.finish))
        elif kind == "message_stop":
            self._end_tools(batch)
            self.stopped = True
            if self.usage_seen:
                batch.append(g.Usage(self.input_tokens + self.cache_read + self.cache_creation,
                                     self.output_tokens, self.cache_read,
                                     cache_write_tokens=self.cache_creation))
        elif kind == "error":
            err = obj.get("error")
            err = err if isinstance(err, dict) else {"message": str(err)}
            code = err.get("type")
            raise UpstreamError(f"The upstream model server reported an error: {err.get('message') or code}",
                                  code=code if isinstance(code, str) and code else "upstream_error")
        # ping, and event types added later, carry nothing for us

    def _delta(self, obj: dict[str, Any], batch: list[Any]) -> None:
        index: Any = obj.get("index")
        delta = obj.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if text:
                self.run = False
                batch.append(g.TextDelta(text))
        elif kind == "input_json_delta":
            block = self.blocks.get(index)
            text = delta.get("partial_json")
            if block is None or block.kind != "tool_use" or not text:
                return
            block.streamed = True
            if block.decoder is not None:
                text = block.decoder.feed(text)
                if not text:
                    return
            batch.append(g.ToolCallDelta(index, text))
        elif kind == "thinking_delta":
            text = delta.get("thinking")
            if text:
                self.run_chars += len(text)
                batch.append(g.ReasoningDelta(text))
        elif kind == "signature_delta":
            signature = delta.get("signature")
            block = self.blocks.get(index)
            if signature and block is not None:
                self._sign(block, signature, batch)
        # citations_delta and others: nothing the Responses stream carries

    def _start(self, obj: dict[str, Any], batch: list[Any]) -> None:
        index: Any = obj.get("index")
        content = obj.get("content_block") or {}
        kind = content.get("type")
        if kind == "text":
            self.blocks[index] = _Block("text")
            if content.get("text"):
                self.run = False
                batch.append(g.TextDelta(content["text"]))
        elif kind in ("thinking", "redacted_thinking"):
            block = self.blocks[index] = _Block(kind, continued(self.run_chars) if self.run else "")
            if not self.run:
                self.run, self.run_chars = True, 0
            if kind == "redacted_thinking":
                if content.get("data"):
                    self._sign(block, REDACTED + content["data"], batch)
                return
            if content.get("thinking"):
                self.run_chars += len(content["thinking"])
                batch.append(g.ReasoningDelta(content["thinking"]))
            if content.get("signature"):
                self._sign(block, content["signature"], batch)
        elif kind == "tool_use":
            self.run = False
            block = self.blocks[index] = _Block("tool_use")
            block.input = content.get("input")
            name = content.get("name") or ""
            call_id = content.get("id") or new_id("call")
            tool = self.tools.get(name)
            if tool is None:
                batch.append(g.ToolCallStart(index, call_id, name))
                return
            if tool.kind == "custom":
                block.decoder = CustomInputDecoder()
            batch.append(g.ToolCallStart(index, call_id, tool.name, tool.kind, tool.namespace, tool.runner))
        else:
            log.debug("content block %r ignored", kind)  # server tools and the like: never offered

    def _sign(self, block: _Block, signature: str, batch: list[Any]) -> None:
        if not block.signed:
            block.signed = True
            signature = block.prefix + signature
        batch.append(g.ReasoningDelta("", signature=signature))

    def _end_tool(self, index: Any, block: _Block, batch: list[Any]) -> None:
        decoder = block.decoder
        if not block.streamed:
            # the whole input came with content_block_start (or there is none: an empty object)
            whole = block.input if isinstance(block.input, dict) and block.input else None
            if decoder is None:
                batch.append(g.ToolCallDelta(index, orjson.dumps(whole or {}).decode()))
            elif whole is not None:
                text = decoder.feed(orjson.dumps(whole).decode())
                if text:
                    batch.append(g.ToolCallDelta(index, text))
        if decoder is not None:
            rest = decoder.finish()
            block.decoder = None
            if rest:
                batch.append(g.ToolCallDelta(index, rest))

    def _end_tools(self, batch: list[Any]) -> None:
        """Blocks the upstream never stopped: finish their input before the step ends."""
        for index, block in list(self.blocks.items()):
            if block.kind == "tool_use":
                self._end_tool(index, block, batch)
        self.blocks = {}

    def _usage(self, usage: Any) -> None:
        """message_start's usage, then message_delta's cumulative counts (each field when present)."""
        if not isinstance(usage, dict):
            return
        self.usage_seen = True
        for key, attr in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                          ("cache_read_input_tokens", "cache_read"),
                          ("cache_creation_input_tokens", "cache_creation")):
            value = usage.get(key)
            if isinstance(value, int):
                setattr(self, attr, value)


def message_events(obj: dict[str, Any], parser: EventParser) -> list[Any]:
    """A whole (non-streamed) Message as one batch of generation events, through the stream parser."""
    if obj.get("type") == "error":
        parser.event(obj, "error", [])
    batch: list[Any] = []
    parser.event({"type": "message_start", "message": {"usage": obj.get("usage")}}, None, batch)
    for index, block in enumerate(obj.get("content") or ()):
        if not isinstance(block, dict):
            continue
        parser.event({"type": "content_block_start", "index": index, "content_block": block}, None, batch)
        parser.event({"type": "content_block_stop", "index": index}, None, batch)
    parser.event({"type": "message_delta", "delta": {"stop_reason": obj.get("stop_reason") or "end_turn"}},
                 None, batch)
    parser.event({"type": "message_stop"}, None, batch)
    return batch
