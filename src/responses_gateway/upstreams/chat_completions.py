"""The Chat Completions adapter: a Responses request → `POST /chat/completions`, its stream → generation events.

Speaks what vLLM, SGLang, Ollama, llama.cpp, LM Studio and OpenAI send: role-only and empty chunks,
`reasoning_content` / `reasoning` deltas, tool calls in fragments by index, refusals, logprobs, a
usage-only final chunk, `[DONE]`, `obfuscation` fields, and errors before or inside the stream.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import orjson

from .. import generation as g
from .. import offload
from ..errors import UpstreamError
from ..ids import new_id
from ..protocol.tools import Tool
from .base import Batch, Call, Route
from .chat_messages import to_messages
from .custom_input import CustomInputDecoder
from .http import BodyStream
from .wire import (
    CUSTOM_INPUT_PARAMETERS,
    OpenAIShaped,
    ToolCallBuffer,
    add_sampling,
    as_function,
    json_object,
)

log = logging.getLogger("responses_gateway.upstream")

CUSTOM_PARAMETERS = {**CUSTOM_INPUT_PARAMETERS, "additionalProperties": False}

FINISH = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "length",
          "content_filter": "content_filter", "eos": "stop", "end_turn": "stop"}


def build_body(call: Call, route: Route) -> dict[str, Any]:
    req = call.request
    body: dict[str, Any] = {
        "model": call.model,
        "messages": to_messages(call.instructions, call.items, route.reasoning_history),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = call.tools
    if tools.offered:
        body["tools"] = [_tool(t) for t in tools.offered]
        if tools.forced is not None:
            body["tool_choice"] = {"type": "function", "function": {"name": tools.forced.wire_name}}
        else:
            body["tool_choice"] = tools.mode
        if req.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = req.parallel_tool_calls
    add_sampling(body, call, route, route.max_tokens_field)
    if req.reasoning is not None and req.reasoning.effort is not None:
        body["reasoning_effort"] = req.reasoning.effort
    fmt = req.text.format if req.text else None
    if fmt is not None and fmt.type == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif fmt is not None and fmt.type == "json_schema":
        schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.json_schema}
        if fmt.strict is not None:
            schema["strict"] = fmt.strict
        if fmt.description:
            schema["description"] = fmt.description
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    if call.want_logprobs:
        body["logprobs"] = True
        if req.top_logprobs:
            body["top_logprobs"] = req.top_logprobs
    return body


def _tool(tool: Tool) -> dict[str, Any]:
    fn = as_function(tool, CUSTOM_PARAMETERS)
    if tool.strict is not None:
        fn["strict"] = tool.strict
    return {"type": "function", "function": fn}


class ChatCompletionsUpstream(OpenAIShaped):
    kind = "chat completions"
    path = "/chat/completions"

    async def open(self, call: Call) -> ChatStream:
        resp = await self.post_call(call, await offload.run(build_body, call, self.route))
        return ChatStream(resp, call, self.route)

    async def count_tokens(self, call: Call) -> int | None:
        """vLLM's (and SGLang's) exact count from `POST /tokenize` at the server root, with the chat template
        applied; None (estimate instead) for servers without it."""
        body = build_body(call, self.route)
        root = self.base[:-3] if self.base.endswith("/v1") else self.base
        found = await self.post_json(f"{root}/tokenize", {k: body[k] for k in ("model", "messages", "tools")
                                                           if k in body})
        count = found.get("count") if found else None
        return count if isinstance(count, int) else None


class ChatStream(BodyStream):
    def _events(self) -> AsyncGenerator[Batch, None]:
        if self.resp.content_type == "application/json":  # a server that ignored `stream: true`
            return self._whole()
        self.parser = ChunkParser(self.call)
        return self.read_sse(self.parser, self._ended)

    async def _whole(self) -> AsyncGenerator[Batch, None]:
        yield completion_events(json_object(await self.read_whole(), "a chunk"), self.call)

    def _ended(self) -> Batch:
        parser = self.parser
        if not parser.done and parser.finish is None:
            raise UpstreamError("The upstream model server ended the stream before finishing.")
        if not parser.usage_seen:  # (servers that ignore stream_options.include_usage)
            return [self.call.estimated_usage(parser.produced, parser.reasoned)]
        return []


class ChunkParser:
    """Chat Completions chunks → generation events. One JSON decode per chunk, nothing else per token."""

    def __init__(self, call: Call):
        self.tools = call.tools.by_wire_name
        self.want_logprobs = call.want_logprobs
        self.calls: dict[int, ToolCallBuffer] = {}  # the upstream's tool call index -> that call
        self.finish: str | None = None
        self.done = False
        self.usage_seen = False
        self.produced = 0  # characters of text and tool arguments, for a usage estimate when none comes
        self.reasoned = 0  # characters of reasoning, the same
        self.error: UpstreamError | None = None  # raised once the events before it are delivered

    def frames(self, frames: list[Any]) -> list[Any]:
        batch: list[Any] = []
        if self.done:
            return batch  # nothing after [DONE] counts
        try:
            for _event, data in frames:
                if data == b"[DONE]":
                    self.done = True
                    self._end_calls(batch)
                    break
                try:
                    obj = orjson.loads(data)
                except orjson.JSONDecodeError:
                    obj = None
                if type(obj) is not dict:
                    obj = json_object(data, "a chunk")  # raises, naming what was wrong
                self.chunk(obj, batch)
        except UpstreamError as exc:
            self.error = exc
        return batch

    def chunk(self, obj: dict[str, Any], batch: list[Any]) -> None:
        error = obj.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            code = error.get("code") if isinstance(error, dict) else None
            raise UpstreamError(f"The upstream model server reported an error: {message}",
                                  code=code if isinstance(code, str) else "upstream_error")
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta and len(delta) == 1 and not self.want_logprobs:
                content = delta.get("content")
                if content and type(content) is str:  # most chunks: one token of text and nothing else
                    self.produced += len(content)
                    batch.append(g.TextDelta(content))
                    delta = None
            if delta:
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning:
                    self.reasoned += len(reasoning)
                    batch.append(g.ReasoningDelta(reasoning))
                content = delta.get("content")
                if content:
                    self.produced += len(content)
                    lp = None
                    if self.want_logprobs and choice.get("logprobs"):
                        lp = _logprobs(choice["logprobs"])
                    batch.append(g.TextDelta(content, lp))
                refusal = delta.get("refusal")
                if refusal:
                    self.produced += len(refusal)
                    batch.append(g.RefusalDelta(refusal))
                tool_calls = delta.get("tool_calls")
                if tool_calls:
                    for tc in tool_calls:
                        self._tool_call(tc, batch)
            finish = choice.get("finish_reason")
            if finish:
                self._end_calls(batch)
                if finish not in FINISH:
                    if finish in ("abort", "error"):
                        raise UpstreamError(f"The upstream model server aborted the generation ({finish}).")
                    log.info("unknown finish_reason %r treated as stop", finish)
                self.finish = FINISH.get(finish, "stop")
                batch.append(g.Finish(self.finish))
        usage = obj.get("usage")
        if usage:
            self.usage_seen = True
            batch.append(_usage(usage))

    def _tool_call(self, tc: dict[str, Any], batch: list[Any]) -> None:
        index = tc.get("index", 0)
        fn = tc.get("function") or {}
        state = self.calls.get(index)
        call_id = tc.get("id")
        if state is not None and call_id and state.call_id != call_id and state.started:
            state = None  # a new call reusing the index
        if state is None:
            state = self.calls[index] = ToolCallBuffer(call_id or new_id("call"), fn.get("name"))
        elif call_id and not state.started:
            state.call_id = call_id
        if fn.get("name") and not state.name:
            state.name = fn["name"]
        args = fn.get("arguments") or ""
        if args:
            self.produced += len(args)
        if state.started:
            state.feed(args, index, batch)
            return
        if args:
            state.pending.append(args)  # held until the name is known
        if state.name:
            self._start(index, state, batch)

    def _start(self, index: int, state: ToolCallBuffer, batch: list[Any]) -> None:
        name = state.name or ""
        tool = self.tools.get(name)
        if tool is None:
            batch.append(g.ToolCallStart(index, state.call_id, name))
        else:
            if tool.kind == "custom":
                state.decoder = CustomInputDecoder()
            batch.append(g.ToolCallStart(index, state.call_id, tool.name, tool.kind, tool.namespace, tool.runner))
        state.begin(index, batch)

    def _end_calls(self, batch: list[Any]) -> None:
        for index, state in self.calls.items():
            if not state.started and state.name:
                self._start(index, state, batch)
            state.finish(index, batch)
        self.calls = {}


def _usage(u: dict[str, Any]) -> g.Usage:
    prompt = u.get("prompt_tokens") or 0
    completion = u.get("completion_tokens") or 0
    details = u.get("prompt_tokens_details") or {}
    reasoning = (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return g.Usage(prompt, completion, details.get("cached_tokens") or 0, reasoning,
                   details.get("cache_write_tokens") or 0)


def _logprobs(lp: dict[str, Any]) -> list[Any]:
    out = []
    for t in lp.get("content") or ():
        out.append({
            "token": t.get("token", ""),
            "logprob": t.get("logprob", 0.0),
            "bytes": t.get("bytes") or [],
            "top_logprobs": [
                {"token": x.get("token", ""), "logprob": x.get("logprob", 0.0), "bytes": x.get("bytes") or []}
                for x in t.get("top_logprobs") or ()
            ],
        })
    return out


def completion_events(obj: dict[str, Any], call: Call) -> list[Any]:
    """A whole (non-streamed) chat completion as one batch of generation events."""
    if obj.get("error"):
        ChunkParser(call).chunk(obj, [])
    choice = (obj.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    parser = ChunkParser(call)
    batch: list[Any] = []
    delta = {k: message.get(k) for k in ("content", "reasoning_content", "reasoning", "refusal")}
    delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(message.get("tool_calls") or ())]
    parser.chunk({"choices": [{"delta": delta, "logprobs": choice.get("logprobs"),
                               "finish_reason": choice.get("finish_reason") or "stop"}],
                  "usage": obj.get("usage")}, batch)
    return batch
